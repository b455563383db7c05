// `cairn plot [--out FILE.png] [PREFIX] [--width W] [--json] [--config FILE]`: a PNG timeline of a job's
// checkpoints and the levels each reached, and the bandwidth per level. From the job history
// (<prefix>/.cairn/history, core/history.hpp) when there is one: every launch as a band, its restart
// marked with the version and level, every version at every level, failures, and the bandwidth of each
// level over time. Without a history, from the versions still on disk (docs/tools.md, "Where the times
// come from"): the manifests' created_unix_ns and the mtimes of the L1 records, protected markers and
// COMMIT files. Drawn with a built-in 5x7 bitmap font and written with libpng.
#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.hpp"
#include "common.hpp"
#include "base/fsutil.hpp"
#include "base/history.hpp"
#include "inventory.hpp"

namespace cairn::tool {
namespace {

struct PlotOptions {
  std::string out, prefix, config_path;
  int width = 1000;
  bool json = false;
};

// ---- drawing -------------------------------------------------------------------------------------

struct Rgb {
  uint8_t r, g, b;
};
constexpr Rgb kWhite{255, 255, 255}, kInk{40, 40, 40}, kGrid{225, 225, 225}, kMuted{120, 120, 120};
constexpr Rgb kRed{214, 39, 40};
constexpr Rgb kBand[2] = {{236, 242, 250}, {250, 243, 232}};  // alternate launches
constexpr Rgb kLevelColor[3] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44}};  // L1, L2, L3
const char* const kLevelName[3] = {"L1 cache", "L2 redundancy", "L3 prefix"};

// ASCII 32..126, 5 columns each, bit 0 the top row; bit 7 is the descender row (g, j, p, q, y).
constexpr uint8_t kFont[95][5] = {
    {0x00, 0x00, 0x00, 0x00, 0x00}, {0x00, 0x00, 0x5F, 0x00, 0x00}, {0x00, 0x07, 0x00, 0x07, 0x00},
    {0x14, 0x7F, 0x14, 0x7F, 0x14}, {0x24, 0x2A, 0x7F, 0x2A, 0x12}, {0x23, 0x13, 0x08, 0x64, 0x62},
    {0x36, 0x49, 0x56, 0x20, 0x50}, {0x00, 0x08, 0x07, 0x03, 0x00}, {0x00, 0x1C, 0x22, 0x41, 0x00},
    {0x00, 0x41, 0x22, 0x1C, 0x00}, {0x2A, 0x1C, 0x7F, 0x1C, 0x2A}, {0x08, 0x08, 0x3E, 0x08, 0x08},
    {0x00, 0x80, 0x70, 0x30, 0x00}, {0x08, 0x08, 0x08, 0x08, 0x08}, {0x00, 0x00, 0x60, 0x60, 0x00},
    {0x20, 0x10, 0x08, 0x04, 0x02}, {0x3E, 0x51, 0x49, 0x45, 0x3E}, {0x00, 0x42, 0x7F, 0x40, 0x00},
    {0x72, 0x49, 0x49, 0x49, 0x46}, {0x21, 0x41, 0x49, 0x4D, 0x33}, {0x18, 0x14, 0x12, 0x7F, 0x10},
    {0x27, 0x45, 0x45, 0x45, 0x39}, {0x3C, 0x4A, 0x49, 0x49, 0x31}, {0x41, 0x21, 0x11, 0x09, 0x07},
    {0x36, 0x49, 0x49, 0x49, 0x36}, {0x46, 0x49, 0x49, 0x29, 0x1E}, {0x00, 0x00, 0x14, 0x00, 0x00},
    {0x00, 0x40, 0x34, 0x00, 0x00}, {0x00, 0x08, 0x14, 0x22, 0x41}, {0x14, 0x14, 0x14, 0x14, 0x14},
    {0x00, 0x41, 0x22, 0x14, 0x08}, {0x02, 0x01, 0x59, 0x09, 0x06}, {0x3E, 0x41, 0x5D, 0x59, 0x4E},
    {0x7C, 0x12, 0x11, 0x12, 0x7C}, {0x7F, 0x49, 0x49, 0x49, 0x36}, {0x3E, 0x41, 0x41, 0x41, 0x22},
    {0x7F, 0x41, 0x41, 0x41, 0x3E}, {0x7F, 0x49, 0x49, 0x49, 0x41}, {0x7F, 0x09, 0x09, 0x09, 0x01},
    {0x3E, 0x41, 0x41, 0x51, 0x73}, {0x7F, 0x08, 0x08, 0x08, 0x7F}, {0x00, 0x41, 0x7F, 0x41, 0x00},
    {0x20, 0x40, 0x41, 0x3F, 0x01}, {0x7F, 0x08, 0x14, 0x22, 0x41}, {0x7F, 0x40, 0x40, 0x40, 0x40},
    {0x7F, 0x02, 0x1C, 0x02, 0x7F}, {0x7F, 0x04, 0x08, 0x10, 0x7F}, {0x3E, 0x41, 0x41, 0x41, 0x3E},
    {0x7F, 0x09, 0x09, 0x09, 0x06}, {0x3E, 0x41, 0x51, 0x21, 0x5E}, {0x7F, 0x09, 0x19, 0x29, 0x46},
    {0x26, 0x49, 0x49, 0x49, 0x32}, {0x03, 0x01, 0x7F, 0x01, 0x03}, {0x3F, 0x40, 0x40, 0x40, 0x3F},
    {0x1F, 0x20, 0x40, 0x20, 0x1F}, {0x3F, 0x40, 0x38, 0x40, 0x3F}, {0x63, 0x14, 0x08, 0x14, 0x63},
    {0x03, 0x04, 0x78, 0x04, 0x03}, {0x61, 0x59, 0x49, 0x4D, 0x43}, {0x00, 0x7F, 0x41, 0x41, 0x41},
    {0x02, 0x04, 0x08, 0x10, 0x20}, {0x00, 0x41, 0x41, 0x41, 0x7F}, {0x04, 0x02, 0x01, 0x02, 0x04},
    {0x40, 0x40, 0x40, 0x40, 0x40}, {0x00, 0x03, 0x07, 0x08, 0x00}, {0x20, 0x54, 0x54, 0x78, 0x40},
    {0x7F, 0x28, 0x44, 0x44, 0x38}, {0x38, 0x44, 0x44, 0x44, 0x28}, {0x38, 0x44, 0x44, 0x28, 0x7F},
    {0x38, 0x54, 0x54, 0x54, 0x18}, {0x00, 0x08, 0x7E, 0x09, 0x02}, {0x18, 0xA4, 0xA4, 0x9C, 0x78},
    {0x7F, 0x08, 0x04, 0x04, 0x78}, {0x00, 0x44, 0x7D, 0x40, 0x00}, {0x20, 0x40, 0x40, 0x3D, 0x00},
    {0x7F, 0x10, 0x28, 0x44, 0x00}, {0x00, 0x41, 0x7F, 0x40, 0x00}, {0x7C, 0x04, 0x78, 0x04, 0x78},
    {0x7C, 0x08, 0x04, 0x04, 0x78}, {0x38, 0x44, 0x44, 0x44, 0x38}, {0xFC, 0x18, 0x24, 0x24, 0x18},
    {0x18, 0x24, 0x24, 0x18, 0xFC}, {0x7C, 0x08, 0x04, 0x04, 0x08}, {0x48, 0x54, 0x54, 0x54, 0x24},
    {0x04, 0x04, 0x3F, 0x44, 0x24}, {0x3C, 0x40, 0x40, 0x20, 0x7C}, {0x1C, 0x20, 0x40, 0x20, 0x1C},
    {0x3C, 0x40, 0x30, 0x40, 0x3C}, {0x44, 0x28, 0x10, 0x28, 0x44}, {0x4C, 0x90, 0x90, 0x90, 0x7C},
    {0x44, 0x64, 0x54, 0x4C, 0x44}, {0x00, 0x08, 0x36, 0x41, 0x00}, {0x00, 0x00, 0x77, 0x00, 0x00},
    {0x00, 0x41, 0x36, 0x08, 0x00}, {0x02, 0x01, 0x02, 0x04, 0x02},
};

