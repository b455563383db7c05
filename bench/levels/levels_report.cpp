// The default mode's report (levels.hpp): the figures, their targets beside the machine's limits, and the
// run's record, as one JSON object or a table. The keys are what bench/check_bench_json.py checks.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "levels/levels.hpp"

namespace cairn::bench {
namespace {

// ratio of two rates of the same bytes = inverse ratio of their times.
json target(const char* what, double num_s, double den_s, double min_ratio) {
  json j;
  j["what"] = what;
  j["min_ratio"] = min_ratio;
  if (num_s > 0 && den_s > 0) {
    double ratio = den_s / num_s;  // (bytes / num_s) / (bytes / den_s)
    j["ratio"] = round3(ratio);
    j["pass"] = ratio >= min_ratio;
  } else {
    j["ratio"] = nullptr;
    j["pass"] = nullptr;
  }
  return j;
}

json run_info(const Options& o, const JobInfo& job, const LevelFigures& f) {
  json j = machine_info(f.load_start, g_nranks);
  j["size_bytes"] = f.size;
  // the snapshotter of every session (session.cpp: copy unless CAIRN_SNAPSHOT says otherwise)
  j["snapshot"] = getenv("CAIRN_SNAPSHOT") ? getenv("CAIRN_SNAPSHOT") : "copy";
  j["reps"] = o.reps;
  j["statistic"] = "median of reps; per-rank bytes / slowest rank's time; GB/s = 1e9 bytes/s";
  describe_dirs(j, o.cache_dir, f.dir, f.cache_job);
  j["prefix"] = f.prefix;
  j["job"] = o.child_job;
  j["cache_versions"] = f.cache_versions;
  j["warmup_checkpoints"] = f.cache_versions;
  j["set_size"] = f.set_size;
  j["rs_parity"] = f.rs_parity;
  j["mpi_thread_multiple"] = job.thread_multiple;
  j["cpus_per_rank"] = job.cpus_per_rank;
  j["phases"] = std::vector<std::string>(o.only.begin(), o.only.end());
  if (g_nranks < 2 && (o.wants("l2") || o.wants("restart")))
    j["skipped"] = "L2 and restart from L2: one rank is one failure group";
  return j;
}

void print_table(const Options& o, const LevelFigures& f, const json& out) {
  const json& run = out["run"];
  printf("cairn-bench  %s  %s, %lld cores  %d ranks x %.1f MiB  median of %d  (GB/s = 1e9 B/s)\n",
         run["date"].get<std::string>().c_str(), run["cpu"].get<std::string>().c_str(),
         static_cast<long long>(run["cores_online"].get<long>()), g_nranks, static_cast<double>(f.size) / (1 << 20),
         o.reps);
  printf("load average %.2f at start, %.2f at end\n", run["loadavg_1m_start"].get<double>(),
         run["loadavg_1m_end"].get<double>());
  printf("cache %s (%s, %s), prefix %s (%s)\n\n", o.cache_dir.c_str(), run["cache_fs"].get<std::string>().c_str(),
         page_size_text(run["cache_page_bytes"].get<long>()).c_str(),
         f.prefix.c_str(), run["prefix_fs"].get<std::string>().c_str());
  auto row = [&](const char* label, const char* key) {
    const json& v = out.contains(key) ? out[key] : json(nullptr);
    if (v.is_number()) printf("  %-34s %9.3f GB/s\n", label, v.get<double>());
    else printf("  %-34s %9s\n", label, "-");
  };
  row("memcpy, 1 core", "memcpy_gbps");
  row("memcpy, every rank at once", "memcpy_all_ranks_gbps");
  row("memcpy, 1 core into a shm mapping", "memcpy_shm_gbps");
  row("L1 checkpoint (blocking)", "l1_checkpoint_gbps");
  row("MPI exchange of the state", "mpi_exchange_gbps");
  row("copy + exchange, 1 thread a rank", "copy_exchange_gbps");
  row("L2 partner (until cairn_wait)", "l2_partner_gbps");
  row("L2 xor (until cairn_wait)", "l2_xor_gbps");
  row("L2 rs (until cairn_wait)", "l2_rs_gbps");
  row("ISA-L rs encode, 1 core", "isal_rs_encode_gbps");
  row("cairn rs encode, 1 core", "rs_encode_gbps");
  row("raw write + fsync", "raw_write_gbps");
  row("raw read (page cache dropped)", "raw_read_gbps");
  row("raw overwrite + fsync", "raw_overwrite_gbps");
  row("L3 flush (until cairn_wait)", "l3_flush_gbps");
  row("L3 flush stage (job history)", "l3_flush_stage_gbps");
  row("L3 flush, back to back", "l3_flush_back_to_back_gbps");
  row("L1 slot read (pread or map+memcpy)", "slot_read_gbps");
  row("restart from L1", "restart_l1_gbps");
  row("MPI receive of the state, 1 way", "mpi_receive_gbps");
  row("restart from L2", "restart_l2_gbps");
  row("restart from L3", "restart_l3_gbps");
  printf("\ntargets\n");
  for (auto& [name, t] : out["targets"].items()) {
    const bool at_most = t.contains("max_ratio");  // bytes: at most a share of the full version's
    if (t["ratio"].is_number())
      printf("  %-40s %6.3f %s %.2f  %s\n", t["what"].get<std::string>().c_str(), t["ratio"].get<double>(),
             at_most ? "<=" : ">=", t[at_most ? "max_ratio" : "min_ratio"].get<double>(),
             t["pass"].get<bool>() ? "PASS" : "MISS");
    else
      printf("  %-40s %6s\n", t["what"].get<std::string>().c_str(), "-");
  }
  const json& l3 = out["ratios"]["restart_l3_vs_raw_read"];
  const json& l2 = out["targets"]["restart_l2"];
  const bool l2_bound = l2["receive_then_read_bound"].is_number() && l2["ratio_vs_receive_then_read"].is_number();
  const json& b2b = out["ratios"]["l3_flush_back_to_back_vs_raw_overwrite"];
  const json& first = out["targets"]["restart_l1"]["ratio_vs_slot_read_first_pass"];
  if (l3.is_number() || l2_bound || b2b.is_number() || first.is_number()) printf("\nwithout a target\n");
  if (first.is_number()) printf("  %-40s %6.3f\n", "restart_l1 / slot read's first pass", first.get<double>());
  if (l3.is_number()) printf("  %-40s %6.3f\n", "restart_l3_gbps / raw_read_gbps", l3.get<double>());
  if (b2b.is_number())
    printf("  %-40s %6.3f\n", "l3_flush_back_to_back / raw_overwrite", b2b.get<double>());
  if (l2_bound)
    printf("  %-40s %6.3f (restart_l2 / restart_l1 at most %.3f when receiving, then reading)\n",
           "restart_l2 / (mpi_receive + restart_l1)", l2["ratio_vs_receive_then_read"].get<double>(),
           l2["receive_then_read_bound"].get<double>());
}

}  // namespace

void report_levels(const Options& o, const JobInfo& job, const LevelFigures& f) {
  static const char* kKeys[] = {"memcpy_gbps",     "l1_checkpoint_gbps", "l2_partner_gbps", "l2_xor_gbps",
                                "l2_rs_gbps",      "isal_rs_encode_gbps", "rs_encode_gbps", "raw_write_gbps",
                                "l3_flush_gbps",   "l3_flush_stage_gbps", "slot_read_gbps", "restart_l1_gbps",
                                "restart_l2_gbps", "restart_l3_gbps"};
  json out;
  for (const char* k : kKeys) out[k] = f.figures.contains(k) ? f.figures[k] : json(nullptr);
  json targets;
  targets["l1_checkpoint"] = target("l1_checkpoint_gbps / memcpy_gbps", f.l1_s, f.memcpy_s, 0.7);
  targets["rs_encode"] = target("rs_encode_gbps / isal_rs_encode_gbps", f.rs_s, f.isal_s, 0.8);
  targets["l3_flush"] = target("l3_flush_gbps / raw_write_gbps", f.l3_s, f.raw_write_s, 0.7);
  targets["l1_checkpoint_first"] =
      target("l1_checkpoint_first_gbps / l1_checkpoint_gbps", f.l1_first_s, f.l1_s, 0.8);
  targets["l3_flush_back_to_back"] =
      target("l3_flush_back_to_back_gbps / raw_write_gbps", f.l3_back_to_back_s, f.raw_write_s, 0.7);
  targets["restart_l1"] = target("restart_l1_gbps / slot_read_gbps", f.restart_l1_s, f.slot_read_s, 0.8);
  targets["restart_l2"] = target("restart_l2_gbps / restart_l1_gbps", f.restart_l2_s, f.restart_l1_s, 0.5);
  // A lost rank receives its bytes (mpi_receive_gbps, the transfer alone) and verifies them into its
  // regions as an L1 restart does: where it does the one after the other, restart_l2 / restart_l1 is at
  // most restart_l1's time over the sum (the bound), and restart_l2 against that sum says how much the
  // rest costs. Without a target, for the analysis.
  const double serial_s = f.mpi_receive_s > 0 && f.restart_l1_s > 0 ? f.mpi_receive_s + f.restart_l1_s : 0;
  targets["restart_l2"]["receive_then_read_bound"] = serial_s > 0 ? round3(f.restart_l1_s / serial_s) : json(nullptr);
  targets["restart_l2"]["ratio_vs_receive_then_read"] =
      serial_s > 0 && f.restart_l2_s > 0 ? round3(serial_s / f.restart_l2_s) : json(nullptr);
  // L2 at the speed of its exchange: partner moves each rank's state once, xor and rs as many bytes
  // plus their encode.
  for (const char* scheme : {"partner", "xor", "rs"}) {
    auto it = f.l2_s.find(scheme);
    targets[std::string("l2_") + scheme] =
        target((std::string("l2_") + scheme + "_gbps / mpi_exchange_gbps").c_str(), it == f.l2_s.end() ? 0 : it->second,
               f.mpi_exchange_s, std::string(scheme) == "partner" ? 0.7 : 0.5);
  }
  // L2 beside what a rank's own thread needs to copy its state and exchange it (copy_exchange_gbps),
  // and the best ratio to mpi_exchange_gbps that this leaves where a rank's CPU does both: without a
  // target, for the analysis.
  for (const char* scheme : {"partner", "xor", "rs"}) {
    auto it = f.l2_s.find(scheme);
    json& t = targets[std::string("l2_") + scheme];
    t["ratio_vs_copy_exchange"] =
        it != f.l2_s.end() && it->second > 0 && f.copy_exchange_s > 0 ? round3(f.copy_exchange_s / it->second) : json(nullptr);
    t["copy_exchange_bound"] =
        f.copy_exchange_s > 0 && f.mpi_exchange_s > 0 ? round3(f.mpi_exchange_s / f.copy_exchange_s) : json(nullptr);
  }
  // Every rank copies at once in a checkpoint and a restart: the same ratios against what one rank
  // gets while all copy (memory bandwidth shared), for the analysis; the targets stay as above. The
  // restart also against one core's memcpy, its limit were the slot already in private memory.
  for (const char* t : {"l1_checkpoint", "restart_l1"}) {
    double s_fig = std::string(t) == "l1_checkpoint" ? f.l1_s : f.restart_l1_s;
    targets[t]["ratio_vs_memcpy_all_ranks"] =
        s_fig > 0 && f.memcpy_all_s > 0 ? round3(f.memcpy_all_s / s_fig) : json(nullptr);
  }
  // The first checkpoint against the first write of a slot's pages, its bound where the background
  // preparation (populating) does not make that write cheap: without a target, for the analysis.
  targets["l1_checkpoint_first"]["ratio_vs_slot_first_write"] =
      f.l1_first_s > 0 && f.slot_first_write_s > 0 ? round3(f.slot_first_write_s / f.l1_first_s) : json(nullptr);
  // And against preparing one slot, every rank at once, from memory that was free for a while: where
  // that is slower than the compute before the first checkpoint, the first checkpoint waits for it.
  targets["l1_checkpoint_first"]["ratio_vs_slot_prepare_fresh"] =
      f.l1_first_s > 0 && f.slot_prepare_fresh_s > 0 ? round3(f.slot_prepare_fresh_s / f.l1_first_s) : json(nullptr);
  targets["l1_checkpoint_first"]["rank0_split"] = f.l1_first_split;
  // An incremental version's L1 + L2 + L3 bytes over every rank against the full version's (bench phase
  // "incremental"), per scheme; absent where the phase did not run.
  if (f.extra.contains("incremental_version"))
    for (const char* scheme : {"partner", "xor", "rs"}) {
      const json& m = f.extra["incremental_version"][scheme];
      json t = {{"what", std::string("incremental version bytes (") + scheme + ")"}, {"max_ratio", 0.15}};
      t["ratio"] = m.contains("ratio") ? m["ratio"] : json(nullptr);
      t["pass"] = t["ratio"].is_number() ? json(t["ratio"].get<double>() <= 0.15) : json(nullptr);
      targets[std::string("incremental_version_bytes_") + scheme] = t;
    }
  // Its restart from each level against a full version's, taken and restarted the same way (partner).
  if (f.extra.contains("incremental_version") && f.extra["incremental_version"]["partner"].contains("restart")) {
    const json& r = f.extra["incremental_version"]["partner"]["restart"];
    for (const char* level : {"l1", "l2", "l3"})
      targets[std::string("restart_incremental_") + level] =
          target((std::string("restart of an incremental version, ") + level + " / full").c_str(),
                 r["incremental_ms"][level].get<double>(), r["full_ms"][level].get<double>(), 0.8);
  }
  targets["restart_l1"]["ratio_vs_memcpy"] =
      f.restart_l1_s > 0 && f.memcpy_s > 0 ? round3(f.memcpy_s / f.restart_l1_s) : json(nullptr);
  // And against the faster of the slot read's two first passes (pread, then a mapping): the pread pass reads
  // into the bench's state as the restarts left it, which the kernel may not have written (slot_read_gbps
  // is the later passes', into memory the first pass had the kernel write). On a guest with shadow paging
  // the two differ several times over (docs/performance.md, "The L1 restart tries pread into the regions").
  targets["restart_l1"]["ratio_vs_slot_read_first_pass"] =
      f.restart_l1_s > 0 && f.slot_read_first_s > 0 ? round3(f.slot_read_first_s / f.restart_l1_s) : json(nullptr);
  out["targets"] = targets;
  // Figures without a target, beside their reference: the restart from L3 against a cold raw read; the
  // back-to-back flush, which overwrites the pruned version's files (recycle_flushed), against a raw
  // write over a file's own blocks.
  auto vs = [](double s, double ref_s) { return s > 0 && ref_s > 0 ? json(round3(ref_s / s)) : json(nullptr); };
  out["ratios"] = {{"restart_l3_vs_raw_read", vs(f.restart_l3_s, f.raw_read_s)},
                   {"l3_flush_back_to_back_vs_raw_overwrite", vs(f.l3_back_to_back_s, f.raw_overwrite_s)}};
  for (auto& [k, v] : f.extra.items()) out[k] = v;
  out["stages"] = f.stages;
  out["run"] = run_info(o, job, f);

  if (o.json) {
    printf("%s\n", out.dump(2).c_str());
  } else {
    print_table(o, f, out);
  }
  fflush(stdout);
}

}  // namespace cairn::bench
