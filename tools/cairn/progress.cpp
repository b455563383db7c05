#include "progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "format.hpp"

namespace cairn::tool {

Progress::Progress(std::string what, uint64_t total_bytes)
    : what_(std::move(what)), total_(total_bytes), enabled_(isatty(STDERR_FILENO) == 1) {}

Progress::~Progress() { finish(); }

void Progress::add(uint64_t bytes) {
  done_ += bytes;
  if (enabled_) draw(false);
}

void Progress::draw(bool force) {
  int64_t now = now_unix_ns();
  if (!force && now - last_draw_ns_ < 100000000) return;  // 10 redraws a second at most
  last_draw_ns_ = now;
  constexpr int kWidth = 30;
  double frac = total_ ? std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_)) : 1.0;
  int filled = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kWidth - filled), '.');
  fprintf(stderr, "\r%s [%s] %3d%% %s / %s\033[K", what_.c_str(), bar.c_str(), static_cast<int>(frac * 100),
          format_bytes(done_).c_str(), format_bytes(total_).c_str());
  fflush(stderr);
  drawn_ = true;
}

void Progress::finish() {
  if (enabled_ && drawn_) {
    fputs("\r\033[K", stderr);
    fflush(stderr);
  }
  drawn_ = false;
  enabled_ = false;
}

}  // namespace cairn::tool