class Canvas {
 public:
  Canvas(int w, int h) : w_(w), h_(h), px_(static_cast<size_t>(w) * h * 3, 255) {}
  int width() const { return w_; }
  int height() const { return h_; }
  const uint8_t* row(int y) const { return px_.data() + static_cast<size_t>(y) * w_ * 3; }

  void set(int x, int y, Rgb c) {
    if (x < 0 || y < 0 || x >= w_ || y >= h_) return;
    uint8_t* p = px_.data() + (static_cast<size_t>(y) * w_ + x) * 3;
    p[0] = c.r, p[1] = c.g, p[2] = c.b;
  }
  void fill(int x0, int y0, int x1, int y1, Rgb c) {  // inclusive corners, any order
    if (x0 > x1) std::swap(x0, x1);
    if (y0 > y1) std::swap(y0, y1);
    for (int y = std::max(y0, 0); y <= std::min(y1, h_ - 1); ++y)
      for (int x = std::max(x0, 0); x <= std::min(x1, w_ - 1); ++x) set(x, y, c);
  }
  void hline(int x0, int x1, int y, Rgb c) { fill(x0, y, x1, y, c); }
  void vline(int x, int y0, int y1, Rgb c) { fill(x, y0, x, y1, c); }
  void frame(int x0, int y0, int x1, int y1, Rgb c) {
    hline(x0, x1, y0, c), hline(x0, x1, y1, c), vline(x0, y0, y1, c), vline(x1, y0, y1, c);
  }

  // Bresenham; `thick` 2 draws a second line one pixel below.
  void line(int x0, int y0, int x1, int y1, Rgb c, int thick = 1) {
    int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, err = dx + dy;
    for (;;) {
      for (int t = 0; t < thick; ++t) set(x0, y0 + t, c);
      if (x0 == x1 && y0 == y1) break;
      int e2 = 2 * err;
      if (e2 >= dy) err += dy, x0 += sx;
      if (e2 <= dx) err += dx, y0 += sy;
    }
  }
  void cross(int x, int y, int r, Rgb c) {
    line(x - r, y - r, x + r, y + r, c, 2);
    line(x - r, y + r, x + r, y - r, c, 2);
  }

