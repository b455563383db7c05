/* A job that asks MPI only for MPI_THREAD_FUNNELED: cairn then runs its MPI stages inside the
 * application's cairn calls (docs/architecture.md). It must still protect, flush and recover. Prints
 * `sum <value>` on rank 0 as its last line; a failure-free and a recovered run must print the same. */
#include <cairn/cairn.h>
#include <stdio.h>
#include <stdlib.h>

static void fail(const char *call, int rc) {
  fprintf(stderr, "funneled_app: %s: %s: %s\n", call, cairn_strerror(rc), cairn_last_error());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char **argv) {
  int provided, rank, rc, available = 0, version = 0, level = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  size_t n = 1u << 18;
  double *x = malloc(n * sizeof *x);
  long step = 0;
  if ((rc = cairn_init(MPI_COMM_WORLD, NULL))) fail("cairn_init", rc);
  cairn_protect("x", x, n, CAIRN_DOUBLE);
  cairn_protect("step", &step, 1, CAIRN_LONG);
  if ((rc = cairn_restart_available(&available, &version))) fail("cairn_restart_available", rc);
  if (available) {
    if ((rc = cairn_restart())) fail("cairn_restart", rc);
    cairn_restart_level(&version, &level);
    if (rank == 0) printf("restart: version %d from level L%d\n", version, level);
  } else {
    for (size_t i = 0; i < n; i++) x[i] = 0;
  }
  while (step < 40) {
    for (size_t i = 0; i < n; i++) x[i] = x[i] * 0.5 + (double)((i + (size_t)step) % 7) + rank;
    step++;
    if (step % 5 == 0 && (rc = cairn_checkpoint())) fail("cairn_checkpoint", rc);
    int need = 0;
    if ((rc = cairn_need_checkpoint(&need))) fail("cairn_need_checkpoint", rc);
  }
  double local = 0, total = 0;
  for (size_t i = 0; i < n; i++) local += x[i];
  MPI_Reduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  if ((rc = cairn_finalize())) fail("cairn_finalize", rc);
  if (rank == 0) printf("thread level %d\nsum %.6f\n", provided, total);
  free(x);
  MPI_Finalize();
  return 0;
}
