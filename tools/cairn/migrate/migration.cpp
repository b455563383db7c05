#include "migrate/migration.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <set>
#include <thread>

#include "cache/node_move.hpp"
#include "base/fsutil.hpp"
#include "base/manifest.hpp"
#include "base/state_file.hpp"

namespace cairn::tool {
namespace {

std::string join_list(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

template <class T>
bool parse_num(const std::map<std::string, std::string>& kv, const char* key, T* out) {
  auto it = kv.find(key);
  if (it == kv.end()) return false;
  const std::string& s = it->second;
  if constexpr (std::is_floating_point_v<T>) {
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0') return false;
    *out = static_cast<T>(v);
    return true;
  } else {
    T v{};
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size()) return false;
    *out = v;
    return true;
  }
}

std::string get(const std::map<std::string, std::string>& kv, const char* key) {
  auto it = kv.find(key);
  return it == kv.end() ? "" : it->second;
}

std::string fmt_seconds(double s) {
  char buf[64];
  snprintf(buf, sizeof buf, "%.6f", s);
  return buf;
}

}  // namespace

// ---- control files --------------------------------------------------------------------------------

std::string format_launcher_info(const LauncherInfo& info) {
  return state_file::encode({{"pid", std::to_string(info.pid)}, {"nodes", join_list(info.nodes)}, {"spares", join_list(info.spares)}},
                            "cairn run manages this job (docs/migration.md)");
}

LauncherInfo parse_launcher_info(const std::string& text) {
  auto kv = state_file::decode(text);
  LauncherInfo info;
  parse_num(kv, "pid", &info.pid);
  info.nodes = split_list(get(kv, "nodes"));
  info.spares = split_list(get(kv, "spares"));
  return info;
}

std::string format_migrate_request(const MigrateRequest& r) {
  return state_file::encode({{"id", r.id},
                             {"node", r.node},
                             {"buffers", std::to_string(r.buffers)},
                             {"buffer_size", std::to_string(r.buffer_size)},
                             {"transport", r.transport},
                             {"requested_unix_ns", std::to_string(r.requested_unix_ns)}},
                            "written by cairn migrate (docs/migration.md)");
}

Result<MigrateRequest> parse_migrate_request(const std::string& text) {
  auto kv = state_file::decode(text);
  MigrateRequest r;
  r.id = get(kv, "id");
  r.node = get(kv, "node");
  if (r.id.empty() || r.node.empty())
    return make_error(Code::ERR_FORMAT, "migration request without %s", r.id.empty() ? "id" : "node");
  if (kv.count("buffers") && (!parse_num(kv, "buffers", &r.buffers) || r.buffers < 2))
    return make_error(Code::ERR_FORMAT, "migration request: buffers '%s' is not a number >= 2", get(kv, "buffers").c_str());
  if (kv.count("buffer_size") && (!parse_num(kv, "buffer_size", &r.buffer_size) || r.buffer_size < 4096))
    return make_error(Code::ERR_FORMAT, "migration request: buffer_size '%s' is not a number >= 4096",
                      get(kv, "buffer_size").c_str());
  if (kv.count("transport")) r.transport = get(kv, "transport");
  if (r.transport != "auto" && r.transport != "local" && r.transport != "fabric")
    return make_error(Code::ERR_FORMAT, "migration request: transport '%s' is not auto, local or fabric",
                      r.transport.c_str());
  parse_num(kv, "requested_unix_ns", &r.requested_unix_ns);
  return r;
}

std::string format_migrate_result(const MigrateResult& r) {
  return state_file::encode({{"id", r.id},
                             {"status", r.status},
                             {"node", r.node},
                             {"spare", r.spare},
                             {"version", std::to_string(r.version)},
                             {"bytes", std::to_string(r.bytes)},
                             {"wind_down_seconds", fmt_seconds(r.wind_down_seconds)},
                             {"transfer_seconds", fmt_seconds(r.transfer_seconds)},
                             {"move_seconds", fmt_seconds(r.move_seconds)},
                             {"restart_seconds", fmt_seconds(r.restart_seconds)},
                             {"total_seconds", fmt_seconds(r.total_seconds)},
                             {"restart_level", r.restart_level},
                             {"transport", r.transport},
                             {"message", r.message}},
                            "written by cairn run (docs/migration.md)");
}

MigrateResult parse_migrate_result(const std::string& text) {
  auto kv = state_file::decode(text);
  MigrateResult r;
  r.id = get(kv, "id");
  r.status = get(kv, "status");
  r.message = get(kv, "message");
  r.node = get(kv, "node");
  r.spare = get(kv, "spare");
  r.restart_level = get(kv, "restart_level");
  r.transport = get(kv, "transport");
  parse_num(kv, "version", &r.version);
  parse_num(kv, "bytes", &r.bytes);
  parse_num(kv, "wind_down_seconds", &r.wind_down_seconds);
  parse_num(kv, "transfer_seconds", &r.transfer_seconds);
  parse_num(kv, "move_seconds", &r.move_seconds);
  parse_num(kv, "restart_seconds", &r.restart_seconds);
  parse_num(kv, "total_seconds", &r.total_seconds);
  return r;
}

// ---- how the bytes travel ---------------------------------------------------------------------------

MigrationSettings migration_settings(const Config& config) {
  MigrationSettings s;
  s.transport = config.migrate_transport;
  s.service = !config.service.empty();
  s.listen = config.migrate_listen;
  s.provider = config.service_provider;
  return s;
}

Result<TransportChoice> choose_transport(const std::string& requested, const MigrationSettings& s) {
  if (requested == "local" || requested == "fabric") return TransportChoice{requested == "fabric", "--transport " + requested};
  if (requested != "auto" && !requested.empty())
    return make_error(Code::ERR_INVALID_ARG, "transport '%s': use auto, local or fabric", requested.c_str());
  switch (s.transport) {
    case MigrateTransport::local: return TransportChoice{false, "migrate_transport = local"};
    case MigrateTransport::fabric: return TransportChoice{true, "migrate_transport = fabric"};
    case MigrateTransport::automatic: break;
  }
  if (s.service) return TransportChoice{true, "auto: the checkpoint service is configured (service)"};
  return TransportChoice{false, "auto: no checkpoint service is configured"};
}

// ---- the transfer ---------------------------------------------------------------------------------

Result<TransferStats> transfer_node_cache(const Layout& layout, const std::string& from, const std::string& to,
                                          const TransferOptions& options) {
  if (from == to) return make_error(Code::ERR_INVALID_ARG, "migration from %s to itself", from.c_str());
  if (options.buffers < 2) return make_error(Code::ERR_INVALID_ARG, "the buffer pool needs at least 2 buffers");
  CAIRN_ASSIGN_OR_RETURN(plan, plan_node_move(layout, from));
  CAIRN_ASSIGN_OR_RETURN(writer, MoveWriter::open(layout, to, plan));

  TransferStats stats;
  stats.version = plan.version;
  std::set<uint32_t> ranks;
  for (const auto& f : plan.files) ranks.insert(f.rank);
  stats.ranks = static_cast<int>(ranks.size());
  stats.buffers = options.buffers;
  const uint64_t unit = writer->chunk_unit();
  stats.buffer_size = (std::max<uint64_t>(options.buffer_size, 1) + unit - 1) / unit * unit;
  const uint64_t total = plan.stream_bytes();

  std::vector<std::unique_ptr<uint8_t, decltype(&std::free)>> buffers;
  for (int i = 0; i < options.buffers; ++i) {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, stats.buffer_size) != 0)
      return make_error(Code::ERR_NO_MEMORY, "cannot allocate %d buffers of %llu bytes for the migration",
                        options.buffers, static_cast<unsigned long long>(stats.buffer_size));
    buffers.emplace_back(static_cast<uint8_t*>(p), &std::free);
  }
  MovePipe pipe(static_cast<uint32_t>(options.buffers));
  auto t0 = std::chrono::steady_clock::now();

  std::thread reader([&] {
    for (size_t k = 0; k < plan.files.size(); ++k) {
      const MoveFile& f = plan.files[k];
      const std::string src = move_path(layout, from, f.rank, f.name);
      auto fd = fs::open_file(src, O_RDONLY);
      if (!fd) return pipe.cancel(fd.status());
      // Read ahead: the pipeline consumes the file in order.
      posix_fadvise(fd->get(), 0, static_cast<off_t>(f.length), POSIX_FADV_SEQUENTIAL);
      for (uint64_t off = 0; off < f.length; off += stats.buffer_size) {
        auto b = pipe.take_free(/*wait=*/true);
        if (!b) return;
        uint64_t len = std::min<uint64_t>(stats.buffer_size, f.length - off);
        Status st = fs::pread_all(fd->get(), buffers[*b].get(), len, off, src);
        if (!st) return pipe.cancel(st);
        pipe.post({k, off, len, *b});
      }
    }
    pipe.close();
  });
  uint64_t done = 0;
  std::thread drain([&] {
    drain_move_pipe(pipe, *writer, [&](uint32_t b) { return buffers[b].get(); }, [&](uint64_t n) {
      done = n;
      if (options.progress) options.progress(n, total);
    });
  });
  reader.join();
  drain.join();
  if (Status st = pipe.error(); !st) return st;  // the writer removes what it wrote
  CAIRN_TRY(writer->commit());

  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats.files = static_cast<int>(writer->file_count());
  stats.bytes = done;
  stats.verified = writer->checked_bytes();
  stats.peak_in_use = static_cast<int>(pipe.peak());
  return stats;
}

}  // namespace cairn::tool
