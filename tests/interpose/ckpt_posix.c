/* ckpt_posix: an unmodified code that checkpoints with POSIX calls (ckpt_apps.h has the computation).
 * Every K steps: open(D/step<s>.rank<r>.tmp, O_CREAT|O_TRUNC) and write a header, close it (and wait
 * --pause-ms), open it again with O_APPEND and write the cells, fsync, close, then rename it to .bin (the
 * usual atomic-write pattern), and unlink the checkpoint before the previous one. At start it scans D with opendir/readdir for its
 * newest step and reads it with open/fstat/read. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_apps.h"

static int write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return 0;
    p += w;
    n -= (size_t)w;
  }
  return 1;
}

static int write_ckpt(struct app *a, long step) {
  char tmp[512], path[512];
  app_path(a, step, "tmp", tmp, sizeof tmp);
  app_path(a, step, "bin", path, sizeof path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return 0;
  int ok = write_all(fd, &step, sizeof step) && write_all(fd, &a->cells, sizeof a->cells);
  if (close(fd) != 0) ok = 0;
  app_sleep(a->pause_ms); /* the header alone is closed: not yet a checkpoint */
  fd = open(tmp, O_WRONLY | O_APPEND);
  if (fd < 0) return 0;
  ok = ok && write_all(fd, a->u + 1, (size_t)a->cells * sizeof(double)) && fsync(fd) == 0;
  if (close(fd) != 0) ok = 0;
  return ok && rename(tmp, path) == 0;
}

static int drop_ckpt(struct app *a, long step) {
  char path[512];
  app_path(a, step, "bin", path, sizeof path);
  return unlink(path) == 0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  struct app a;
  app_init(&a, argc, argv);
  if (a.rank == 0) mkdir(a.dir, 0755);
  MPI_Barrier(MPI_COMM_WORLD);
  long mine = 0, step = 0;
  DIR *d = opendir(a.dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    long s = 0;
    int r = -1, n = 0;
    if (sscanf(e->d_name, "step%ld.rank%d.bin%n", &s, &r, &n) == 2 && e->d_name[n] == '\0' && r == a.rank && s > mine)
      mine = s;
  }
  if (d) closedir(d);
  long newest = app_agree(mine);
  char path[512];
  if (newest > 0) {
    app_path(&a, newest, "bin", path, sizeof path);
    int fd = open(path, O_RDONLY);
    struct stat st;
    long n = 0;
    size_t want = 2 * sizeof(long) + (size_t)a.cells * sizeof(double);
    if (fd < 0 || fstat(fd, &st) != 0 || (size_t)st.st_size != want || read(fd, &step, sizeof step) != sizeof step ||
        read(fd, &n, sizeof n) != sizeof n || n != a.cells ||
        read(fd, a.u + 1, (size_t)a.cells * sizeof(double)) != (ssize_t)((size_t)a.cells * sizeof(double)))
      app_die(&a, "cannot read the newest checkpoint");
    close(fd);
    if (a.rank == 0) printf("ckpt_posix: restarted at step %ld\n", step);
  }
  app_run(&a, step, write_ckpt, drop_ckpt);
  app_result(&a);
  MPI_Finalize();
  return 0;
}
