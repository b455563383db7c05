// The fabric transport of a migration (migration.hpp, docs/migration.md "Over the fabric"): starts the
// reader on the node being emptied and the writer on the spare (cairnd migrate-source, migrate-sink),
// hands both the migration's key on stdin, and turns the writer's last line into the transfer's figures.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "base/fsutil.hpp"
#include "common.hpp"
#include "migrate/migration.hpp"
#include "launch/process.hpp"
#include "wire/message.hpp"
#include "wire/socket.hpp"

namespace cairn::tool {
namespace {

// One of the two ends: the process and its stdout, read line by line.
struct End {
  std::string what;  // "the reader on node1"
  std::string log;
  Child child;
  fs::Fd in, out;  // its stdin (kept open for a second line) and stdout
  std::string pending;
  bool reaped = false;
  int wait_status = 0;

  // The next whole line, or an error once the deadline passed or the end closed its stdout.
  Result<std::string> line(double deadline) {
    for (;;) {
      size_t nl = pending.find('\n');
      if (nl != std::string::npos) {
        std::string l = pending.substr(0, nl);
        pending.erase(0, nl + 1);
        return l;
      }
      int left_ms = static_cast<int>((deadline - wire::monotonic_seconds()) * 1000);
      if (left_ms <= 0) return make_error(Code::ERR_IO, "%s did not answer in time", what.c_str());
      pollfd p{out.get(), POLLIN, 0};
      int n = ::poll(&p, 1, std::min(left_ms, 1000));
      if (n < 0 && errno != EINTR) return posix_error("poll", what, errno);
      if (n <= 0) continue;
      char buf[4096];
      ssize_t got = ::read(out.get(), buf, sizeof buf);
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got <= 0) return make_error(Code::ERR_IO, "%s ended%s", what.c_str(), why_ended().c_str());
      pending.append(buf, static_cast<size_t>(got));
    }
  }

  // ": exit status 1 (its log: <last line>)"
  std::string why_ended() {
    if (!reaped) {
      for (int i = 0; i < 50 && !(reaped = try_reap(child, &wait_status)); ++i) usleep(20000);
    }
    std::string text = reaped ? " with " + describe_wait_status(wait_status) : "";
    std::string tail = last_line_of(log);
    if (!tail.empty()) text += " (" + log + ": " + tail + ")";
    return text;
  }

  static std::string last_line_of(const std::string& path) {
    auto text = fs::read_file(path);
    if (!text) return "";
    std::string t = *text;
    while (!t.empty() && t.back() == '\n') t.pop_back();
    size_t nl = t.rfind('\n');
    return nl == std::string::npos ? t : t.substr(nl + 1);
  }

  // Wait for the end to exit within `grace` seconds; then SIGTERM, and SIGKILL 5 s later.
  void finish(double grace) {
    if (child.pid <= 0) return;
    const double until = wire::monotonic_seconds() + grace;
    int sig = 0;
    while (!reaped && !(reaped = try_reap(child, &wait_status))) {
      double now = wire::monotonic_seconds();
      if (now > until && sig == 0) sig = SIGTERM, ::kill(child.pid, SIGTERM);
      else if (now > until + 5 && sig == SIGTERM) sig = SIGKILL, ::kill(child.pid, SIGKILL);
      usleep(20000);
    }
  }
};

std::vector<std::string> with_node(const std::vector<std::string>& words, const std::string& node) {
  std::vector<std::string> out;
  for (std::string w : words) {
    for (size_t at; (at = w.find("{node}")) != std::string::npos;) w.replace(at, 6, node);
    out.push_back(w);
  }
  return out;
}

Status say_line(End& e, const std::string& text) {
  const std::string line = text + "\n";
  if (::write(e.in.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    return posix_error("write", e.what + "'s stdin", errno);
  return Status::ok();
}

// Start `argv` with the key on its stdin (left open for more) and its stdout on a pipe.
Status start_end(End& e, const std::vector<std::string>& argv, const EnvAssignments& env, const std::string& key) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0) return posix_error("pipe2", e.what, errno);
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]), close(in[1]);
    return posix_error("pipe2", e.what, errno);
  }
  fs::Fd in_read(in[0]), out_write(out[1]);
  e.in = fs::Fd(in[1]);
  e.out = fs::Fd(out[0]);
  auto child = spawn(argv, env, /*own_group=*/false, in_read.get(), out_write.get());
  if (!child) return child.status();
  e.child = *child;
  return say_line(e, key);
}

}  // namespace

