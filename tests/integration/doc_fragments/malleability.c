/* docs/malleability.md's calls, as a process of a malleable job makes them (examples/malleable has the
 * whole program): what they use is the application's. */
#include <stdint.h>
#include <stdlib.h>

#include <mpi.h>

#include <cairn/cairn.h>

struct state {
  double *a;
  size_t na;
};
void *resize_a(const char *name, size_t new_count, void *user);

void doc_fragment(int argc, char **argv, MPI_Comm comm, int rank, int keep, size_t G, char *path, char **child_argv,
                  struct state state, cairn_distribution block, cairn_distribution replicated, int64_t step,
                  int provided) {
#include DOC_FRAGMENT
}
