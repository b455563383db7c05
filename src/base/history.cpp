#include "base/history.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "base/fsutil.hpp"
#include "base/log.hpp"

namespace cairn::history {

std::string path(const Layout& layout) { return layout.control + "/history"; }

const char* level_name(int level) {
  switch (level) {
    case 1: return "L1";
    case 2: return "L2";
    case 3: return "L3";
  }
  return "none";
}

int level_number(std::string_view name) {
  if (name == "L1") return 1;
  if (name == "L2") return 2;
  if (name == "L3") return 3;
  return 0;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// ---- Line ------------------------------------------------------------------------------------------

std::string Line::str(const std::string& key, const std::string& fallback) const {
  auto it = fields.find(key);
  return it != fields.end() && it->second.kind == Value::Kind::string ? it->second.text : fallback;
}

int64_t Line::i64(const std::string& key, int64_t fallback) const {
  auto it = fields.find(key);
  if (it == fields.end()) return fallback;
  const Value& v = it->second;
  if (v.kind == Value::Kind::integer) {
    if (v.negative) return v.magnitude <= static_cast<uint64_t>(INT64_MAX) + 1 ? static_cast<int64_t>(0 - v.magnitude) : fallback;
    return v.magnitude <= static_cast<uint64_t>(INT64_MAX) ? static_cast<int64_t>(v.magnitude) : fallback;
  }
  if (v.kind == Value::Kind::real && std::isfinite(v.real) && std::fabs(v.real) < 9.2e18) return static_cast<int64_t>(v.real);
  return fallback;
}

uint64_t Line::u64(const std::string& key, uint64_t fallback) const {
  auto it = fields.find(key);
  if (it == fields.end()) return fallback;
  const Value& v = it->second;
  if (v.kind == Value::Kind::integer) return v.negative && v.magnitude ? fallback : v.magnitude;
  if (v.kind == Value::Kind::real && std::isfinite(v.real) && v.real >= 0 && v.real < 1.8e19) return static_cast<uint64_t>(v.real);
  return fallback;
}

double Line::num(const std::string& key, double fallback) const {
  auto it = fields.find(key);
  if (it == fields.end()) return fallback;
  const Value& v = it->second;
  return v.kind == Value::Kind::integer || v.kind == Value::Kind::real ? v.real : fallback;
}

bool Line::flag(const std::string& key, bool fallback) const {
  auto it = fields.find(key);
  return it != fields.end() && it->second.kind == Value::Kind::boolean ? it->second.boolean : fallback;
}

std::vector<std::string> Line::strings(const std::string& key) const {
  auto it = fields.find(key);
  return it != fields.end() && it->second.kind == Value::Kind::list ? it->second.list : std::vector<std::string>();
}

// ---- encoding --------------------------------------------------------------------------------------

namespace {
// Length of the valid UTF-8 sequence at s[i], or 0 when the bytes there are not one.
size_t utf8_length(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  unsigned char c1 = b(i + 1);
  if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F))
    return 0;
  return n;
}
}  // namespace

void append_json_string(std::string* out, std::string_view text) {
  out->push_back('"');
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
      ++i;
    } else if (c < 0x20) {
      const char* esc = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : nullptr;
      if (esc) {
        out->append(esc);
      } else {
        char buf[8];
        snprintf(buf, sizeof buf, "\\u%04x", c);
        out->append(buf);
      }
      ++i;
    } else if (c < 0x80) {
      out->push_back(static_cast<char>(c));
      ++i;
    } else if (size_t n = utf8_length(text, i)) {
      out->append(text.substr(i, n));
      i += n;
    } else {  // not UTF-8: the byte as the code point of the same value
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04x", c);
      out->append(buf);
      ++i;
    }
  }
  out->push_back('"');
}

LineWriter::LineWriter(std::string_view event) {
  out_ = "{\"v\":" + std::to_string(kFormat);
  str("ev", event);
}