std::string find_cairnd() {
  if (const char* env = getenv("CAIRN_CAIRND"); env && *env) return find_executable(env);
  const std::string beside = executable_dir() + "/cairnd";
  if (access(beside.c_str(), X_OK) == 0) return beside;
  return find_executable("cairnd");
}

struct FabricMove::Ends {
  End source, sink;
};

FabricMove::FabricMove() = default;

FabricMove::~FabricMove() { stop(10); }

// Reaps both ends, stopped when they do not exit within `grace` seconds (an end still waiting reads the
// end of its stdin and leaves), and removes whatever a killed writer left on a spare that had no cache.
void FabricMove::stop(double grace) {
  if (ends_) {
    ends_->sink.in = fs::Fd();
    ends_->source.in = fs::Fd();
    ends_->sink.finish(grace);
    ends_->source.finish(grace);
    ends_.reset();
  }
  if (!spare_existed_) (void)fs::remove_tree(layout_.node_cache(to_));
  spare_existed_ = true;  // done once
}

Result<std::unique_ptr<FabricMove>> FabricMove::start(const Layout& layout, const MigrationSettings& settings,
                                                      const FabricTransfer& how, const std::string& from,
                                                      const std::string& to, const TransferOptions& options) {
  if (from == to) return make_error(Code::ERR_INVALID_ARG, "migration from %s to itself", from.c_str());
  if (how.cairnd.empty())
    return make_error(Code::ERR_NOT_SUPPORTED, "cairnd, which moves a migration over the fabric, was found neither "
                                               "beside cairn nor on PATH; set CAIRN_CAIRND or migrate_transport = local");
  std::unique_ptr<FabricMove> m(new FabricMove());
  m->layout_ = layout, m->how_ = how, m->from_ = from, m->to_ = to;
  m->spare_existed_ = fs::exists(layout.node_cache(to));
  CAIRN_TRY(fs::make_dirs(how.log_dir));
  CAIRN_ASSIGN_OR_RETURN(key, wire::random_key());
  const std::string key_text = wire::key_hex(key);
  m->ends_ = std::make_unique<Ends>();
  End& source = m->ends_->source;
  End& sink = m->ends_->sink;
  source.what = "the reader on " + from, source.log = how.log_dir + "/migrate-source.log";
  sink.what = "the writer on " + to, sink.log = how.log_dir + "/migrate-sink.log";
  char timeout[32];
  snprintf(timeout, sizeof timeout, "%.0f", how.timeout_seconds);
  // Both ends at once, each readying libfabric: the reader then waits for "go" (the job has exited and
  // its newest version is complete), the writer for the reader's address.
  std::vector<std::string> argv = with_node(how.exec, from);
  for (const std::string& w : {how.cairnd, std::string("migrate-source"), std::string("--cache-job"), layout.cache_job,
                               std::string("--node"), from, std::string("--listen"), settings.listen,
                               std::string("--provider"), settings.provider, std::string("--timeout"),
                               std::string(timeout), std::string("--wait-go"), std::string("--log"), source.log})
    argv.push_back(w);
  CAIRN_TRY(start_end(source, argv, {{"CAIRN_NODE", from}}, key_text));
  argv = with_node(how.exec, to);
  for (const std::string& w : {how.cairnd, std::string("migrate-sink"), std::string("--cache-job"), layout.cache_job,
                               std::string("--node"), to, std::string("--from"), from, std::string("--source"),
                               std::string("-"), std::string("--provider"), settings.provider, std::string("--buffers"),
                               std::to_string(options.buffers), std::string("--buffer-size"),
                               std::to_string(options.buffer_size), std::string("--log"), sink.log})
    argv.push_back(w);
  CAIRN_TRY(start_end(sink, argv, {{"CAIRN_NODE", to}}, key_text));
  return m;
}

