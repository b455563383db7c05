/* scr_api_test: SCR's calls one by one on 4 ranks, through scr.h only: SCR_Config before and after
 * SCR_Init, routing outside a phase, checkpoint, output and mixed datasets, a dataset one rank declares
 * invalid, SCR_Delete / SCR_Current / SCR_Drop, a restart rejected by one rank, and misuse (every misuse
 * is SCR_FAILURE with a message, never an abort).
 *
 *   scr_api_test DIR     (DIR: an empty directory; it becomes the working directory and SCR_PREFIX)
 *
 * Exit status 0 when every check held on every rank.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mpi.h>

#include "scr.h"

static int rank, failures;

#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      fprintf(stderr, "scr_api_test: rank %d: line %d: %s\n", rank, __LINE__, #cond); \
      failures++;                                                                    \
    }                                                                                \
  } while (0)

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* A dataset with one file per rank holding "name rank"; valid as given. Returns SCR_Complete_output's rc. */
static int dataset(const char *name, int flags, const char *dir, int valid) {
  char path[256], file[SCR_MAX_FILENAME];
  CHECK(SCR_Start_output(name, flags) == SCR_SUCCESS);
  snprintf(path, sizeof path, "%s/r%d.dat", dir, rank);
  CHECK(SCR_Route_file(path, file) == SCR_SUCCESS);
  CHECK(SCR_Route_file(path, file) == SCR_SUCCESS); /* twice is fine */
  FILE *f = fopen(file, "w");
  CHECK(f != NULL);
  if (f) {
    fprintf(f, "%s %d\n", name, rank);
    fclose(f);
  }
  return SCR_Complete_output(valid);
}

