#include "policy/halt.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstring>
#include <ctime>

#include "base/fsutil.hpp"
#include "base/units.hpp"

extern char** environ;

namespace cairn::policy {
namespace {

constexpr size_t kMaxHaltFileBytes = 64 * 1024;  // a halt file is a few lines; more is not one
constexpr double kEmptyFileSettleSeconds = 0.5;

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::optional<int64_t> parse_int(std::string_view text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// Shown in warnings: printable, and short.
std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) out += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
  return s.size() > 40 ? out + "..." : out;
}

const char* const kKeys[] = {"checkpoints", "checkpoints_from", "before", "after", "seconds", "immediate"};

// A known key within two edits of `key` (a typo), or "".
std::string near_key(std::string_view key) {
  for (const char* k : kKeys) {
    std::string_view known(k);
    size_t a = key.size(), b = known.size();
    std::vector<size_t> prev(b + 1), cur(b + 1);
    for (size_t j = 0; j <= b; ++j) prev[j] = j;
    for (size_t i = 1; i <= a; ++i) {
      cur[0] = i;
      for (size_t j = 1; j <= b; ++j)
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1,
                           prev[j - 1] + (std::tolower(static_cast<unsigned char>(key[i - 1])) == known[j - 1] ? 0 : 1)});
      prev.swap(cur);
    }
    if (prev[b] <= 2) return k;
  }
  return "";
}

}  // namespace

// ---- the halt file --------------------------------------------------------------------------------

ParsedHalt parse_halt_file(std::string_view text) {
  ParsedHalt out;
  HaltConditions& c = out.conditions;
  std::vector<std::string> seen;
  if (text.size() > kMaxHaltFileBytes) {
    out.warnings.push_back("the file is " + std::to_string(text.size()) + " bytes, not a halt file of a few lines; "
                           "its content is ignored");
    return out;
  }
  if (text.find('\0') != std::string_view::npos) {
    out.warnings.push_back("the file holds binary data, not key=value lines; its content is ignored");
    return out;
  }
  int number = 0;
  while (!text.empty()) {
    ++number;
    size_t nl = text.find('\n');
    std::string_view line = trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.empty() || line.front() == '#') continue;
    std::string where = "line " + std::to_string(number) + ": ";
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      out.warnings.push_back(where + "'" + printable(line) + "' is not key=value; line ignored");
      continue;
    }
    std::string key(trim(line.substr(0, eq)));
    std::string_view value = trim(line.substr(eq + 1));
    if (key.empty()) {
      out.warnings.push_back(where + "'" + printable(line) + "' has no key before '='; line ignored");
      continue;
    }
    for (char& ch : key) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    auto bad = [&](const char* accepted) {
      out.warnings.push_back(where + key + "=" + printable(value) + ": not " + accepted + "; line ignored");
    };
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      out.warnings.push_back(where + key + " is set again; the last value counts");
    seen.push_back(key);
    std::optional<int64_t> n = parse_int(value);
    if (key == "checkpoints") {
      if (!n || *n < 1) bad("a count of checkpoints >= 1");
      else c.checkpoints = *n;
    } else if (key == "checkpoints_from") {
      if (!n || *n < 0) bad("a version number >= 0");
      else c.checkpoints_from = static_cast<uint64_t>(*n);
    } else if (key == "before" || key == "after") {
      if (!n || *n < 0) bad("a time in Unix seconds");
      else (key == "before" ? c.before : c.after) = *n;
    } else if (key == "seconds") {
      if (!n || *n < 0) bad("a number of seconds >= 0");
      else c.seconds = *n;
    } else if (key == "immediate") {
      if (!n || (*n != 0 && *n != 1)) bad("0 or 1");
      else c.immediate = *n == 1;
    } else {
      std::string near = near_key(key);
      out.warnings.push_back(where + "unknown key '" + printable(key) + "'" +
                             (near.empty() ? "" : " (did you mean '" + near + "'?)") + "; line ignored");
    }
  }
  if (c.checkpoints_from && !c.checkpoints) {
    out.warnings.push_back("checkpoints_from without checkpoints has no effect");
    c.checkpoints_from.reset();
  }
  return out;
}