Result<TransferStats> FabricMove::go(const std::function<void(uint64_t, uint64_t)>& progress) {
  if (!ends_) return make_error(Code::ERR_SEQUENCE, "this migration over the fabric has already run");
  End& source = ends_->source;
  End& sink = ends_->sink;
  const double t0 = wire::monotonic_seconds();
  Status st = say_line(source, "go");
  source.in = fs::Fd();
  Result<std::string> listening = st.is_ok() ? source.line(t0 + 120) : Result<std::string>(st);
  if (!listening) return fail(listening.status());
  const std::string prefix = "listening ";
  if (listening->compare(0, prefix.size(), prefix) != 0)
    return fail(make_error(Code::ERR_IO, "%s said '%s', not where it listens", source.what.c_str(), listening->c_str()));
  if (Status said = say_line(sink, listening->substr(prefix.size())); !said) return fail(said);
  sink.in = fs::Fd();

  // "progress DONE TOTAL" lines, then one JSON object.
  nlohmann::json outcome;
  for (;;) {
    auto l = sink.line(t0 + how_.timeout_seconds);
    if (!l) return fail(l.status());
    unsigned long long done = 0, total = 0;
    if (sscanf(l->c_str(), "progress %llu %llu", &done, &total) == 2) {
      if (progress) progress(done, total);
      continue;
    }
    outcome = nlohmann::json::parse(*l, nullptr, false);
    if (outcome.is_object() && outcome.contains("status")) break;
    return fail(make_error(Code::ERR_IO, "%s said '%s'", sink.what.c_str(), l->c_str()));
  }
  if (outcome.value("status", "") != "done")
    return fail(Status(code_by_name(outcome.value("code", std::string())).value_or(Code::ERR_IO),
                       outcome.value("message", std::string("the writer failed"))));
  // The writer says so only once the version is complete in the spare's cache (its records written and
  // synced): the job may be relaunched now. The two ends exit on their own (libfabric's teardown takes a
  // few tenths of a second); they are reaped when this object goes.
  TransferStats stats;
  stats.version = outcome.value("version", uint64_t{0});
  stats.ranks = outcome.value("ranks", 0);
  stats.files = outcome.value("files", 0);
  stats.bytes = outcome.value("bytes", uint64_t{0});
  stats.verified = outcome.value("checked", uint64_t{0});
  stats.seconds = outcome.value("seconds", 0.0);
  stats.buffers = outcome.value("buffers", 0);
  stats.buffer_size = outcome.value("buffer_size", uint64_t{0});
  stats.peak_in_use = outcome.value("peak_in_use", 0);
  stats.provider = outcome.value("provider", std::string());
  stats.setup_seconds = std::max(0.0, wire::monotonic_seconds() - t0 - stats.seconds);
  spare_existed_ = true;  // the spare's cache holds the version now: never removed here
  if (progress) progress(stats.bytes, stats.bytes);
  return stats;
}

Status FabricMove::fail(Status why) {
  stop(0);
  return why;
}

Result<TransferStats> transfer_over_fabric(const Layout& layout, const MigrationSettings& settings,
                                           const FabricTransfer& how, const std::string& from, const std::string& to,
                                           const TransferOptions& options) {
  CAIRN_ASSIGN_OR_RETURN(move, FabricMove::start(layout, settings, how, from, to, options));
  return move->go(options.progress);
}

}  // namespace cairn::tool