void LineWriter::key(std::string_view k) {
  out_.push_back(',');
  append_json_string(&out_, k);
  out_.push_back(':');
}

LineWriter& LineWriter::str(std::string_view k, std::string_view value) {
  key(k);
  append_json_string(&out_, value);
  return *this;
}

LineWriter& LineWriter::i64(std::string_view k, int64_t value) {
  key(k);
  out_ += std::to_string(value);
  return *this;
}

LineWriter& LineWriter::u64(std::string_view k, uint64_t value) {
  key(k);
  out_ += std::to_string(value);
  return *this;
}

LineWriter& LineWriter::real(std::string_view k, double value) {
  key(k);
  if (!std::isfinite(value)) {
    out_ += "null";
  } else {
    char buf[40];
    snprintf(buf, sizeof buf, "%.9g", value);
    out_ += buf;
  }
  return *this;
}

LineWriter& LineWriter::boolean(std::string_view k, bool value) {
  key(k);
  out_ += value ? "true" : "false";
  return *this;
}

LineWriter& LineWriter::strings(std::string_view k, const std::vector<std::string>& values) {
  key(k);
  out_.push_back('[');
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out_.push_back(',');
    append_json_string(&out_, values[i]);
  }
  out_.push_back(']');
  return *this;
}

std::string LineWriter::finish() {
  out_ += "}\n";
  return std::move(out_);
}

// ---- parsing ---------------------------------------------------------------------------------------

namespace {

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Result<Line> line() {
    Line out;
    ws();
    if (!eat('{')) return fail("expected '{'");
    ws();
    if (!eat('}')) {
      for (;;) {
        ws();
        std::string k;
        if (!string(&k)) return fail(err_ ? err_ : "expected a field name");
        ws();
        if (!eat(':')) return fail("expected ':'");
        ws();
        Value v;
        if (!value(&v, 1)) return fail(err_ ? err_ : "expected a value");
        out.fields[k] = std::move(v);
        ws();
        if (eat(',')) continue;
        if (eat('}')) break;
        return fail("expected ',' or '}'");
      }
    }
    ws();
    if (i_ != s_.size()) return fail("unexpected bytes after the object");
    auto it = out.fields.find("v");
    if (it == out.fields.end() || it->second.kind != Value::Kind::integer || it->second.negative || it->second.magnitude == 0)
      return make_error(Code::ERR_FORMAT, "not a history line: no format field \"v\"");
    return out;
  }