std::string format_halt_file(const HaltConditions& c) {
  std::string out = "# cairn halt file: key=value lines, see docs/halt.md. Written by `cairn halt`.\n";
  if (c.plain()) out += "# No condition: checkpoint at the next chance, then exit.\n";
  if (c.checkpoints) {
    out += "checkpoints=" + std::to_string(*c.checkpoints) + "\n";
    if (c.checkpoints_from) out += "checkpoints_from=" + std::to_string(*c.checkpoints_from) + "\n";
  }
  if (c.before) out += "# before: " + format_time(*c.before) + "\nbefore=" + std::to_string(*c.before) + "\n";
  if (c.after) out += "# after: " + format_time(*c.after) + "\nafter=" + std::to_string(*c.after) + "\n";
  if (c.seconds) out += "seconds=" + std::to_string(*c.seconds) + "\n";
  if (c.immediate) out += "immediate=1\n";
  return out;
}

HaltVerdict evaluate_halt(const HaltConditions& c, const HaltContext& ctx) {
  if (c.immediate) return {HaltAction::exit_now, "immediate=1 (no checkpoint)"};
  if (c.checkpoints) {
    uint64_t target = c.checkpoints_from.value_or(0) + static_cast<uint64_t>(*c.checkpoints);
    if (ctx.newest_version >= target)
      return {HaltAction::exit_now, "checkpoints=" + std::to_string(*c.checkpoints) + ": version " +
                                        std::to_string(ctx.newest_version) + " taken (exit after version " +
                                        std::to_string(target) + ")"};
  }
  if (c.after && ctx.last_checkpoint_end > 0 && ctx.last_checkpoint_end >= static_cast<double>(*c.after))
    return {HaltAction::exit_now, "after=" + std::to_string(*c.after) + " (" + format_time(*c.after) +
                                      "): a checkpoint was taken since"};
  if (c.plain()) return {HaltAction::checkpoint_then_exit, "a halt file without conditions"};
  double spare = c.seconds ? static_cast<double>(*c.seconds) : ctx.halt_seconds;
  if (c.before && ctx.now >= static_cast<double>(*c.before) - spare)
    return {HaltAction::checkpoint_then_exit, "before=" + std::to_string(*c.before) + " (" +
                                                  format_time(*c.before) + ") with " +
                                                  std::to_string(static_cast<int64_t>(spare)) + " s to spare"};
  if (c.seconds && ctx.end_time > 0 && ctx.now >= static_cast<double>(ctx.end_time - *c.seconds))
    return {HaltAction::checkpoint_then_exit, "seconds=" + std::to_string(*c.seconds) + ": the job ends at " +
                                                  format_time(ctx.end_time)};
  return {};
}

HaltVerdict HaltWatcher::observe(const std::string& path, const HaltContext& ctx,
                                 std::vector<std::string>* messages) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    present_ = settled_ = false;
    conditions_ = {};
  } else {
    int64_t mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    bool changed = !present_ || st.st_ino != inode_ || st.st_size != size_ || mtime_ns != mtime_ns_;
    if (changed) {
      present_ = true, settled_ = false;
      inode_ = st.st_ino, size_ = st.st_size, mtime_ns_ = mtime_ns;
      first_seen_ = ctx.now;
    }
    if (!settled_) {
      bool young = ctx.now - static_cast<double>(mtime_ns) / 1e9 < kEmptyFileSettleSeconds &&
                   ctx.now - first_seen_ < kEmptyFileSettleSeconds;
      if (st.st_size == 0 && young) return {};  // perhaps being written: look again at the next call
      settled_ = true;
      conditions_ = {};
      if (st.st_size > 0) {
        auto text = fs::read_file(path);
        if (!text.is_ok()) {
          messages->push_back("halt file " + path + " exists but cannot be read (" + text.status().message() +
                              "): taken as a halt without conditions");
        } else {
          ParsedHalt parsed = parse_halt_file(*text);
          for (const auto& w : parsed.warnings) messages->push_back("halt file " + path + ": " + w);
          conditions_ = parsed.conditions;
        }
      }
      // Counted from the version of now when the file does not say (written by hand).
      if (conditions_.checkpoints && !conditions_.checkpoints_from) conditions_.checkpoints_from = ctx.newest_version;
    }
  }
  HaltVerdict v = present_ && settled_ ? evaluate_halt(conditions_, ctx) : HaltVerdict{};
  if (v.action != last_action_ && v.action != HaltAction::none)
    messages->push_back(std::string("halt file: ") + v.reason +
                        (v.action == HaltAction::exit_now ? ": exit at the next cairn_should_exit"
                                                          : ": checkpoint at the next chance, then exit"));
  last_action_ = v.action;
  return v;
}

