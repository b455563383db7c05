/* ckpt_mpiio: an unmodified code that checkpoints with MPI-IO, a file per rank opened on MPI_COMM_SELF
 * (ckpt_apps.h has the computation): MPI_File_open(CREATE|WRONLY), MPI_File_write_at of a header and the
 * cells, MPI_File_close; MPI_File_delete for the checkpoint before the previous one. At start it probes
 * with access() for its newest step and reads it with MPI_File_get_size and MPI_File_read_at. */
#define _POSIX_C_SOURCE 200809L
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_apps.h"

static int write_ckpt(struct app *a, long step) {
  char path[512];
  app_path(a, step, "mpiio", path, sizeof path);
  MPI_File fh;
  if (MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh) != MPI_SUCCESS)
    return 0;
  long header[2] = {step, a->cells};
  int ok = MPI_File_write_at(fh, 0, header, 2, MPI_LONG, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
           MPI_File_write_at(fh, (MPI_Offset)sizeof header, a->u + 1, (int)a->cells, MPI_DOUBLE, MPI_STATUS_IGNORE) ==
               MPI_SUCCESS;
  return MPI_File_close(&fh) == MPI_SUCCESS && ok;
}

static int drop_ckpt(struct app *a, long step) {
  char path[512];
  app_path(a, step, "mpiio", path, sizeof path);
  return MPI_File_delete(path, MPI_INFO_NULL) == MPI_SUCCESS;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  struct app a;
  app_init(&a, argc, argv);
  if (a.rank == 0) mkdir(a.dir, 0755);
  MPI_Barrier(MPI_COMM_WORLD);
  char path[512];
  long step = 0, newest = app_agree(app_newest_by_access(&a, "mpiio"));
  if (newest > 0) {
    app_path(&a, newest, "mpiio", path, sizeof path);
    MPI_File fh;
    MPI_Offset size = 0;
    long header[2] = {0, 0};
    if (MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh) != MPI_SUCCESS)
      app_die(&a, "cannot open the newest checkpoint");
    MPI_File_get_size(fh, &size);
    if (size != (MPI_Offset)(sizeof header + (size_t)a.cells * sizeof(double)) ||
        MPI_File_read_at(fh, 0, header, 2, MPI_LONG, MPI_STATUS_IGNORE) != MPI_SUCCESS || header[1] != a.cells ||
        MPI_File_read_at(fh, (MPI_Offset)sizeof header, a.u + 1, (int)a.cells, MPI_DOUBLE, MPI_STATUS_IGNORE) !=
            MPI_SUCCESS)
      app_die(&a, "cannot read the newest checkpoint");
    MPI_File_close(&fh);
    step = header[0];
    if (a.rank == 0) printf("ckpt_mpiio: restarted at step %ld\n", step);
  }
  app_run(&a, step, write_ckpt, drop_ckpt);
  app_result(&a);
  MPI_Finalize();
  return 0;
}