 private:
  Status fail(const char* what) const {
    return make_error(Code::ERR_FORMAT, "not a history line: %s at byte %zu", what, i_);
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\r' || s_[i_] == '\n')) ++i_;
  }
  bool eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool literal(const char* word) {
    size_t n = strlen(word);
    if (s_.substr(i_, n) != word) return false;
    i_ += n;
    return true;
  }
  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  bool hex4(unsigned* out) {
    if (i_ + 4 > s_.size()) return false;
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      int h = hex(s_[i_ + k]);
      if (h < 0) return false;
      v = v * 16 + static_cast<unsigned>(h);
    }
    i_ += 4;
    *out = v;
    return true;
  }
  static void put_utf8(std::string* out, unsigned cp) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | cp >> 6));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | cp >> 12));
      out->push_back(static_cast<char>(0x80 | (cp >> 6 & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | cp >> 18));
      out->push_back(static_cast<char>(0x80 | (cp >> 12 & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp >> 6 & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  bool string(std::string* out) {
    if (!eat('"')) return false;
    while (i_ < s_.size()) {
      unsigned char c = static_cast<unsigned char>(s_[i_++]);
      if (c == '"') return true;
      if (c < 0x20) {
        err_ = "control character in a string";
        return false;
      }
      if (c != '\\') {
        out->push_back(static_cast<char>(c));
        continue;
      }
      if (i_ >= s_.size()) break;
      char e = s_[i_++];
      switch (e) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          unsigned cp;
          if (!hex4(&cp)) {
            err_ = "bad \\u escape";
            return false;
          }
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // a surrogate pair
            unsigned lo;
            if (i_ + 2 <= s_.size() && s_[i_] == '\\' && s_[i_ + 1] == 'u') {
              i_ += 2;
              if (!hex4(&lo) || lo < 0xDC00 || lo > 0xDFFF) {
                err_ = "bad surrogate pair";
                return false;
              }
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else {
              err_ = "lone surrogate";
              return false;
            }
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            err_ = "lone surrogate";
            return false;
          }
          put_utf8(out, cp);
          break;
        }
        default:
          err_ = "bad escape in a string";
          return false;
      }
    }
    err_ = "unterminated string";
    return false;
  }
  bool number(Value* v) {
    size_t start = i_;
    bool neg = eat('-');
    size_t int_start = i_;
    if (i_ < s_.size() && s_[i_] == '0') {
      ++i_;
    } else if (i_ < s_.size() && s_[i_] >= '1' && s_[i_] <= '9') {
      while (i_ < s_.size() && isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    } else {
      err_ = "bad number";
      return false;
    }
    size_t int_end = i_;
    bool is_real = false;
    if (eat('.')) {
      is_real = true;
      size_t d = i_;
      while (i_ < s_.size() && isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
      if (i_ == d) {
        err_ = "bad number";
        return false;
      }
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      is_real = true;
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      size_t d = i_;
      while (i_ < s_.size() && isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
      if (i_ == d) {
        err_ = "bad number";
        return false;
      }
    }
    std::string text(s_.substr(start, i_ - start));
    v->real = strtod(text.c_str(), nullptr);
    if (!is_real) {
      uint64_t m = 0;
      bool overflow = false;
      for (size_t k = int_start; k < int_end; ++k) {
        uint64_t d = static_cast<uint64_t>(s_[k] - '0');
        if (m > (UINT64_MAX - d) / 10) overflow = true;
        m = m * 10 + d;
      }
      if (!overflow) {
        v->kind = Value::Kind::integer;
        v->magnitude = m;
        v->negative = neg && m != 0;
        return true;
      }
    }
    v->kind = Value::Kind::real;
    return true;
  }
  // A value; depth > 1 means inside an array or object, where only its validity matters.
  bool value(Value* v, int depth) {
    if (depth > 32) {
      err_ = "nested too deeply";
      return false;
    }
    if (i_ >= s_.size()) return false;
    char c = s_[i_];
    if (c == '"') {
      v->kind = Value::Kind::string;
      return string(&v->text);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return number(v);
    if (literal("true")) {
      v->kind = Value::Kind::boolean;
      v->boolean = true;
      return true;
    }
    if (literal("false")) {
      v->kind = Value::Kind::boolean;
      return true;
    }
    if (literal("null")) return true;
    if (c == '[') {
      ++i_;
      bool all_strings = true;
      std::vector<std::string> items;
      ws();
      if (!eat(']')) {
        for (;;) {
          ws();
          Value item;
          if (!value(&item, depth + 1)) return false;
          if (item.kind == Value::Kind::string) items.push_back(std::move(item.text));
          else all_strings = false;
          ws();
          if (eat(',')) continue;
          if (eat(']')) break;
          err_ = "expected ',' or ']'";
          return false;
        }
      }
      if (all_strings) {
        v->kind = Value::Kind::list;
        v->list = std::move(items);
      }  // else: a kind of array format 1 does not define; kept as null
      return true;
    }
    if (c == '{') {  // format 1 has no nested objects: checked, then kept as null
      ++i_;
      ws();
      if (eat('}')) return true;
      for (;;) {
        ws();
        std::string k;
        if (!string(&k)) return false;
        ws();
        if (!eat(':')) {
          err_ = "expected ':'";
          return false;
        }
        ws();
        Value inner;
        if (!value(&inner, depth + 1)) return false;
        ws();
        if (eat(',')) continue;
        if (eat('}')) return true;
        err_ = "expected ',' or '}'";
        return false;
      }
    }
    return false;
  }

  std::string_view s_;
  size_t i_ = 0;
  const char* err_ = nullptr;
};

}  // namespace

Result<Line> parse_line(std::string_view text) { return Parser(text).line(); }

// ---- reading ---------------------------------------------------------------------------------------

Parsed parse_history(std::string_view text, bool at_end, uint64_t first_line) {
  constexpr int kMaxWarnings = 5;
  Parsed out;
  size_t pos = 0;
  uint64_t line_no = 0, newer = 0, bad = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) {
      if (at_end) {
        out.warnings.push_back("line " + std::to_string(first_line + line_no) + ": torn last line (" + std::to_string(text.size() - pos) +
                               " bytes without a newline: a write cut short), skipped");
        pos = text.size();
      }
      break;
    }
    std::string_view one = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (one.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    auto line = parse_line(one);
    if (!line) {
      if (++bad <= kMaxWarnings)
        out.warnings.push_back("line " + std::to_string(first_line + line_no - 1) + ": " + line.status().message() +
                               "; skipped");
      continue;
    }
    if (line->format() > kFormat) {
      ++newer;
      continue;
    }
    out.lines.push_back(std::move(line).value());
  }
  out.consumed = pos;
  out.line_count = line_no;
  if (bad > kMaxWarnings)
    out.warnings.push_back(std::to_string(bad - kMaxWarnings) + " more line(s) that are not history lines, skipped");
  if (newer)
    out.warnings.push_back(std::to_string(newer) + " line(s) of a newer format (v > " + std::to_string(kFormat) +
                           ", written by a newer cairn), skipped");
  return out;
}

Result<HistoryFile> read_history(const std::string& file) {
  HistoryFile h;
  h.path = file;
  if (!fs::exists(file)) return h;
  CAIRN_ASSIGN_OR_RETURN(text, fs::read_file(file));
  h.exists = true;
  h.parsed = parse_history(text, /*at_end=*/true);
  return h;
}

// ---- summary ---------------------------------------------------------------------------------------

void Summarizer::add(const Line& l) {
  const std::string ev = l.event();
  const int64_t t = l.i64("t");
  auto note_time = [&](int64_t x) {
    if (x <= 0) return;
    s_.first_ns = s_.first_ns ? std::min(s_.first_ns, x) : x;
    s_.last_ns = std::max(s_.last_ns, x);
  };
  note_time(t);
  note_time(l.i64("start_ns"));
  note_time(l.i64("end_ns"));
  std::string id = l.str("launch");
  auto found = index_.find(id);
  size_t li;
  if (found == index_.end()) {
    li = s_.launches.size();
    index_[id] = li;
    s_.launches.emplace_back();
    s_.launches[li].id = id;
    s_.launches[li].start_ns = l.has("start_ns") ? l.i64("start_ns") : t;
  } else {
    li = found->second;
  }
  Launch& L = s_.launches[li];
  L.last_ns = std::max({L.last_ns, t, l.i64("end_ns")});
  if (ev == "start") {
    L.started = true;
    L.start_ns = t;
    L.ranks = l.u64("ranks");
    L.groups = l.strings("groups");
    L.nodes = l.u64("nodes", L.groups.size());
    L.start = l;
  } else if (ev == "restart") {
    Restart r;
    r.version = l.u64("version");
    r.level = level_number(l.str("level"));
    r.start_ns = l.i64("start_ns", t);
    r.end_ns = l.i64("end_ns", t);
    r.bytes = l.u64("bytes");
    L.restarts.push_back(r);
  } else if (ev == "restart_rejected") {
    for (auto it = L.restarts.rbegin(); it != L.restarts.rend(); ++it)
      if (it->version == l.u64("version")) {
        it->rejected = true;
        break;
      }
  } else if (ev == "l1" || ev == "l2" || ev == "l3") {
    const int lv = ev[1] - '0';
    const uint64_t v = l.u64("version");
    auto [it, fresh] = s_.versions.try_emplace(v);
    VersionRecord& vr = it->second;
    if (fresh) {
      vr.version = v;
      vr.launch = li;
    }
    LevelRecord& r = vr.level[lv - 1];
    r = LevelRecord{};
    r.reached = true;
    r.launch = li;
    r.start_ns = l.i64("start_ns", t);
    r.end_ns = l.i64("end_ns", t);
    r.bytes = l.u64("bytes");
    r.rank_bytes = l.u64("rank_bytes");
    r.redundancy_bytes = l.u64("redundancy_bytes");
    r.at_finalize = l.flag("at_finalize");
    r.seconds = lv == 1 ? l.num("copy_s")
                        : (r.end_ns > r.start_ns ? static_cast<double>(r.end_ns - r.start_ns) / 1e9 : 0.0);
    if (lv == 1) L.versions.push_back(v);
  } else if (ev == "fail" || ev == "discard") {
    Failure f;
    f.version = l.u64("version");
    f.level = ev == "fail" ? level_number(l.str("level")) : 0;
    f.t_ns = t;
    f.error = l.str("error");
    f.launch = li;
    s_.failures.push_back(f);
    if (ev == "discard" && f.version) {
      auto [it, fresh] = s_.versions.try_emplace(f.version);
      if (fresh) {
        it->second.version = f.version;
        it->second.launch = li;
      }
      it->second.discarded = true;
    }
  } else if (ev == "end") {
    L.finalized = true;
    L.end_status = l.str("status");
    L.exit_requested = l.flag("exit_requested");
  }  // other events: a newer writer's, ignored
}

Summary summarize(const std::vector<Line>& lines) {
  Summarizer z;
  for (const Line& l : lines) z.add(l);
  return z.summary();
}

LevelStats level_stats(const Summary& s, int level) {
  LevelStats st;
  if (level < 1 || level > 3) return st;
  double bytes = 0, seconds = 0;
  for (const auto& [v, rec] : s.versions) {
    const LevelRecord& r = rec.level[level - 1];
    if (!r.reached) continue;
    st.last_version = v;  // versions in increasing order
    st.last_end_ns = r.end_ns;
    if (r.bandwidth() <= 0) continue;
    ++st.samples;
    st.last = r.bandwidth();
    bytes += static_cast<double>(r.bytes);
    seconds += r.seconds;
  }
  st.mean = seconds > 0 ? bytes / seconds : 0;
  return st;
}

// ---- writing ---------------------------------------------------------------------------------------

StartInfo start_info(const Config& cfg, uint64_t ranks, const std::vector<std::string>& groups, bool l2,
                     bool thread_progress, uint64_t newest_version) {
  StartInfo h;
  h.ranks = ranks;
  h.groups = groups;
  h.redundancy = redundancy_name(cfg.redundancy);
  h.l2 = l2;
  h.set_size = cfg.set_size;
  h.rs_parity = cfg.rs_parity;
  h.flush_every = cfg.flush_every;
  h.cache_versions = cfg.cache_versions;
  h.keep_flushed = cfg.keep_flushed;
  h.chunk_size = cfg.chunk_size;
  h.compress = cfg.compress;
  h.flush_on_finalize = cfg.flush_on_finalize;
  h.progress = thread_progress ? "thread" : "calls";
  h.newest_version = newest_version;
  h.job = job_name(cfg);
  return h;
}

namespace {
std::atomic<Writer*> g_current{nullptr};

std::string new_launch_id() {
  std::random_device rd;
  uint64_t x = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  x ^= static_cast<uint64_t>(now_ns()) * 0x9E3779B97F4A7C15ull;
  x ^= static_cast<uint64_t>(getpid()) << 17;
  char buf[24];
  snprintf(buf, sizeof buf, "%016" PRIx64, x);
  return buf;
}
}  // namespace

Writer::~Writer() { close(); }

Writer* Writer::current() { return g_current.load(); }

void Writer::open(const std::string& file, bool writer) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  writer_ = writer;
  path_ = file;
  if (!writer) {
    Writer* me = this;
    g_current.compare_exchange_strong(me, nullptr);
    return;
  }
  if (launch_.empty()) launch_ = new_launch_id();
  fd_ = ::open(file.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    LOG_WARN("cannot open the job history %s: %s; this launch keeps no history", file.c_str(), strerror(errno));
    return;
  }
  // A launch that died inside a write left a line without its newline: end it, so that this launch's
  // first line stands on its own (readers skip the torn one).
  struct stat st;
  char last = '\n';
  if (fstat(fd_, &st) == 0 && st.st_size > 0 && pread(fd_, &last, 1, st.st_size - 1) == 1 && last != '\n')
    torn_ = true;
  g_current.store(this);
}

void Writer::close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  Writer* me = this;
  g_current.compare_exchange_strong(me, nullptr);
}

bool Writer::active() {
  std::lock_guard<std::mutex> lock(mu_);
  return fd_ >= 0;
}

LineWriter Writer::line(std::string_view event) {
  LineWriter w(event);
  w.str("launch", launch_).i64("t", now_ns());
  return w;
}

void Writer::emit(const std::string& line) {
  if (fd_ < 0) return;
  const std::string& text = torn_ ? "\n" + line : line;
  torn_ = false;
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      LOG_WARN("cannot append to the job history %s: %s; this launch writes no more history", path_.c_str(),
               n < 0 ? strerror(errno) : "nothing written");
      ::close(fd_);
      fd_ = -1;
      Writer* me = this;
      g_current.compare_exchange_strong(me, nullptr);
      return;
    }
    done += static_cast<size_t>(n);
  }
}