// ---- times --------------------------------------------------------------------------------------

namespace {

// Reads exactly `digits` digits at `pos`.
std::optional<int> read_digits(std::string_view s, size_t& pos, int digits) {
  if (pos + static_cast<size_t>(digits) > s.size()) return std::nullopt;
  int v = 0;
  for (int i = 0; i < digits; ++i) {
    char c = s[pos + static_cast<size_t>(i)];
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    v = v * 10 + (c - '0');
  }
  pos += static_cast<size_t>(digits);
  return v;
}

// "YYYY-MM-DD[(T| )HH:MM[:SS]][Z|±HH[:]MM]"; `local` when no zone is given.
std::optional<int64_t> parse_iso(std::string_view s) {
  size_t pos = 0;
  struct tm tm {};
  auto year = read_digits(s, pos, 4);
  if (!year || pos >= s.size() || s[pos++] != '-') return std::nullopt;
  auto month = read_digits(s, pos, 2);
  if (!month || pos >= s.size() || s[pos++] != '-') return std::nullopt;
  auto day = read_digits(s, pos, 2);
  if (!day) return std::nullopt;
  int hour = 0, minute = 0, second = 0;
  if (pos < s.size() && (s[pos] == 'T' || s[pos] == ' ')) {
    ++pos;
    auto h = read_digits(s, pos, 2);
    if (!h || pos >= s.size() || s[pos++] != ':') return std::nullopt;
    auto m = read_digits(s, pos, 2);
    if (!m) return std::nullopt;
    hour = *h, minute = *m;
    if (pos < s.size() && s[pos] == ':') {
      ++pos;
      auto sec = read_digits(s, pos, 2);
      if (!sec) return std::nullopt;
      second = *sec;
    }
  }
  bool zoned = false;
  int64_t offset = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    zoned = true, ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int sign = s[pos++] == '-' ? -1 : 1;
    auto oh = read_digits(s, pos, 2);
    if (!oh) return std::nullopt;
    if (pos < s.size() && s[pos] == ':') ++pos;
    auto om = read_digits(s, pos, 2);
    if (!om || *oh > 23 || *om > 59) return std::nullopt;
    zoned = true, offset = sign * (*oh * 3600 + *om * 60);
  }
  if (pos != s.size()) return std::nullopt;
  if (*month < 1 || *month > 12 || *day < 1 || *day > 31 || hour > 23 || minute > 59 || second > 59)
    return std::nullopt;
  tm.tm_year = *year - 1900, tm.tm_mon = *month - 1, tm.tm_mday = *day;
  tm.tm_hour = hour, tm.tm_min = minute, tm.tm_sec = second;
  tm.tm_isdst = -1;
  struct tm copy = tm;
  time_t t = zoned ? timegm(&copy) : mktime(&copy);
  if (t == static_cast<time_t>(-1) || copy.tm_mday != *day || copy.tm_mon != *month - 1) return std::nullopt;  // Feb 30
  return static_cast<int64_t>(t) - offset;
}

}  // namespace

Result<int64_t> parse_duration(std::string_view text) { return units::parse_whole_seconds(text); }