  static int text_width(const std::string& s, int scale) { return static_cast<int>(s.size()) * 6 * scale - scale; }
  static int text_height(int scale) { return 7 * scale; }
  // Top-left corner at (x, y); the descender goes one row below.
  void text(int x, int y, const std::string& s, Rgb c, int scale = 1) {
    for (unsigned char ch : s) {
      if (ch < 32 || ch > 126) ch = '?';
      for (int col = 0; col < 5; ++col)
        for (int bit = 0; bit < 8; ++bit)
          if (kFont[ch - 32][col] >> bit & 1)
            fill(x + col * scale, y + bit * scale, x + col * scale + scale - 1, y + bit * scale + scale - 1, c);
      x += 6 * scale;
    }
  }
  void text_right(int x, int y, const std::string& s, Rgb c, int scale = 1) {
    text(x - text_width(s, scale), y, s, c, scale);
  }
  void text_center(int x, int y, const std::string& s, Rgb c, int scale = 1) {
    text(x - text_width(s, scale) / 2, y, s, c, scale);
  }

 private:
  int w_, h_;
  std::vector<uint8_t> px_;
};

// Writes the canvas as an 8-bit RGB PNG, to FILE.tmp and then renamed over FILE.
Status write_png(const std::string& path, const Canvas& canvas) {
  std::string tmp = path + ".tmp";
  FILE* f = fopen(tmp.c_str(), "wb");
  if (!f) return posix_error("fopen", tmp, errno);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info || setjmp(png_jmpbuf(png))) {  // libpng reports errors by longjmp to here
    png_destroy_write_struct(&png, &info);
    fclose(f);
    remove(tmp.c_str());
    return make_error(Code::ERR_IO, "libpng could not write %s", tmp.c_str());
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, static_cast<png_uint_32>(canvas.width()), static_cast<png_uint_32>(canvas.height()), 8,
               PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < canvas.height(); ++y) png_write_row(png, canvas.row(y));
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  if (fclose(f) != 0) return posix_error("fclose", tmp, errno);
  if (rename(tmp.c_str(), path.c_str()) != 0) return posix_error("rename", path, errno);
  return Status::ok();
}

// ---- the chart -----------------------------------------------------------------------------------

struct Point {
  uint64_t version;
  VersionTimes times;
};

// A "nice" step (1, 2 or 5 times a power of ten) giving about `ticks` ticks over `span`.
double nice_step(double span, int ticks) {
  double raw = span / std::max(ticks, 1);
  double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * p) return m * p;
  return 10 * p;
}

std::string seconds_label(double s, double step) {
  char buf[32];
  if (step >= 1)
    snprintf(buf, sizeof buf, "%.0f s", s);
  else if (step >= 0.1)
    snprintf(buf, sizeof buf, "%.1f s", s);
  else if (step >= 0.001)
    snprintf(buf, sizeof buf, "%.0f ms", s * 1e3);
  else
    snprintf(buf, sizeof buf, "%.2f ms", s * 1e3);
  return buf;
}

// "6.9G", "850M", "12k": a bar's value, in the unit of the axis (bytes per second).
std::string short_rate(double bytes_per_s) {
  char buf[16];
  const char* unit = "";
  double v = bytes_per_s;
  if (v >= 1e9)
    v /= 1e9, unit = "G";
  else if (v >= 1e6)
    v /= 1e6, unit = "M";
  else if (v >= 1e3)
    v /= 1e3, unit = "k";
  snprintf(buf, sizeof buf, v < 10 ? "%.1f%s" : "%.0f%s", v, unit);
  return buf;
}

std::string rate_label(double bytes_per_s) { return format_rate(static_cast<uint64_t>(bytes_per_s), 1.0); }

// Returns the legend's left edge.
int draw_legend(Canvas& c, int right) {
  int lx = right;
  for (int i = 2; i >= 0; --i) {
    lx -= Canvas::text_width(kLevelName[i], 1);
    c.text(lx, 44, kLevelName[i], kInk);
    lx -= 16;
    c.fill(lx, 43, lx + 10, 51, kLevelColor[i]);
    lx -= 24;
  }
  return lx + 24;
}