uint64_t Writer::bytes_of(uint64_t v) {
  auto it = bytes_.find(v);
  return it != bytes_.end() ? it->second : 0;
}

void Writer::remember_bytes(uint64_t v, uint64_t bytes) {
  if (!bytes) return;
  bytes_[v] = bytes;
  while (bytes_.size() > 256) bytes_.erase(bytes_.begin());
}

// The bytes a line of the history gave version v, from the last few MiB of the file (a restart, or a
// finalize flush of a version this launch restored, looks up what the launch that wrote it recorded).
uint64_t Writer::lookup_bytes_in_file(uint64_t v) {
  constexpr off_t kTail = 4 << 20;
  fs::Fd fd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st;
  if (!fd.valid() || fstat(fd.get(), &st) != 0 || st.st_size <= 0) return 0;
  off_t from = st.st_size > kTail ? st.st_size - kTail : 0;
  std::string text(static_cast<size_t>(st.st_size - from), '\0');
  if (!fs::pread_all(fd.get(), text.data(), text.size(), static_cast<uint64_t>(from), path_).is_ok()) return 0;
  if (from > 0) text.erase(0, std::min(text.size(), text.find('\n') + 1));  // a partial first line
  Parsed p = parse_history(text, true);
  for (auto it = p.lines.rbegin(); it != p.lines.rend(); ++it) {
    std::string ev = it->event();
    if ((ev == "l1" || ev == "l2" || ev == "l3" || ev == "restart") && it->u64("version") == v && it->u64("bytes"))
      return it->u64("bytes");
  }
  return 0;
}

