// The --snapshot report as a table (snapshot_bench.cpp measures; the JSON's keys are what
// bench/check_bench_json.py checks).
#include <cstdio>
#include <string>

#include "bench.hpp"

namespace cairn::bench {

void print_snapshot_table(const json& out) {
  const json& run = out["run"];
  printf("cairn-bench --snapshot  %s  %s, %lld cores, kernel %s  %d rank(s) on %s CPU(s) each, median of %d x %d "
         "round(s), load %.2f -> %.2f\n",
         run["date"].get<std::string>().c_str(), run["cpu"].get<std::string>().c_str(),
         run["cores_online"].get<long long>(), run["kernel"].get<std::string>().c_str(), run["ranks"].get<int>(),
         run["cpus_per_rank"].empty() ? "?" : std::to_string(run["cpus_per_rank"][0].get<int>()).c_str(),
         run["reps"].get<int>(), run["rounds"].get<int>(), run["loadavg_1m_start"].get<double>(), run["loadavg_1m_end"].get<double>());
  printf("cache %s (%s, %s)\n", run["cache_dir"].get<std::string>().c_str(),
         run["cache_fs"].get<std::string>().c_str(), page_size_text(run["cache_page_bytes"].get<long>()).c_str());
  for (const json& s : out["sizes"]) {
    printf("\n%.0f MiB per rank\n", s["size_bytes"].get<double>() / (1 << 20));
    printf("  %-28s %10.2f ms\n", "memcpy", s["memcpy_ms"].get<double>());
    printf("  %-28s %10.2f ms (copy)   %.3f ms (cow)\n", "the snapshot's own part", s["l1_snapshot_copy_ms"].get<double>(),
           s["l1_snapshot_cow_ms"].get<double>());
    printf("  %-28s %10.2f ms   complete %8.2f ms   loop %.2f ms, during x%.2f, after x%.2f   (%.0f%% huge pages)\n",
           "snapshot = copy: blocking", s["l1_blocking_copy_ms"].get<double>(), s["snapshot_complete_copy_ms"].get<double>(),
           s["loop_copy_ms"].get<double>(), s["loop_during_copy_x"].get<double>(), s["loop_after_copy_x"].get<double>(),
           s["state_huge_pages_copy_pct"].get<double>());
    printf("  %-28s %10.2f ms   complete %8.2f ms   loop %.2f ms, during x%.2f, after x%.2f   (%.0f%% huge pages, "
           "%.0f%% at the end, %.0f%% with the tenth writer; %.0f%% protected, %.0f writes waited)\n",
           "snapshot = cow:  blocking", s["l1_blocking_cow_ms"].get<double>(), s["snapshot_complete_cow_ms"].get<double>(),
           s["loop_cow_ms"].get<double>(), s["loop_during_cow_x"].get<double>(), s["loop_after_cow_x"].get<double>(),
           s["state_huge_pages_cow_pct"].get<double>(), s["state_huge_pages_cow_end_pct"].get<double>(),
           s["state_huge_pages_cow_10pct_end_pct"].get<double>(), s["cow_protected_pct"].get<double>(),
           s["cow_writes_waited"].get<double>());
    for (const char* w : {"all", "10pct"})
      printf("  %-28s %10.2f ms (copy)   %.2f ms (cow)   %.2f ms (auto: %s)   [pass %.2f ms, window %d passes]\n",
             (std::string("app_lost_ms, writer ") + w).c_str(), s["app_lost_copy_" + std::string(w) + "_ms"].get<double>(),
             s["app_lost_cow_" + std::string(w) + "_ms"].get<double>(), s["app_lost_auto_" + std::string(w) + "_ms"].get<double>(),
             s["auto_took_" + std::string(w)].get<std::string>().c_str(), s["pass_" + std::string(w) + "_ms"].get<double>(),
             s["window_" + std::string(w) + "_passes"].get<int>());
    printf("  %-28s %10.2f ms (cow, full versions: l1_incremental = off)   [%.2f, %.2f] ms   first pass %.2f ms\n",
           "app_lost_ms, writer 10pct", s["app_lost_cow_full_10pct_ms"].get<double>(),
           s["app_lost_cow_full_10pct_quartiles_ms"][0].get<double>(), s["app_lost_cow_full_10pct_quartiles_ms"][1].get<double>(),
           s["app_lost_cow_full_10pct_first_pass_ms"].get<double>());
    printf("  %-28s %10.2f ms (two threads, process_vm_readv, no writer, no cairn)\n", "the tenth's bytes copied",
           s["two_thread_copy_10pct_ms"].get<double>());
    for (const char* w : {"all", "10pct"}) {
      auto q = [&](const char* m) { return s["app_lost_" + std::string(m) + "_" + w + "_quartiles_ms"]; };
      printf("  %-28s [%.2f, %.2f] ms (copy)   [%.2f, %.2f] ms (cow)   [%.2f, %.2f] ms (auto)   [%d repetitions each]\n",
             (std::string("  its quartiles, ") + w).c_str(), q("copy")[0].get<double>(), q("copy")[1].get<double>(),
             q("cow")[0].get<double>(), q("cow")[1].get<double>(), q("auto")[0].get<double>(), q("auto")[1].get<double>(),
             static_cast<int>(s["app_lost_copy_" + std::string(w) + "_reps_ms"].size()));
    }
    for (const char* w : {"all", "10pct"}) {
      auto f = [&](const char* m) { return s["app_lost_" + std::string(m) + "_" + w + "_first_pass_ms"].get<double>(); };
      printf("  %-28s %10.2f ms (copy) %10.2f ms (cow) %10.2f ms (auto)\n", (std::string("  of it the first pass, ") + w).c_str(),
             f("copy"), f("cow"), f("auto"));
    }
    for (const char* w : {"all", "10pct"}) {
      const std::string k = std::string("other_core_") + w;
      printf("  %-28s %10.2f ms [%.2f, %.2f]   (%.0f MiB copied and hashed in %.2f ms, another thread, no cairn)\n",
             (std::string("the same bytes' traffic, ") + w).c_str(), s[k + "_ms"].get<double>(),
             s[k + "_quartiles_ms"][0].get<double>(), s[k + "_quartiles_ms"][1].get<double>(),
             s[k + "_bytes"].get<double>() / (1 << 20), s[k + "_helper_ms"].get<double>());
    }
    for (const char* w : {"all", "10pct"})
      printf("  %-28s %10.2f ms waiting for copies   %.0f first writes un-protected in %.2f ms   %.0f blocks un-protected ahead   %.0f served by the copier   (per version)\n",
             (std::string("cow fault handler, ") + w).c_str(), s["cow_fault_wait_" + std::string(w) + "_ms"].get<double>(),
             s["cow_unprotect_faults_" + std::string(w)].get<double>(),
             s["cow_unprotect_wait_" + std::string(w) + "_ms"].get<double>(), s.value("cow_unprotected_ahead_" + std::string(w), 0.0),
             s["cow_late_faults_" + std::string(w)].get<double>());
    for (const auto& [name, t] : s["targets"].items()) {
      if (t["ratio"].is_null()) {
        printf("  target %-22s %-55s %s (%s)\n", name.c_str(), t["what"].get<std::string>().c_str(), "no ratio",
               t.value("why", std::string("not measured")).c_str());
        continue;
      }
      printf("  target %-22s %-55s %6.3f <= %-5.2f %s", name.c_str(), t["what"].get<std::string>().c_str(),
             t["ratio"].get<double>(), t["max_ratio"].get<double>(), t["pass"].get<bool>() ? "met" : "MISSED");
      if (t.contains("other_core_ratio"))
        printf("   (the same bytes copied and hashed by another thread alone: %.3f)", t["other_core_ratio"].get<double>());
      if (t.contains("against_copy_ratio")) {
        char two[32] = "-", copy[32] = "-";
        if (t["two_thread_copy_ratio"].is_number()) snprintf(two, sizeof two, "%.3f", t["two_thread_copy_ratio"].get<double>());
        if (t["against_copy_ratio"].is_number()) snprintf(copy, sizeof copy, "%.3f", t["against_copy_ratio"].get<double>());
        printf("   (against copy: %s; the tenth copied by two threads alone: %s)", copy, two);
      }
      if (t.contains("copy_bound_ms") && t["copy_share_of_loss"].is_number())
        printf("   (the tenth's blocks copied at best in %.2f ms, %s by %d threads: %.3f of the loss)",
               t["copy_bound_ms"].get<double>(), t["copy_bound"]["method"].get<std::string>().c_str(),
               t["copy_bound"]["threads"].get<int>(), t["copy_share_of_loss"].get<double>());
      if (t.contains("interval_95"))
        printf("   (95 %% of resamplings: %.3f-%.3f)", t["interval_95"][0].get<double>(), t["interval_95"][1].get<double>());
      printf("\n");
    }
  }
}

}  // namespace cairn::bench