// Without a history: the versions still on disk, their times from their files.
void draw_disk_chart(Canvas& c, const std::vector<Point>& pts, const std::string& title, const std::string& footer) {
  const int W = c.width(), left = 110, right = W - 30;
  c.text(20, 14, title, kInk, 2);

  draw_legend(c, right);

  // Panel 1: a lane per level; a bar per version from when the level began to when it was reached.
  int64_t t0 = INT64_MAX, t1 = 0;
  for (const auto& p : pts) {
    const VersionTimes& t = p.times;
    for (int64_t v : {t.created_ns, t.l1_ns, t.l2_ns, t.l3_start_ns, t.l3_ns})
      if (v) t0 = std::min(t0, v), t1 = std::max(t1, v);
  }
  double span = t1 > t0 ? static_cast<double>(t1 - t0) / 1e9 : 1.0;
  double lo = -span * 0.02, hi = span * 1.04;
  auto xat = [&](int64_t ns) {
    double s = static_cast<double>(ns - t0) / 1e9;
    return left + static_cast<int>((s - lo) / (hi - lo) * (right - left));
  };
  const int top = 70, lane_h = 56, lanes_bottom = top + 3 * lane_h;
  c.text(20, top - 14, "timeline (time since the first checkpoint still on disk)", kMuted);
  double step = nice_step(hi - lo, 10);
  for (double s = 0; s <= hi; s += step) {
    int x = left + static_cast<int>((s - lo) / (hi - lo) * (right - left));
    c.vline(x, top, lanes_bottom, kGrid);
    c.vline(x, lanes_bottom, lanes_bottom + 4, kInk);
    c.text_center(x, lanes_bottom + 8, seconds_label(s, step), kInk);
  }
  for (int lane = 0; lane < 3; ++lane) {
    int y0 = top + lane * lane_h;
    c.text_right(left - 10, y0 + lane_h / 2 - 7, std::string("L") + char('1' + lane), kLevelColor[lane], 2);
    c.hline(left, right, y0 + lane_h, kGrid);
    int last_label_end = -1000;
    for (const auto& p : pts) {
      const VersionTimes& t = p.times;
      int64_t a = lane == 0 ? t.created_ns : lane == 1 ? t.l1_ns : t.l3_start_ns;
      int64_t b = lane == 0 ? t.l1_ns : lane == 1 ? t.l2_ns : t.l3_ns;
      if (!b) continue;
      if (!a || a > b) a = b;
      int xa = xat(a), xb = std::max(xat(b), xa + 2);
      c.fill(xa, y0 + 24, xb, y0 + lane_h - 8, kLevelColor[lane]);
      std::string label = std::to_string(p.version);
      int lw = Canvas::text_width(label, 1);
      int lxx = (xa + xb) / 2 - lw / 2;
      if (lxx > last_label_end + 4) {
        c.text(lxx, y0 + 12, label, kInk);
        last_label_end = lxx + lw;
      }
    }
  }
  c.frame(left, top, right, lanes_bottom, kInk);

  // Panel 2: bandwidth per version and level (bytes over every rank / time to reach the level).
  const int btop = lanes_bottom + 64, bbottom = c.height() - 70;
  c.text(20, btop - 20, "bandwidth per level (snapshot bytes of all ranks / time to reach the level)", kMuted);
  double maxbw = 0;
  for (const auto& p : pts) {
    const VersionTimes& t = p.times;
    for (double s : {t.l1_seconds(), t.l2_seconds(), t.l3_seconds()})
      if (s > 0) maxbw = std::max(maxbw, static_cast<double>(t.bytes) / s);
  }
  if (maxbw <= 0) {
    c.text_center((left + right) / 2, (btop + bbottom) / 2, "no level durations known", kMuted, 2);
  } else {
    double bstep = nice_step(maxbw, 5), bhi = std::ceil(maxbw / bstep) * bstep;
    for (double v = 0; v <= bhi * 1.0001; v += bstep) {
      int y = bbottom - static_cast<int>(v / bhi * (bbottom - btop));
      c.hline(left, right, y, kGrid);
      c.text_right(left - 8, y - 3, v == 0 ? "0" : rate_label(v), kInk);
    }
    int n = static_cast<int>(pts.size());
    double group = static_cast<double>(right - left) / n;
    int bar = std::max(1, static_cast<int>(group * 0.8 / 3));
    int last_label_end = -1000;
    for (int i = 0; i < n; ++i) {
      const VersionTimes& t = pts[static_cast<size_t>(i)].times;
      int gx = left + static_cast<int>(group * i + (group - 3 * bar) / 2);
      double secs[3] = {t.l1_seconds(), t.l2_seconds(), t.l3_seconds()};
      for (int lv = 0; lv < 3; ++lv) {
        if (secs[lv] <= 0) continue;
        double bw = static_cast<double>(t.bytes) / secs[lv];
        int y = bbottom - static_cast<int>(bw / bhi * (bbottom - btop));
        c.fill(gx + lv * bar, y, gx + (lv + 1) * bar - 1, bbottom, kLevelColor[lv]);
        std::string value = short_rate(bw);
        if (Canvas::text_width(value, 1) <= bar + 2) c.text_center(gx + lv * bar + bar / 2, y - 11, value, kInk);
      }
      std::string label = std::to_string(pts[static_cast<size_t>(i)].version);
      int cx = gx + 3 * bar / 2 - Canvas::text_width(label, 1) / 2;
      if (cx > last_label_end + 4) {
        c.text(cx, bbottom + 8, label, kInk);
        last_label_end = cx + Canvas::text_width(label, 1);
      }
    }
    c.frame(left, btop, right, bbottom, kInk);
    c.text_center((left + right) / 2, bbottom + 24, "version", kInk);
  }
  c.text(20, c.height() - 22, footer, kMuted);
}