void Writer::start(const StartInfo& info) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return;
  std::vector<std::string> groups;
  for (const auto& g : info.groups)
    if (std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  LineWriter w = line("start");
  w.u64("ranks", info.ranks)
      .u64("nodes", groups.size())
      .strings("groups", groups)
      .str("redundancy", info.redundancy)
      .boolean("l2", info.l2)
      .i64("set_size", info.set_size)
      .i64("rs_parity", info.rs_parity)
      .i64("flush_every", info.flush_every)
      .i64("cache_versions", info.cache_versions)
      .i64("keep_flushed", info.keep_flushed)
      .u64("chunk_size", info.chunk_size)
      .str("compress", info.compress)
      .boolean("flush_on_finalize", info.flush_on_finalize)
      .str("progress", info.progress)
      .u64("newest_version", info.newest_version)
      .str("job", info.job)
      .str("host", host)
      .i64("pid", getpid());
  emit(w.finish());
}

void Writer::restart_probe() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!probe_ns_) probe_ns_ = now_ns();
}

void Writer::restart(uint64_t v, int level, int64_t start_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t began = probe_ns_ ? std::min(probe_ns_, start_ns) : start_ns;
  probe_ns_ = 0;
  if (fd_ < 0) return;
  int64_t end = now_ns();
  uint64_t bytes = bytes_of(v);
  if (!bytes) bytes = lookup_bytes_in_file(v);
  remember_bytes(v, bytes);
  LineWriter w = line("restart");
  w.u64("version", v).str("level", level_name(level)).i64("start_ns", began).i64("end_ns", end);
  if (bytes) w.u64("bytes", bytes);
  emit(w.finish());
}

