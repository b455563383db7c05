// The regions' pages faulted in on a thread while a restart is planned. A relaunched code's regions are
// new memory that nothing has touched, so the restart's reads and receives would take a page fault per
// page on the application's critical path (cairn-bench --restart-after-loss: first_touch_s beside
// init_restart_s); MADV_POPULATE_WRITE (Linux 5.14) builds the page tables from a thread instead, while the
// ranks agree on the plan and, after that, ahead of the reader. It changes no byte: a page already present
// is passed over, one written meanwhile by the restart stays as written.
#pragma once

#include <atomic>
#include <cstddef>
#include <thread>
#include <utility>
#include <vector>

namespace cairn {

class RestartPrefault {
 public:
  RestartPrefault() = default;
  RestartPrefault(const RestartPrefault&) = delete;
  RestartPrefault& operator=(const RestartPrefault&) = delete;
  ~RestartPrefault() { finish(); }

  // Starts faulting in `ranges` (pointer, bytes: host memory the restart will write) on a thread, in
  // order, a piece at a time. Nothing if a run is under way already or there is nothing to do. Not
  // thread-safe: the application thread's.
  void start(std::vector<std::pair<void*, size_t>> ranges);
  // Stops at the next piece (what is left is faulted in by the restart's own writes) and joins. Pages
  // faulted in so far, for the log.
  size_t finish();

 private:
  void run(std::vector<std::pair<void*, size_t>> ranges);

  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> faulted_{0};
};

}  // namespace cairn