// With a history: every launch as a band (its restart marked), every version at every level, the
// failures, and below the bandwidth of each level over time.
void draw_history_chart(Canvas& c, const history::Summary& s, const std::string& title, const std::string& footer) {
  const int W = c.width(), H = c.height(), left = 110, right = W - 30;
  c.text(20, 14, title, kInk, 2);
  const int legend_left = draw_legend(c, right);

  const int64_t t0 = s.first_ns, t1 = s.last_ns;
  const double span = t1 > t0 ? static_cast<double>(t1 - t0) / 1e9 : 1.0;
  const double lo = -span * 0.01, hi = span * 1.03;
  auto xs = [&](double sec) { return left + static_cast<int>((sec - lo) / (hi - lo) * (right - left)); };
  auto xat = [&](int64_t ns) { return xs(static_cast<double>(ns - t0) / 1e9); };
  const int lane_h = std::clamp((H - 300) / 6, 16, 50);
  const int band_top = 66, top = band_top + 20, lanes_bottom = top + 3 * lane_h;
  const double step = nice_step(hi - lo, 10);
  auto time_axis = [&](int y_top, int y_bottom) {
    for (double sec = 0; sec <= hi; sec += step) {
      int x = xs(sec);
      c.vline(x, y_top, y_bottom, kGrid);
      c.vline(x, y_bottom, y_bottom + 4, kInk);
      c.text_center(x, y_bottom + 8, seconds_label(sec, step), kInk);
    }
  };

  // Panel 1: the launches as bands, a lane per level.
  for (const char* sub : {"timeline (time since the first launch began): launches, restarts, versions per level",
                          "timeline (time since the first launch began)", "timeline"})
    if (Canvas::text_width(sub, 1) < legend_left - 30 || std::string(sub) == "timeline") {
      c.text(20, band_top - 14, sub, kMuted);
      break;
    }
  std::vector<std::pair<int, int>> band_x;  // each launch's x range
  for (size_t i = 0; i < s.launches.size(); ++i) {
    const history::Launch& L = s.launches[i];
    int xa = xat(L.start_ns), xb = std::max(xat(L.last_ns), xa + 2);
    band_x.emplace_back(xa, xb);
    c.fill(xa, band_top, xb, lanes_bottom, kBand[i % 2]);
  }
  time_axis(top, lanes_bottom);
  for (size_t i = 0; i < s.launches.size(); ++i) {
    const history::Launch& L = s.launches[i];
    auto [xa, xb] = band_x[i];
    // The label: "launch 2", then what fits of its restart and its end.
    std::string label = "launch " + std::to_string(i + 1);
    for (const auto& r : L.restarts)
      label += ": restart " + std::to_string(r.version) + " " + history::level_name(r.level) + (r.rejected ? " rejected" : "");
    if (!L.finalized) label += " (no finalize)";
    // From the band's left edge up to the next band; else ending at its right edge, from the band
    // before; else cut to the larger room.
    const int next = i + 1 < band_x.size() ? band_x[i + 1].first : right;
    const int prev = i > 0 ? band_x[i - 1].second : left;
    const int room_right = next - xa - 6, room_left = xb - prev - 6;
    const Rgb ink = L.finalized ? kInk : kRed;
    if (Canvas::text_width(label, 1) <= room_right) {
      c.text(xa + 3, band_top + 4, label, ink);
    } else if (Canvas::text_width(label, 1) <= room_left) {
      c.text_right(xb - 3, band_top + 4, label, ink);
    } else {
      std::string fit = label;
      const int room = std::max(room_right, room_left);
      while (!fit.empty() && Canvas::text_width(fit, 1) > room) fit.pop_back();
      if (fit.size() < label.size() && fit.size() > 1) fit.back() = '.';
      if (fit.size() < 3) fit = "#" + std::to_string(i + 1);
      if (room_right >= room_left) c.text(xa + 3, band_top + 4, fit, ink);
      else c.text_right(xb - 3, band_top + 4, fit, ink);
    }
    for (const auto& r : L.restarts) {
      int x = xat(r.end_ns);
      for (int y = top; y <= lanes_bottom; y += 4) c.vline(x, y, y + 1, kInk);  // dashed
      c.fill(x - 3, top, x + 3, top + 2, kInk);
    }
    if (!L.finalized) c.fill(xb - 1, top, xb, lanes_bottom, kRed);  // ended without cairn_finalize (killed?)
  }
  for (int lane = 0; lane < 3; ++lane) {
    int y0 = top + lane * lane_h;
    c.text_right(left - 10, y0 + lane_h / 2 - 7, std::string("L") + char('1' + lane), kLevelColor[lane], 2);
    c.hline(left, right, y0 + lane_h, kGrid);
    int last_label_end = -1000;
    for (const auto& [v, rec] : s.versions) {
      const history::LevelRecord& r = rec.level[lane];
      if (!r.reached) continue;
      int64_t a = r.start_ns, b = r.end_ns;
      if (!a || a > b) a = b;
      int xa = xat(a), xb = std::max(xat(b), xa + 1);
      c.fill(xa, y0 + std::min(18, lane_h / 3), xb, y0 + lane_h - std::min(8, lane_h / 5), kLevelColor[lane]);
      std::string label = std::to_string(v);
      int lw = Canvas::text_width(label, 1);
      int lxx = (xa + xb) / 2 - lw / 2;
      if (lxx > last_label_end + 4 && lane_h >= 30) {
        c.text(lxx, y0 + 5, label, kInk);
        last_label_end = lxx + lw;
      }
    }
  }
  for (const auto& f : s.failures) {  // a level that failed, a version discarded (in the L1 lane)
    int lane = f.level >= 1 && f.level <= 3 ? f.level - 1 : 0;
    c.cross(xat(f.t_ns), top + lane * lane_h + lane_h / 2, 4, kRed);
  }
  c.frame(left, top, right, lanes_bottom, kInk);

  // Panel 2: bandwidth per level over time, a point per version at the time it reached the level.
  const int btop = lanes_bottom + 64, bbottom = std::max(btop + 20, H - 64);
  struct Pt {
    int64_t t;
    double bw;
    size_t launch;
  };
  std::vector<Pt> pts[3];
  double minbw = 0, maxbw = 0;
  for (const auto& [v, rec] : s.versions)
    for (int lv = 0; lv < 3; ++lv) {
      const history::LevelRecord& r = rec.level[lv];
      double bw = r.bandwidth();
      if (!r.reached || bw <= 0) continue;
      pts[lv].push_back({r.end_ns, bw, r.launch});
      minbw = minbw > 0 ? std::min(minbw, bw) : bw;
      maxbw = std::max(maxbw, bw);
    }
  const bool logy = maxbw > 0 && maxbw / minbw > 20;
  c.text(20, btop - 20,
         std::string("bandwidth per level over time (bytes of all ranks / time at the level") +
             (logy ? "; log scale)" : ")"),
         kMuted);
  if (maxbw <= 0) {
    c.text_center((left + right) / 2, (btop + bbottom) / 2, "no level durations known", kMuted, 2);
  } else {
    std::function<int(double)> yat;
    if (logy) {
      double d0 = std::floor(std::log10(minbw)), d1 = std::ceil(std::log10(maxbw));
      if (d1 <= d0) d1 = d0 + 1;
      yat = [=](double v) { return bbottom - static_cast<int>((std::log10(v) - d0) / (d1 - d0) * (bbottom - btop)); };
      for (double d = d0; d <= d1 + 1e-9; d += 1) {
        int y = yat(std::pow(10.0, d));
        c.hline(left, right, y, kGrid);
        c.text_right(left - 8, y - 3, rate_label(std::pow(10.0, d)), kInk);
      }
    } else {
      double bstep = nice_step(maxbw, 5), bhi = std::ceil(maxbw / bstep) * bstep;
      yat = [=](double v) { return bbottom - static_cast<int>(v / bhi * (bbottom - btop)); };
      for (double v = 0; v <= bhi * 1.0001; v += bstep) {
        int y = yat(v);
        c.hline(left, right, y, kGrid);
        c.text_right(left - 8, y - 3, v == 0 ? "0" : rate_label(v), kInk);
      }
    }
    time_axis(btop, bbottom);
    for (int lv = 0; lv < 3; ++lv) {
      for (size_t i = 0; i < pts[lv].size(); ++i) {
        int x = xat(pts[lv][i].t), y = yat(pts[lv][i].bw);
        if (i > 0 && pts[lv][i - 1].launch == pts[lv][i].launch)
          c.line(xat(pts[lv][i - 1].t), yat(pts[lv][i - 1].bw), x, y, kLevelColor[lv]);
        c.fill(x - 2, y - 2, x + 2, y + 2, kLevelColor[lv]);
      }
    }
    c.frame(left, btop, right, bbottom, kInk);
  }
  c.text(20, c.height() - 22, footer, kMuted);
}

