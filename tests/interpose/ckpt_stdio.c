/* ckpt_stdio: an unmodified code that checkpoints with C stdio (ckpt_apps.h has the computation).
 * Every K steps: fopen(D/step<s>.rank<r>.bin, "wb"), fwrite, fclose; then it reads the file back and
 * checks it against memory and its size with stat() (as a careful code does), and removes the
 * checkpoint before the previous one. At start it probes with access() for the newest step it has. */
#define _POSIX_C_SOURCE 200809L
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_apps.h"

static int write_ckpt(struct app *a, long step, const char *path) {
  FILE *f = fopen(path, "wb");
  if (!f) return 0;
  int ok = fwrite(&step, sizeof step, 1, f) == 1 && fwrite(&a->cells, sizeof a->cells, 1, f) == 1 &&
           fwrite(a->u + 1, sizeof(double), (size_t)a->cells, f) == (size_t)a->cells;
  return fclose(f) == 0 && ok;
}

/* Reads a checkpoint into `cells` (NULL: the application's own); 1 on success. */
static int read_ckpt(struct app *a, const char *path, long *step, double *cells) {
  struct stat st;
  size_t want = 2 * sizeof(long) + (size_t)a->cells * sizeof(double);
  if (stat(path, &st) != 0 || (size_t)st.st_size != want) return 0;
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  long n = 0;
  int ok = fread(step, sizeof *step, 1, f) == 1 && fread(&n, sizeof n, 1, f) == 1 && n == a->cells &&
           fread(cells ? cells : a->u + 1, sizeof(double), (size_t)a->cells, f) == (size_t)a->cells;
  fclose(f);
  return ok;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  struct app a;
  app_init(&a, argc, argv);
  if (a.rank == 0) mkdir(a.dir, 0755);
  MPI_Barrier(MPI_COMM_WORLD);
  char path[512];
  long mine = 0, step = 0;
  for (long s = a.steps - 1; s >= a.every && !mine; s--) {
    if (s % a.every) continue;
    app_path(&a, s, "bin", path, sizeof path);
    if (access(path, R_OK) == 0) mine = s;
  }
  long newest = app_agree(mine);
  if (newest > 0) {
    app_path(&a, newest, "bin", path, sizeof path);
    if (!read_ckpt(&a, path, &step, NULL) || step != newest) app_die(&a, "cannot read the newest checkpoint");
    if (a.rank == 0) printf("ckpt_stdio: restarted at step %ld\n", step);
  }
  double *check = malloc((size_t)a.cells * sizeof(double));
  while (step < a.steps) {
    app_step(&a);
    step++;
    if (step % a.every || step == a.steps) continue;
    app_path(&a, step, "bin", path, sizeof path);
    if (!write_ckpt(&a, step, path)) app_die(&a, "writing a checkpoint failed");
    long back = 0;
    if (!read_ckpt(&a, path, &back, check) || back != step || memcmp(check, a.u + 1, (size_t)a.cells * sizeof(double)))
      app_die(&a, "the checkpoint read back differs from what was written");
    if (step > 2 * a.every) {
      app_path(&a, step - 2 * a.every, "bin", path, sizeof path);
      if (remove(path) != 0) app_die(&a, "removing an old checkpoint failed");
    }
  }
  free(check);
  app_result(&a);
  MPI_Finalize();
  return 0;
}
