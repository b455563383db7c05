// The default mode of cairn-bench: every level's speed beside the machine's own limit (levels.cpp
// measures, levels_report.cpp prints). docs/performance.md, "How each figure is measured".
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "bench.hpp"

namespace cairn::bench {

// What the measurements found, for the report (rank 0).
struct LevelFigures {
  json figures = json::object();  // the keys every run prints (null when not measured)
  json extra = json::object();    // further figures and details
  json stages = json::object();   // the library's own timings per measurement (from the job history)
  json l1_first_split;            // rank 0's first checkpoints: the copy and the rest (bench_l1; null if unknown)
  // Median times (s) of the figures the targets compare; 0 when not measured.
  double memcpy_s = 0, memcpy_all_s = 0, l1_s = 0, isal_s = 0, rs_s = 0, raw_write_s = 0, raw_read_s = 0, raw_overwrite_s = 0, l3_s = 0;
  double restart_l1_s = 0, restart_l2_s = 0, restart_l3_s = 0, slot_read_s = 0, l1_first_s = 0;
  double slot_read_first_s = 0;  // the faster of the slot read's two first passes (levels_report.cpp)
  double slot_first_write_s = 0;  // the first write of populated, never written slot pages (bench_memcpy)
  double slot_prepare_fresh_s = 0;  // every rank preparing a slot from memory free for a while (bench_memcpy)
  double l3_back_to_back_s = 0;
  double mpi_exchange_s = 0;             // bench_mpi_exchange: the L2 schemes' limit
  double copy_exchange_s = 0;            // bench_copy_exchange: a copy and the exchange by one thread per rank
  double mpi_receive_s = 0;              // bench_mpi_receive: the L2 restart's transfer alone
  std::map<std::string, double> l2_s;    // per scheme: a version protected at L2 (median)
  // The run.
  uint64_t size = 0;
  int cache_versions = 2, set_size = 2, rs_parity = 1;
  double load_start = -1;
  std::string dir, prefix, cache_job;
};

// One JSON object (--json) or a table on stdout: the figures, the targets, and the run's record.
void report_levels(const Options& o, const JobInfo& job, const LevelFigures& f);

}  // namespace cairn::bench