// ---- what was plotted, as JSON -------------------------------------------------------------------

nlohmann::json bandwidth_json(double bw) { return bw > 0 ? nlohmann::json(bw) : nlohmann::json(); }

nlohmann::json level_json(const history::LevelRecord& r) {
  if (!r.reached) return nullptr;
  nlohmann::json j = {{"start_unix_ns", r.start_ns}, {"end_unix_ns", r.end_ns}, {"seconds", r.seconds},
                      {"bytes", r.bytes}, {"bandwidth_bytes_per_s", bandwidth_json(r.bandwidth())},
                      {"launch", r.launch + 1}};
  if (r.rank_bytes) j["rank_bytes"] = r.rank_bytes;
  if (r.redundancy_bytes) j["redundancy_bytes"] = r.redundancy_bytes;
  if (r.at_finalize) j["at_finalize"] = true;
  return j;
}

nlohmann::json history_json(const history::Summary& s) {
  nlohmann::json j;
  j["launches"] = nlohmann::json::array();
  for (size_t i = 0; i < s.launches.size(); ++i) {
    const history::Launch& L = s.launches[i];
    nlohmann::json restarts = nlohmann::json::array();
    for (const auto& r : L.restarts)
      restarts.push_back({{"version", r.version},
                          {"level", history::level_name(r.level)},
                          {"start_unix_ns", r.start_ns},
                          {"end_unix_ns", r.end_ns},
                          {"seconds", static_cast<double>(r.end_ns - r.start_ns) / 1e9},
                          {"bytes", r.bytes},
                          {"rejected", r.rejected}});
    j["launches"].push_back({{"launch", i + 1},
                             {"id", L.id},
                             {"started", L.started},
                             {"start_unix_ns", L.start_ns},
                             {"last_unix_ns", L.last_ns},
                             {"finalized", L.finalized},
                             {"end_status", L.finalized ? nlohmann::json(L.end_status) : nlohmann::json()},
                             {"exit_requested", L.exit_requested},
                             {"ranks", L.ranks},
                             {"nodes", L.nodes},
                             {"groups", L.groups},
                             {"restarts", restarts},
                             {"versions", L.versions}});
  }
  j["versions"] = nlohmann::json::array();
  for (const auto& [v, rec] : s.versions)
    j["versions"].push_back({{"version", v},
                             {"launch", rec.launch + 1},
                             {"discarded", rec.discarded},
                             {"levels",
                              {{"l1", level_json(rec.level[0])},
                               {"l2", level_json(rec.level[1])},
                               {"l3", level_json(rec.level[2])}}}});
  j["failures"] = nlohmann::json::array();
  for (const auto& f : s.failures)
    j["failures"].push_back({{"version", f.version},
                             {"level", f.level ? history::level_name(f.level) : "discarded"},
                             {"unix_ns", f.t_ns},
                             {"error", f.error},
                             {"launch", f.launch + 1}});
  for (int lv = 1; lv <= 3; ++lv) {
    history::LevelStats st = history::level_stats(s, lv);
    j["bandwidth"]["l" + std::to_string(lv)] = {{"samples", st.samples},
                                                {"last_version", st.last_version},
                                                {"last_bytes_per_s", bandwidth_json(st.last)},
                                                {"mean_bytes_per_s", bandwidth_json(st.mean)}};
  }
  return j;
}