void Writer::restart_rejected(uint64_t v, int level) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return;
  LineWriter w = line("restart_rejected");
  w.u64("version", v).str("level", level_name(level));
  emit(w.finish());
}

void Writer::l1(uint64_t v, int64_t start_ns, double copy_s, double seal_s, uint64_t bytes, uint64_t rank_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return;
  remember_bytes(v, bytes);
  LineWriter w = line("l1");
  w.u64("version", v)
      .i64("start_ns", start_ns)
      .i64("end_ns", now_ns())
      .real("copy_s", copy_s)
      .real("seal_s", seal_s)
      .u64("bytes", bytes)
      .u64("rank_bytes", rank_bytes);
  emit(w.finish());
}

void Writer::l2(uint64_t v, int64_t start_ns, uint64_t redundancy_bytes, const std::string& scheme) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return;
  LineWriter w = line("l2");
  w.u64("version", v).i64("start_ns", start_ns).i64("end_ns", now_ns());
  if (uint64_t b = bytes_of(v)) w.u64("bytes", b);
  w.u64("redundancy_bytes", redundancy_bytes).str("scheme", scheme);
  emit(w.finish());
}

void Writer::l3_began(uint64_t v, bool at_finalize) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return;
  l3_start_[v] = {now_ns(), at_finalize};
  while (l3_start_.size() > 64) l3_start_.erase(l3_start_.begin());
}

