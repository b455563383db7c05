// cairn-bench --service --placement, one application (an MPI job started by service_placement.cpp): its
// state, `versions` checkpoints `interval` apart (a sleep stands for the compute). The application does
// not wait for its versions, as a real one does not: it calls cairn_probe_agents (so that a change of
// agents is taken between versions) and cairn_checkpoint, and goes on computing. A version's drain is
// from the cairn_checkpoint call to the version committed in L3, read afterwards from the job history
// (the l3 event's end_ns, after COMMIT, and who moved it, `via`): when versions drain slower than they
// come, a version waits behind the one before it, and that wait is part of its drain. The figures are
// over the second half of the versions (the steady state); every version's drain is listed beside them.
#include <mpi.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "base/history_line.hpp"
#include "bench.hpp"
#include "cairn/cairn.h"
#include "service/service_placement.hpp"

namespace stdfs = std::filesystem;

namespace cairn::bench {
namespace {

double steady_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Unix time in nanoseconds: the history's clock.
int64_t unix_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

struct Committed {
  int64_t end_ns = 0;
  std::string via;
};

// The history of this launch: the versions in the order they were taken (l1), and each one's commit (l3).
void read_history(const std::string& prefix, std::vector<uint64_t>* taken, std::map<uint64_t, Committed>* committed) {
  std::ifstream in(prefix + "/.cairn/history");
  for (std::string text; std::getline(in, text);) {
    auto line = cairn::history::decode_line(text);
    if (!line) continue;
    const nlohmann::json& j = *line;
    auto v = j.find("version");
    if (v == j.end() || !v->is_number_unsigned()) continue;
    const std::string ev = j.value("ev", "");
    if (ev == "l1") taken->push_back(v->get<uint64_t>());
    auto end = j.find("end_ns");
    if (ev == "l3" && end != j.end() && end->is_number_integer())
      (*committed)[v->get<uint64_t>()] = {end->get<int64_t>(), j.value("via", "embedded")};
  }
}

double max_over(double x) {
  double m = 0;
  MPI_Allreduce(&x, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

}  // namespace

int run_placement_child(const ServiceOptions& o, int argc, char** argv) {
  int provided = 0, rank = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int i = std::clamp(o.child_app, 0, 2);
  const uint64_t bytes = app_size(o, i);
  std::vector<float> state(bytes / sizeof(float));
  for (size_t k = 0; k < state.size(); ++k) state[k] = static_cast<float>((k * 2654435761u + rank) % 1000);
  const std::string name = "app" + std::to_string(i), prefix = o.child_dir + "/" + name;
  setenv("CAIRN_PREFIX", prefix.c_str(), 1);
  setenv("CAIRN_CACHE_DIR", o.cache_dir.c_str(), 1);
  setenv("CAIRN_JOB", (stdfs::path(o.child_dir).filename().string() + "-" + name).c_str(), 1);
  setenv("CAIRN_NODE", ("node" + std::to_string(rank)).c_str(), 1);
  setenv("CAIRN_REDUNDANCY", "single", 1);
  setenv("CAIRN_FLUSH_EVERY", "1", 1);
  setenv("CAIRN_FLUSH_ON_FINALIZE", "false", 1);
  setenv("CAIRN_SERVICE", o.child_service.c_str(), 1);
  setenv("CAIRN_SERVICE_TIMEOUT", "300", 1);
  setenv("CAIRN_SERVICE_PROVIDER", o.provider.c_str(), 1);
  setenv("CAIRN_SERVICE_BUFFER_POOL", kBufferPool, 1);
  setenv("CAIRN_LOG", "warn", 1);
  int rc = cairn_init(MPI_COMM_WORLD, nullptr);
  if (rc == CAIRN_SUCCESS) rc = cairn_protect("data", state.data(), state.size(), CAIRN_FLOAT);
  std::vector<int64_t> called_ns;     // rank 0's cairn_checkpoint call, per version
  std::vector<double> blocking;       // the slowest rank's time in cairn_checkpoint
  std::vector<int> agents_changed;    // versions (from 0) before which some rank's agent had changed
  for (int v = 0; v < o.versions && rc == CAIRN_SUCCESS; ++v) {
    std::this_thread::sleep_for(std::chrono::duration<double>(kApps[i].interval_s));
    for (auto& x : state) x = x * 0.5f + 1.0f;
    int changed = 0;
    rc = cairn_probe_agents(&changed);
    if (rc != CAIRN_SUCCESS) break;
    if (max_over(changed) > 0) agents_changed.push_back(v);
    MPI_Barrier(MPI_COMM_WORLD);
    called_ns.push_back(unix_ns());
    double t0 = steady_now();
    rc = cairn_checkpoint();
    blocking.push_back(max_over(steady_now() - t0));
  }
  if (rc == CAIRN_SUCCESS) rc = cairn_wait();  // every version committed (or failed) before the report
  if (rank == 0)
    for (double t0 = steady_now(); steady_now() - t0 < 120 && access((o.child_dir + "/all-placed").c_str(), F_OK) != 0;)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  MPI_Barrier(MPI_COMM_WORLD);
  if (rc != CAIRN_SUCCESS) fprintf(stderr, "cairn-bench --placement: rank %d: %s: %s\n", rank, cairn_strerror(rc), cairn_last_error());
  if (rc == CAIRN_SUCCESS) rc = cairn_finalize();
  if (rank == 0 && rc == CAIRN_SUCCESS) {
    std::vector<uint64_t> taken;
    std::map<uint64_t, Committed> committed;
    read_history(prefix, &taken, &committed);
    // The figures count the second half of the versions, the steady state: the first half holds the first
    // version (it also opens the slots), the controller's measuring and, with dynamic agents, its change
    // and the versions that had queued at the old allotment draining away. drains_s lists every version.
    const int first = std::max(1, static_cast<int>(called_ns.size()) / 2);
    ojson drains = ojson::array(), via = ojson::object(), changed = ojson::array();
    for (int v : agents_changed) changed.push_back(v + 1);
    std::vector<double> measured, blocked;
    bool all_committed = taken.size() == called_ns.size();
    for (size_t k = 0; k < called_ns.size(); ++k) {
      auto c = k < taken.size() ? committed.find(taken[k]) : committed.end();
      if (c == committed.end()) {
        all_committed = false;
        drains.push_back(nullptr);
        continue;
      }
      double d = static_cast<double>(c->second.end_ns - called_ns[k]) / 1e9;
      drains.push_back(r3(d));
      via[c->second.via] = via.value(c->second.via, 0) + 1;
      if (static_cast<int>(k) >= first) {
        measured.push_back(d);
        blocked.push_back(blocking[k]);
      }
    }
    const double med = bench::median(measured), mx = measured.empty() ? 0 : *std::max_element(measured.begin(), measured.end());
    ojson j = {{"app", i},
               {"bytes_per_rank", bytes},
               {"interval_s", kApps[i].interval_s},
               {"versions", called_ns.size()},
               {"measured_from_version", first + 1},
               {"versions_measured", measured.size()},
               {"drain_median_s", measured.empty() ? ojson(nullptr) : r3(med)},
               {"drain_max_s", measured.empty() ? ojson(nullptr) : r3(mx)},
               {"within_interval", all_committed && !measured.empty() && mx <= kApps[i].interval_s},
               {"blocking_median_s", r3(bench::median(blocked))},
               {"blocking_max_s", r3(blocked.empty() ? 0 : *std::max_element(blocked.begin(), blocked.end()))},
               {"drains_s", drains},
               {"agents_changed_before", changed},
               {"via", via}};
    std::ofstream(o.child_dir + "/" + name + ".json") << j.dump();
  }
  MPI_Finalize();
  return rc == CAIRN_SUCCESS ? 0 : 1;
}

}  // namespace cairn::bench