nlohmann::json disk_level_json(int64_t a, int64_t b, double seconds, uint64_t bytes) {
  if (!b) return nullptr;
  return {{"start_unix_ns", a ? a : b}, {"end_unix_ns", b}, {"seconds", seconds}, {"bytes", bytes},
          {"bandwidth_bytes_per_s", bandwidth_json(seconds > 0 ? static_cast<double>(bytes) / seconds : 0)}};
}

nlohmann::json disk_json(const std::vector<Point>& pts) {
  nlohmann::json j;
  j["launches"] = nlohmann::json::array();
  j["versions"] = nlohmann::json::array();
  for (const auto& p : pts) {
    const VersionTimes& t = p.times;
    j["versions"].push_back({{"version", p.version},
                             {"levels",
                              {{"l1", disk_level_json(t.created_ns, t.l1_ns, t.l1_seconds(), t.bytes)},
                               {"l2", disk_level_json(t.l1_ns, t.l2_ns, t.l2_seconds(), t.bytes)},
                               {"l3", disk_level_json(t.l3_start_ns, t.l3_ns, t.l3_seconds(), t.bytes)}}}});
  }
  return j;
}

std::string fit_title(const std::string& prefix, int width) {
  std::string title = "cairn checkpoints: " + prefix;
  if (Canvas::text_width(title, 2) > width - 40)
    title = "cairn checkpoints: ..." + prefix.substr(prefix.size() - std::min<size_t>(prefix.size(), (width - 40) / 12 - 23));
  return title;
}