Result<int64_t> parse_time_spec(std::string_view text, int64_t now) {
  std::string_view s = trim(text);
  if (s.empty()) return make_error(Code::ERR_INVALID_ARG, "empty time");
  if (s.front() == '+') {
    auto d = parse_duration(s.substr(1));
    if (!d.is_ok()) return d.status().prefixed("relative time");
    return now + *d;
  }
  if (auto n = parse_int(s)) {
    if (*n < 0) return make_error(Code::ERR_INVALID_ARG, "'%.*s': a time before 1970", static_cast<int>(s.size()), s.data());
    return *n;
  }
  if (auto t = parse_iso(s)) return *t;
  return make_error(Code::ERR_INVALID_ARG,
                    "'%.*s' is not a time (Unix seconds like 1795456800, ISO 8601 like 2026-11-22T18:00 or "
                    "2026-11-22T18:00:00Z, or relative like +2h, +30m, +1h30m)",
                    static_cast<int>(s.size()), s.data());
}

std::string format_time(int64_t unix_seconds) {
  time_t t = static_cast<time_t>(unix_seconds);
  struct tm tm {};
  if (!localtime_r(&t, &tm)) return std::to_string(unix_seconds);
  char buf[64];
  size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S%z", &tm);
  std::string s(buf, n);
  if (s.size() >= 5) s.insert(s.size() - 2, ":");  // +0100 -> +01:00
  return s;
}

// ---- Slurm --------------------------------------------------------------------------------------

std::optional<int64_t> parse_slurm_time(std::string_view text) {
  std::string_view s = trim(text);
  if (s.empty() || s.find('T') == std::string_view::npos) return std::nullopt;  // N/A, Unknown, NONE
  return parse_iso(s);
}

std::optional<int64_t> parse_squeue_end_time(std::string_view output) {
  while (!output.empty()) {
    size_t nl = output.find('\n');
    std::string_view line = trim(output.substr(0, nl));
    output = nl == std::string_view::npos ? std::string_view() : output.substr(nl + 1);
    if (!line.empty()) return parse_slurm_time(line);
  }
  return std::nullopt;
}

std::optional<int64_t> parse_scontrol_end_time(std::string_view output) {
  for (size_t at = output.find("EndTime="); at != std::string_view::npos; at = output.find("EndTime=", at + 1)) {
    if (at > 0 && !std::isspace(static_cast<unsigned char>(output[at - 1]))) continue;  // not e.g. "SuspendEndTime="
    std::string_view value = output.substr(at + 8);
    size_t end = 0;
    while (end < value.size() && !std::isspace(static_cast<unsigned char>(value[end]))) ++end;
    return parse_slurm_time(value.substr(0, end));
  }
  return std::nullopt;
}

std::optional<std::string> run_command(const std::vector<std::string>& argv, double timeout_seconds) {
  if (argv.empty()) return std::nullopt;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return std::nullopt;
  }
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  bool timed_out = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd p = {fds[0], POLLIN, 0};
    int n = poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    char buf[4096];
    ssize_t got = read(fds[0], buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    if (out.size() < (1 << 20)) out.append(buf, static_cast<size_t>(got));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return out;
}

SlurmEndTime slurm_end_time(const std::function<const char*(const char*)>& env, const CommandRunner& run) {
  SlurmEndTime r;
  const char* job = env("SLURM_JOB_ID");
  if (!job || !*job) return r;
  if (const char* end = env("SLURM_JOB_END_TIME"); end && *end) {
    if (auto t = parse_int(trim(end)); t && *t > 0) {
      r.end_time = *t, r.source = "SLURM_JOB_END_TIME";
      return r;
    }
  }
  std::string id = job;
  if (auto out = run({"squeue", "-h", "-j", id, "-o", "%e"})) {
    if (auto t = parse_squeue_end_time(*out)) {
      r.end_time = *t, r.source = "squeue";
      return r;
    }
  }
  if (auto out = run({"scontrol", "show", "job", id})) {
    if (auto t = parse_scontrol_end_time(*out)) {
      r.end_time = *t, r.source = "scontrol";
      return r;
    }
  }
  r.problem = "neither SLURM_JOB_END_TIME, `squeue -h -j " + id + " -o %e` nor `scontrol show job " + id +
              "` gave an end time (no time limit, or the commands failed)";
  return r;
}

}  // namespace cairn::policy
