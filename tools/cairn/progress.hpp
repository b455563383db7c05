// A progress bar for the commands that read or write whole versions (verify, flush, clean, the run's
// migration).
#pragma once

#include <cstdint>
#include <string>

namespace cairn::tool {

// A progress bar on stderr, drawn only when stderr is a terminal; otherwise every call is free.
class Progress {
 public:
  Progress(std::string what, uint64_t total_bytes);
  ~Progress();
  void add(uint64_t bytes);
  void finish();  // erases the bar

 private:
  void draw(bool force);
  std::string what_;
  uint64_t total_ = 0, done_ = 0;
  bool enabled_ = false, drawn_ = false;
  int64_t last_draw_ns_ = 0;
};

}  // namespace cairn::tool