std::string plural(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

int run_plot(const PlotOptions& o) {
  if (o.out.empty() && !o.json) {
    print_error("plot", "--out FILE.png is required (or --json to print the data only)");
    return kExitUsage;
  }
  if (o.width < 400 || o.width > 8000) {
    print_error("plot", "--width must be 400..8000 pixels");
    return kExitUsage;
  }
  auto ctx = load_tool_context("plot", o.config_path, o.prefix);
  if (!ctx) {
    print_error("plot", ctx.status().message());
    return kExitUsage;
  }
  const Layout& layout = ctx->layout;
  Canvas canvas(o.width, std::max(o.width * 16 / 25, 400));
  nlohmann::json j = {{"prefix", layout.prefix}, {"history", history::path(layout)}};
  std::vector<std::string> warnings;
  std::string what;  // the summary line's middle

  auto hist = history::read_history(history::path(layout));
  if (!hist) warnings.push_back("cannot read the history: " + hist.status().message());
  else
    for (const auto& w : hist->parsed.warnings) warnings.push_back("history " + hist->path + ": " + w);
  for (const auto& w : warnings) print_error("plot", w);
  const bool use_history = hist && hist->exists && !hist->parsed.lines.empty();

  if (use_history) {
    history::Summary s = history::summarize(hist->parsed.lines);
    uint64_t restarts = 0;
    std::string last_restart;
    for (const auto& L : s.launches)
      for (const auto& r : L.restarts) {
        ++restarts;
        last_restart = "version " + std::to_string(r.version) + " from " + history::level_name(r.level);
      }
    std::string range = s.versions.empty() ? std::string()
                                           : " (" + std::to_string(s.versions.begin()->first) + ".." +
                                                 std::to_string(s.versions.rbegin()->first) + ")";
    what = "from the history " + hist->path + ": " + plural(s.launches.size(), "launch", "launches") + ", " +
           plural(s.versions.size(), "version", "versions") + range + ", " +
           plural(restarts, "restart", "restarts") + (restarts ? " (last: " + last_restart + ")" : "") + ", " +
           plural(s.failures.size(), "failure", "failures");
    std::string footer = plural(s.launches.size(), "launch", "launches") + ", " +
                         plural(s.versions.size(), "version", "versions") + range + ", " +
                         plural(restarts, "restart", "restarts") + "; from " + format_utc(s.first_ns) +
                         "; times from the job history";
    j.update(history_json(s));
    j["source"] = "history";
    draw_history_chart(canvas, s, fit_title(layout.prefix, o.width), footer);
  } else {
    Inventory inv = scan_inventory(layout);
    std::vector<Point> pts;
    for (auto it = inv.versions.rbegin(); it != inv.versions.rend(); ++it) {
      VersionTimes t = version_times(it->second);
      if (t.created_ns || t.l1_ns || t.l3_ns) pts.push_back({it->first, t});
    }
    if (pts.empty()) {
      if (o.json)
        printf("%s\n", nlohmann::json{{"prefix", layout.prefix}, {"source", nullptr}, {"versions", nlohmann::json::array()},
                                      {"launches", nlohmann::json::array()}}
                           .dump(2)
                           .c_str());
      print_error("plot", "nothing to plot: no history and no checkpoints in " + layout.prefix + " or in the cache " +
                              layout.cache_job);
      return kExitNothing;
    }
    std::string why = hist && hist->exists ? "the history " + hist->path + " holds no events"
                                           : "no history at " + history::path(layout);
    if (!o.json)
      printf("cairn plot: %s; times reconstructed from the %zu version(s) still on disk (approximate)\n", why.c_str(),
             pts.size());
    int64_t first = INT64_MAX;
    for (const auto& p : pts)
      if (p.times.created_ns) first = std::min(first, p.times.created_ns);
    std::string footer = std::to_string(pts.size()) + " version(s) on disk, " + std::to_string(pts.front().version) +
                         ".." + std::to_string(pts.back().version) +
                         (first != INT64_MAX ? ", from " + format_utc(first) : std::string()) +
                         "; no history: times from manifests and file mtimes (approximate)";
    what = "from the " + std::to_string(pts.size()) + " version(s) on disk, " + std::to_string(pts.front().version) +
           ".." + std::to_string(pts.back().version);
    j.update(disk_json(pts));
    j["source"] = "disk";
    j["note"] = why;
    draw_disk_chart(canvas, pts, fit_title(layout.prefix, o.width), footer);
  }
  j["warnings"] = warnings;
  j["out"] = o.out.empty() ? nlohmann::json() : nlohmann::json(o.out);
  j["width"] = canvas.width();
  j["height"] = canvas.height();
  if (!o.out.empty()) {
    Status st = write_png(o.out, canvas);
    if (!st.is_ok()) {
      print_error("plot", st.message());
      return kExitFailure;
    }
  }
  if (o.json)
    printf("%s\n", j.dump(2).c_str());
  else
    printf("cairn plot: wrote %s (%dx%d) %s\n", o.out.c_str(), canvas.width(), canvas.height(), what.c_str());
  return kExitOk;
}

}  // namespace

Command add_plot_command(CLI::App& root) {
  auto o = std::make_shared<PlotOptions>();
  CLI::App* app = root.add_subcommand("plot", "Draw a PNG timeline of a job's launches and checkpoints per level, with bandwidths.");
  app->add_option("--out", o->out, "The PNG file to write")->type_name("FILE.png");
  app->add_option("prefix", o->prefix, "L3 directory (default: the configured prefix)")->type_name("PREFIX");
  app->add_option("--width", o->width, "Image width in pixels (default 1000; height is 0.64 of it, at least 400)")
      ->type_name("PIXELS");
  app->add_flag("--json", o->json, "Print the data plotted as JSON (without --out, write no PNG)");
  app->add_option("--config", o->config_path, "Config file (TOML); default: the file CAIRN_CONFIG names")
      ->type_name("FILE");
  app->footer(
      "The times come from the job history (<prefix>/.cairn/history): every launch, restart and version.\n"
      "Without one, only the versions still on disk appear (cache_versions in L1, keep_flushed in L3), their\n"
      "times from their manifests and files (docs/tools.md).\n"
      "Exit status: 0 written, 1 the file could not be written, 2 bad options, 3 nothing to plot.");
  set_usage(app, "cairn plot --out FILE.png [PREFIX] [--width PIXELS] [--json] [--config FILE]");
  Command cmd;
  cmd.app = app;
  cmd.run = [o](const Invocation&) { return run_plot(*o); };
  return cmd;
}

}  // namespace cairn::tool
