/* The README's example, whole: protect, restart if possible, checkpoint, exit on request. */
#include <cairn/cairn.h>
#include <stdio.h>

#define N (1 << 16)
static double grid[N];

static void compute(double *g, long step) {
  for (int i = 0; i < N; i++) g[i] = 0.5 * g[i] + (double)((step + i) % 7);
}

int main(int argc, char **argv) {
  int provided, avail = 0, rank, rc;
  long step = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if ((rc = cairn_init(MPI_COMM_WORLD, NULL)) != CAIRN_SUCCESS) {
    fprintf(stderr, "cairn_init: %s: %s\n", cairn_strerror(rc), cairn_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  cairn_protect("grid", grid, N, CAIRN_DOUBLE);
  cairn_protect("step", &step, 1, CAIRN_LONG);
  if (cairn_restart_available(&avail, NULL) == CAIRN_SUCCESS && avail) cairn_restart();
  while (step < 300) {
    int need = 0, stop = 0;
    compute(grid, step);
    step++; /* before the checkpoint: it saves grid after `step` steps, a state to resume from as is */
    cairn_need_checkpoint(&need);
    if (need || step % 100 == 0) cairn_checkpoint();
    cairn_should_exit(&stop);
    if (stop) break;
  }
  if (rank == 0) printf("quickstart: step %ld, grid[0] = %.6f\n", step, grid[0]);
  cairn_finalize();
  MPI_Finalize();
  return 0;
}