static int have(char *name) {
  int flag = -1;
  CHECK(SCR_Have_restart(&flag, name) == SCR_SUCCESS);
  return flag;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 2 || chdir(argv[1]) != 0) {
    fprintf(stderr, "usage: scr_api_test DIR (an existing directory)\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  char cwd[4096], name[SCR_MAX_FILENAME], file[SCR_MAX_FILENAME];
  CHECK(getcwd(cwd, sizeof cwd) != NULL);

  /* Before SCR_Init: parameters set, queried and unset; routing hands the name back; datasets refused. */
  CHECK(SCR_Config("SCR_FLUSH=3") == NULL);
  const char *v = SCR_Config("SCR_FLUSH");
  CHECK(v && strcmp(v, "3") == 0);
  free((void *)v);
  CHECK(SCR_Configf("SCR_PREFIX=%s", cwd) == NULL);
  CHECK(SCR_Config("CKPT=0 INTERVAL=1 TYPE=SINGLE") == NULL);
  v = SCR_Config("CKPT=0 TYPE");
  CHECK(v && strcmp(v, "SINGLE") == 0);
  free((void *)v);
  CHECK(SCR_Config("SCR_CACHE_SIZE=4") == NULL);
  CHECK(SCR_Config("SCR_CACHE_SIZE=") == NULL);
  CHECK(SCR_Config("SCR_CACHE_SIZE") == NULL);
  CHECK(SCR_Config("SCR_CACHE_SIZE=8") == NULL);
  CHECK(SCR_Config("=broken") == NULL);
  CHECK(SCR_Route_file("some/file", file) == SCR_SUCCESS && strcmp(file, "some/file") == 0);
  CHECK(SCR_Start_output("early", SCR_FLAG_CHECKPOINT) != SCR_SUCCESS);
  CHECK(strstr(SCR_Get_version(), SCR_VERSION) != NULL);

  CHECK(SCR_Init() == SCR_SUCCESS);
  CHECK(SCR_Init() != SCR_SUCCESS);
  CHECK(SCR_Config("SCR_FLUSH=4") == NULL); /* too late: refused with a message */
  v = SCR_Config("SCR_FLUSH");
  CHECK(v && strcmp(v, "3") == 0);
  free((void *)v);
  CHECK(have(name) == 0);

  /* Misuse is an error, never an abort. */
  CHECK(SCR_Complete_output(1) != SCR_SUCCESS);
  CHECK(SCR_Complete_restart(1) != SCR_SUCCESS);
  CHECK(SCR_Start_output("bad", 8) != SCR_SUCCESS);
  CHECK(SCR_Need_checkpoint(NULL) != SCR_SUCCESS);
  CHECK(SCR_Start_restart(name) != SCR_SUCCESS); /* nothing to restart from */
  CHECK(SCR_Route_file(NULL, file) != SCR_SUCCESS);

  CHECK(dataset("a", SCR_FLAG_CHECKPOINT, "a", 1) == SCR_SUCCESS);
  CHECK(dataset("b", SCR_FLAG_CHECKPOINT, "b", 1) == SCR_SUCCESS);
  CHECK(dataset("out1", SCR_FLAG_OUTPUT, "out1", 1) == SCR_SUCCESS);
  CHECK(dataset("c", SCR_FLAG_CHECKPOINT | SCR_FLAG_OUTPUT, "c", 1) == SCR_SUCCESS);
  CHECK(dataset("d", SCR_FLAG_CHECKPOINT | SCR_FLAG_OUTPUT, "d", rank != 1) != SCR_SUCCESS);
  CHECK(dataset(NULL, SCR_FLAG_OUTPUT, "o2", rank != 2) != SCR_SUCCESS);
  /* Output files are in place, whole; those of failed datasets never appear. */
  char path[256];
  snprintf(path, sizeof path, "out1/r%d.dat", rank);
  CHECK(exists(path));
  snprintf(path, sizeof path, "c/r%d.dat", rank);
  CHECK(exists(path));
  snprintf(path, sizeof path, "d/r%d.dat", rank);
  CHECK(!exists(path));
  snprintf(path, sizeof path, "o2/r%d.dat", rank);
  CHECK(!exists(path));
  /* An output file outside the prefix is refused. */
  CHECK(SCR_Start_output("outside", SCR_FLAG_OUTPUT) == SCR_SUCCESS);
  CHECK(SCR_Route_file("/elsewhere/x", file) != SCR_SUCCESS);
  CHECK(SCR_Start_output("nested", SCR_FLAG_OUTPUT) != SCR_SUCCESS);
  CHECK(SCR_Complete_output(1) == SCR_SUCCESS);

  CHECK(have(name) == 1 && strcmp(name, "c") == 0);
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(SCR_Delete("c") == SCR_SUCCESS);
  snprintf(path, sizeof path, "c/r%d.dat", rank);
  CHECK(!exists(path));
  CHECK(have(name) == 1 && strcmp(name, "b") == 0);
  CHECK(SCR_Current("a") == SCR_SUCCESS);
  CHECK(have(name) == 1 && strcmp(name, "a") == 0);
  CHECK(SCR_Current("zzz") != SCR_SUCCESS);
  CHECK(SCR_Drop("out1") == SCR_SUCCESS);
  snprintf(path, sizeof path, "out1/r%d.dat", rank);
  CHECK(exists(path)); /* dropped, not deleted */
  CHECK(SCR_Delete("out1") != SCR_SUCCESS); /* gone from the index */
  CHECK(SCR_Delete("never") != SCR_SUCCESS);

  /* Restart: read a's file, then one rank rejects it; nothing older is left. */
  CHECK(SCR_Start_restart(name) == SCR_SUCCESS && strcmp(name, "a") == 0);
  snprintf(path, sizeof path, "a/r%d.dat", rank);
  CHECK(SCR_Route_file(path, file) == SCR_SUCCESS);
  FILE *f = fopen(file, "r");
  char word[16] = "";
  int r = -1;
  CHECK(f && fscanf(f, "%15s %d", word, &r) == 2 && strcmp(word, "a") == 0 && r == rank);
  if (f) fclose(f);
  CHECK(SCR_Route_file("a/not-there.dat", file) != SCR_SUCCESS);
  CHECK(SCR_Have_restart(&r, name) != SCR_SUCCESS); /* not inside a restart */
  CHECK(SCR_Complete_restart(rank != 3) != SCR_SUCCESS);
  CHECK(have(name) == 0);

  int flag = -1;
  CHECK(SCR_Need_checkpoint(&flag) == SCR_SUCCESS && (flag == 0 || flag == 1));
  CHECK(SCR_Should_exit(&flag) == SCR_SUCCESS && flag == 0);
  CHECK(SCR_Finalize() == SCR_SUCCESS);
  CHECK(SCR_Finalize() != SCR_SUCCESS);
  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("scr_api_test: %d failed checks\n", all);
  MPI_Finalize();
  return all ? 1 : 0;
}
