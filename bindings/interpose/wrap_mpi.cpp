// MPI_Init, MPI_Init_thread and MPI_Finalize through PMPI: the interposer asks for
// MPI_THREAD_MULTIPLE (its checkpoint thread makes cairn's MPI calls while the application runs; a code that
// asked for less is not affected by getting more), starts that thread once MPI is up, and completes and
// finalizes cairn before MPI goes down.
#include <mpi.h>

#include "checkpoint_thread.hpp"

extern "C" {

__attribute__((visibility("default"))) int MPI_Init(int* argc, char*** argv) {
  int provided = MPI_THREAD_SINGLE;
  int rc = PMPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  if (rc == MPI_SUCCESS) cairn::interpose::start_checkpoint_thread(provided);
  return rc;
}

__attribute__((visibility("default"))) int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  int got = MPI_THREAD_SINGLE;
  int rc = PMPI_Init_thread(argc, argv, required > MPI_THREAD_MULTIPLE ? required : MPI_THREAD_MULTIPLE, &got);
  if (provided) *provided = got;
  if (rc == MPI_SUCCESS) cairn::interpose::start_checkpoint_thread(got);
  return rc;
}

__attribute__((visibility("default"))) int MPI_Finalize(void) {
  cairn::interpose::finish_checkpoint_thread();
  return PMPI_Finalize();
}

}  // extern "C"
