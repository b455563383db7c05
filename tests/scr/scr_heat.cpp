// scr_heat (C++): the 1-D heat ring of scr_heat.c written as a C++ code would use SCR: iostreams for
// its files, the SCR 1.x calls SCR_Start_checkpoint/SCR_Complete_checkpoint, SCR_Need_checkpoint and
// SCR_Should_exit, and a restart loop that falls back to older checkpoints. Nothing here knows about
// cairn; it is built against scr.h and linked with -lcairn_scr.
//
//   scr_heat_cxx [--cells N] [--steps S]
//
// Checkpoint files: "ckpt/rank_<r>.dat" (a header line "step cells", then the cells in binary). Rank 0 prints
// "result <16 hex digits>" at the end, a hash of every cell of every rank.
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "scr.h"

namespace {

int rank = 0, ranks = 1;
long cells = 4096, steps = 60;

[[noreturn]] void die(const std::string& what) {
  std::cerr << "scr_heat_cxx: rank " << rank << ": " << what << std::endl;
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

std::string routed(const std::string& name) {
  char file[SCR_MAX_FILENAME];
  if (SCR_Route_file(name.c_str(), file) != SCR_SUCCESS) return {};
  return file;
}

std::string ckpt_name() { return "ckpt/rank_" + std::to_string(rank) + ".dat"; }

void checkpoint(long step, const std::vector<double>& u) {
  if (SCR_Start_checkpoint() != SCR_SUCCESS) die("SCR_Start_checkpoint failed");
  std::string file = routed(ckpt_name());
  bool valid = false;
  if (!file.empty()) {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << step << ' ' << cells << '\n';
    out.write(reinterpret_cast<const char*>(u.data() + 1), static_cast<std::streamsize>(cells * sizeof(double)));
    out.close();
    valid = static_cast<bool>(out);
  }
  if (SCR_Complete_checkpoint(valid ? 1 : 0) != SCR_SUCCESS) die("SCR_Complete_checkpoint: not kept");
}

long restart(std::vector<double>& u) {
  int have = 0;
  char name[SCR_MAX_FILENAME];
  for (SCR_Have_restart(&have, name); have; SCR_Have_restart(&have, name)) {
    if (SCR_Start_restart(name) != SCR_SUCCESS) die("SCR_Start_restart failed");
    long step = -1, n = -1;
    std::string file = routed(ckpt_name());
    std::ifstream in(file, std::ios::binary);
    if (in >> step >> n && n == cells && in.get() == '\n')
      in.read(reinterpret_cast<char*>(u.data() + 1), static_cast<std::streamsize>(cells * sizeof(double)));
    int valid = in && n == cells ? 1 : 0;
    if (SCR_Complete_restart(valid) == SCR_SUCCESS) {
      if (rank == 0) std::cout << "scr_heat_cxx: restarted from " << name << " at step " << step << std::endl;
      return step;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--cells") == 0) cells = std::atol(argv[i + 1]);
    else if (std::strcmp(argv[i], "--steps") == 0) steps = std::atol(argv[i + 1]);
    else die("usage: scr_heat_cxx [--cells N] [--steps S]");
  }
  if (SCR_Init() != SCR_SUCCESS) die("SCR_Init failed");
  std::vector<double> u(static_cast<size_t>(cells + 2)), v(u.size());
  for (long i = 0; i < cells; i++) u[static_cast<size_t>(i + 1)] = static_cast<double>((rank * cells + i) % 97) / 97.0;
  long step = restart(u);

  const int left = (rank + ranks - 1) % ranks, right = (rank + 1) % ranks;
  const auto c = static_cast<size_t>(cells);
  while (step < steps) {
    MPI_Sendrecv(&u[1], 1, MPI_DOUBLE, left, 0, &u[c + 1], 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(&u[c], 1, MPI_DOUBLE, right, 1, &u[0], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (size_t i = 1; i <= c; i++) v[i] = u[i] + 0.25 * (u[i - 1] - 2 * u[i] + u[i + 1]);
    u.swap(v);
    ++step;
    int flag = 0;
    if (SCR_Need_checkpoint(&flag) != SCR_SUCCESS) die("SCR_Need_checkpoint failed");
    if (flag && step < steps) checkpoint(step, u);
    if (SCR_Should_exit(&flag) != SCR_SUCCESS) die("SCR_Should_exit failed");
    if (flag) break;
  }
  if (step == steps) {
    std::vector<double> all(rank == 0 ? c * static_cast<size_t>(ranks) : 0);
    MPI_Gather(&u[1], static_cast<int>(cells), MPI_DOUBLE, all.data(), static_cast<int>(cells), MPI_DOUBLE, 0,
               MPI_COMM_WORLD);
    if (rank == 0) {
      uint64_t h = 1469598103934665603ULL;
      const auto* b = reinterpret_cast<const unsigned char*>(all.data());
      for (size_t i = 0; i < all.size() * sizeof(double); i++) h = (h ^ b[i]) * 1099511628211ULL;
      std::printf("result %016llx\n", static_cast<unsigned long long>(h));
    }
  }
  if (SCR_Finalize() != SCR_SUCCESS) die("SCR_Finalize failed");
  MPI_Finalize();
  return 0;
}
