// The main() of every MPI unit test binary (tests/unit/mpi/*_test.cpp): MPI with
// MPI_THREAD_MULTIPLE, GoogleTest, ranks other than 0 printing only their failures (with the rank in
// front), and the exit status the worst of all ranks'. `on_init(rank, size)` runs after MPI_Init,
// before the tests.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <functional>

namespace cairn::test {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_, r.file_name() ? r.file_name() : "?", r.line_number(),
                   r.summary());
  }

 private:
  int rank_;
};

inline int run_mpi_tests(int argc, char** argv, const std::function<void(int rank, int size)>& on_init = {}) {
  int provided = 0, rank = 0, size = 1;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  ::testing::InitGoogleTest(&argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (on_init) on_init(rank, size);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  int failed = RUN_ALL_TESTS();
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return failed;
}

}  // namespace cairn::test
