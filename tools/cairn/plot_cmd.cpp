// `cairn plot --out FILE.png [PREFIX] [--width W] [--config FILE]`: a PNG timeline of a job's
// checkpoints and the levels each reached, and the bandwidth per level. No history is kept; the times
// come from the versions still on disk (docs/tools.md, "Where the times come from"): the manifests'
// created_unix_ns and the mtimes of the L1 records, protected markers and COMMIT files. Drawn with a
// built-in 5x7 bitmap font and written with libpng.
#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "common.hpp"
#include "core/fsutil.hpp"
#include "inventory.hpp"

namespace cairn::tool {
namespace {

struct PlotOptions {
  std::string out, prefix, config_path;
  int width = 1000;
};

// ---- drawing -------------------------------------------------------------------------------------

struct Rgb {
  uint8_t r, g, b;
};
constexpr Rgb kWhite{255, 255, 255}, kInk{40, 40, 40}, kGrid{225, 225, 225}, kMuted{120, 120, 120};
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

void draw_chart(Canvas& c, const std::vector<Point>& pts, const std::string& title, const std::string& footer) {
  const int W = c.width(), left = 110, right = W - 30;
  c.text(20, 14, title, kInk, 2);

  // Legend, top right.
  int lx = right;
  for (int i = 2; i >= 0; --i) {
    lx -= Canvas::text_width(kLevelName[i], 1);
    c.text(lx, 44, kLevelName[i], kInk);
    lx -= 16;
    c.fill(lx, 43, lx + 10, 51, kLevelColor[i]);
    lx -= 24;
  }

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

int run_plot(const PlotOptions& o) {
  if (o.width < 400 || o.width > 8000) {
    print_error("plot", "--width must be 400..8000 pixels");
    return kExitUsage;
  }
  auto ctx = load_tool_context("plot", o.config_path, o.prefix);
  if (!ctx) {
    print_error("plot", ctx.status().message());
    return kExitUsage;
  }
  Inventory inv = scan_inventory(ctx->layout);
  std::vector<Point> pts;
  for (auto it = inv.versions.rbegin(); it != inv.versions.rend(); ++it) {
    VersionTimes t = version_times(it->second);
    if (t.created_ns || t.l1_ns || t.l3_ns) pts.push_back({it->first, t});
  }
  if (pts.empty()) {
    print_error("plot",
                "nothing to plot: no checkpoints in " + inv.layout.prefix + " or in the cache " + inv.layout.cache_job);
    return kExitNothing;
  }
  std::string title = "cairn checkpoints: " + inv.layout.prefix;
  if (Canvas::text_width(title, 2) > o.width - 40)
    title = "cairn checkpoints: ..." +
            inv.layout.prefix.substr(inv.layout.prefix.size() -
                                     std::min<size_t>(inv.layout.prefix.size(), (o.width - 40) / 12 - 23));
  int64_t first = INT64_MAX;
  for (const auto& p : pts)
    if (p.times.created_ns) first = std::min(first, p.times.created_ns);
  std::string footer = std::to_string(pts.size()) + " version(s) on disk, " + std::to_string(pts.front().version) +
                       ".." + std::to_string(pts.back().version) +
                       (first != INT64_MAX ? ", from " + format_utc(first) : std::string()) +
                       "; times from manifests and file mtimes (approximate)";
  Canvas canvas(o.width, o.width * 16 / 25);
  draw_chart(canvas, pts, title, footer);
  Status st = write_png(o.out, canvas);
  if (!st.is_ok()) {
    print_error("plot", st.message());
    return kExitFailure;
  }
  printf("cairn plot: wrote %s (%dx%d): %zu version(s), %llu..%llu\n", o.out.c_str(), canvas.width(), canvas.height(),
         pts.size(), static_cast<unsigned long long>(pts.front().version),
         static_cast<unsigned long long>(pts.back().version));
  return kExitOk;
}

}  // namespace

Command add_plot_command(CLI::App& root) {
  auto o = std::make_shared<PlotOptions>();
  CLI::App* app = root.add_subcommand("plot", "Draw a PNG timeline of a job's checkpoints per level, with bandwidths.");
  app->add_option("--out", o->out, "The PNG file to write")->required()->type_name("FILE.png");
  app->add_option("prefix", o->prefix, "L3 directory (default: the configured prefix)")->type_name("PREFIX");
  app->add_option("--width", o->width, "Image width in pixels (default 1000; height is 0.64 of it)")
      ->type_name("PIXELS");
  app->add_option("--config", o->config_path, "Config file (TOML); default: the file CAIRN_CONFIG names")
      ->type_name("FILE");
  app->footer(
      "Only versions still on disk appear (cache_versions in L1, keep_flushed in L3): the times come from\n"
      "their manifests and files (docs/tools.md).\n"
      "Exit status: 0 written, 1 the file could not be written, 2 bad options, 3 nothing to plot.");
  set_usage(app, "cairn plot --out FILE.png [PREFIX] [--width PIXELS] [--config FILE]");
  Command cmd;
  cmd.app = app;
  cmd.run = [o](const Invocation&) { return run_plot(*o); };
  return cmd;
}

}  // namespace cairn::tool
