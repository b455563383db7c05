/* ckpt_stdio: an unmodified code that checkpoints with C stdio (ckpt_apps.h has the computation).
 * Every K steps: fopen(D/step<s>.rank<r>.bin, "wb"), fwrite, fclose; then it reads the file back and
 * checks it against memory and its size with stat() (as a careful code does), and removes the
 * checkpoint before the previous one. At start it probes with access() for the newest step it has. */
#define _POSIX_C_SOURCE 200809L
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_apps.h"

static int write_file(struct app *a, long step, const char *path) {
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

/* Writes the checkpoint, then reads it back and checks it against memory (and its size with stat). */
static int write_ckpt(struct app *a, long step) {
  char path[512];
  app_path(a, step, "bin", path, sizeof path);
  if (!write_file(a, step, path)) return 0;
  double *check = malloc((size_t)a->cells * sizeof(double));
  long back = 0;
  int ok = check && read_ckpt(a, path, &back, check) && back == step &&
           memcmp(check, a->u + 1, (size_t)a->cells * sizeof(double)) == 0;
  free(check);
  if (!ok) app_die(a, "the checkpoint read back differs from what was written");
  return 1;
}

static int drop_ckpt(struct app *a, long step) {
  char path[512];
  app_path(a, step, "bin", path, sizeof path);
  return remove(path) == 0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  struct app a;
  app_init(&a, argc, argv);
  if (a.rank == 0) mkdir(a.dir, 0755);
  MPI_Barrier(MPI_COMM_WORLD);
  char path[512];
  long step = 0, newest = app_agree(app_newest_by_access(&a, "bin"));
  if (newest > 0) {
    app_path(&a, newest, "bin", path, sizeof path);
    if (!read_ckpt(&a, path, &step, NULL) || step != newest) app_die(&a, "cannot read the newest checkpoint");
    if (a.rank == 0) printf("ckpt_stdio: restarted at step %ld\n", step);
  }
  app_run(&a, step, write_ckpt, drop_ckpt);
  app_result(&a);
  MPI_Finalize();
  return 0;
}
