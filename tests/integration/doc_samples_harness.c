/* The solver the documentation's whole-program samples call (doc_samples_test.py): `compute(grid)` in C,
 * `call compute(grid)` in Fortran (an external procedure: compute_), on an array of 65536 doubles. One
 * step adds (i % 7) + 1 to element i (element i in memory order), so each step changes the answer: a
 * restart that repeats or skips a step is seen. At exit each rank prints the sum of its array after the
 * newest step, exact in a double (integers below 2^53), as "sample answer rank R sum S", once MPI is
 * finalized. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define SAMPLE_ELEMENTS (1 << 16)

static double sample_sum;
static int sample_rank = -1;

/* Only a program that finished (MPI finalized) answers: not one that ended in MPI_Abort. */
static void sample_report(void) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (sample_rank >= 0 && finalized) printf("sample answer rank %d sum %.17g\n", sample_rank, sample_sum);
  fflush(stdout);
}

void compute(double *grid) {
  if (sample_rank < 0) {
    MPI_Comm_rank(MPI_COMM_WORLD, &sample_rank);
    atexit(sample_report);
  }
  double sum = 0;
  for (int i = 0; i < SAMPLE_ELEMENTS; i++) {
    grid[i] += (double)(i % 7 + 1);
    sum += grid[i];
  }
  sample_sum = sum;
}

void compute_(double *grid) { compute(grid); }