void Writer::l3(uint64_t v, double write_s, uint64_t rank_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return;
  int64_t end = now_ns();
  int64_t start = end - static_cast<int64_t>(write_s * 1e9);
  bool at_finalize = false;
  if (auto it = l3_start_.find(v); it != l3_start_.end()) {
    start = it->second.first;
    at_finalize = it->second.second;
    l3_start_.erase(it);
  }
  uint64_t bytes = bytes_of(v);
  if (!bytes) bytes = lookup_bytes_in_file(v);
  LineWriter w = line("l3");
  w.u64("version", v).i64("start_ns", start).i64("end_ns", end);
  if (write_s > 0) w.real("write_s", write_s);
  if (bytes) w.u64("bytes", bytes);
  w.u64("rank_bytes", rank_bytes).boolean("at_finalize", at_finalize);
  emit(w.finish());
}

void Writer::failed(uint64_t v, int level, const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return;
  l3_start_.erase(v);
  LineWriter w = line("fail");
  w.u64("version", v).str("level", level_name(level)).str("error", error);
  emit(w.finish());
}

void Writer::discarded(uint64_t v, const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return;
  LineWriter w = line("discard");
  w.u64("version", v).str("error", error);
  emit(w.finish());
}

void Writer::end(const std::string& status, uint64_t versions, bool exit_requested) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return;
  LineWriter w = line("end");
  w.str("status", status).u64("versions", versions).boolean("exit_requested", exit_requested);
  emit(w.finish());
}

}  // namespace cairn::history
