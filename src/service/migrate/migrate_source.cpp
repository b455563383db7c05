// cairnd migrate-source: the reader on the node being emptied (migrate.hpp).
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "base/log.hpp"
#include "cache/node_move.hpp"
#include "cache/snapshot_slot.hpp"
#include "fabric/endpoint.hpp"
#include "service/daemon.hpp"
#include "service/migrate/migrate.hpp"
#include "wire/migrate_messages.hpp"
#include "wire/socket.hpp"

namespace cairn::service {

Result<std::string> resolve_listen_address(const std::string& listen) {
  const std::string prefix = "iface:";
  if (listen.compare(0, prefix.size(), prefix) != 0) return listen;
  const std::string name = listen.substr(prefix.size());
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return posix_error("getifaddrs", listen, errno);
  std::string v4, v6;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || name != a->ifa_name) continue;
    char buf[INET6_ADDRSTRLEN] = "";
    if (a->ifa_addr->sa_family == AF_INET && v4.empty())
      v4 = inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
    else if (a->ifa_addr->sa_family == AF_INET6 && v6.empty())
      v6 = inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr, buf, sizeof buf);
  }
  freeifaddrs(list);
  if (!v4.empty()) return v4;
  if (!v6.empty()) return v6;
  return make_error(Code::ERR_INVALID_ARG, "%s: this node has no interface %s with an address", listen.c_str(),
                    name.c_str());
}

Result<std::string> read_line_from_stdin() {
  std::string line;
  char c;
  for (;;) {
    ssize_t n = ::read(STDIN_FILENO, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return posix_error("read", "(stdin)", errno);
    if (n == 0 && line.empty()) return make_error(Code::ERR_IO, "stdin closed before a line came");
    if (n == 0 || c == '\n') return line;
    if (line.size() >= 4096) return make_error(Code::ERR_FORMAT, "a line of over 4096 bytes on stdin");
    line += c;
  }
}

Result<wire::AppKey> read_key_from_stdin() {
  CAIRN_ASSIGN_OR_RETURN(line, read_line_from_stdin());
  auto key = wire::parse_key_hex(line);
  if (!key) return key.status().prefixed("the migration's key on stdin");
  return key;
}

namespace {

// One file of the version, mapped and registered for the writer's reads.
struct Exposed {
  MappedFile map;
  std::unique_ptr<fabric::MemoryRegion> mr;
};

class Source {
 public:
  explicit Source(const MigrateSourceOptions& o) : o_(o) {}
  int run();

 private:
  Status setup();
  Status serve();
  bool on_frame(const wire::Frame& f);

  MigrateSourceOptions o_;
  wire::AppKey key_{};
  MovePlan plan_;
  std::unique_ptr<fabric::Endpoint> ep_;
  std::vector<Exposed> exposed_;
  wire::MigrateOffer offer_;
  fs::Fd signals_, listen_;
  std::unique_ptr<wire::Connection> conn_;
  bool offered_ = false, finished_ = false;
  wire::MigrateDone outcome_;
};

Status Source::setup() {
  CAIRN_ASSIGN_OR_RETURN(key, read_key_from_stdin());
  key_ = key;
  CAIRN_ASSIGN_OR_RETURN(sig, open_signal_fd(false));
  signals_ = std::move(sig);
  if (o_.wait_go) {
    fabric::Endpoint::prepare(o_.provider);
    auto go = read_line_from_stdin();
    if (!go || *go != "go") return make_error(Code::ERR_IO, "withdrawn before it began (no 'go' on stdin)");
  }
  Layout layout;
  layout.cache_job = o_.cache_job;
  CAIRN_ASSIGN_OR_RETURN(plan, plan_node_move(layout, o_.node));
  plan_ = std::move(plan);
  CAIRN_ASSIGN_OR_RETURN(host, resolve_listen_address(o_.listen));
  fabric::EndpointOptions eo;
  eo.provider = o_.provider;
  eo.node = host;
  CAIRN_ASSIGN_OR_RETURN(ep, fabric::Endpoint::open(eo));
  ep_ = std::move(ep);

  offer_.version = plan_.version;
  offer_.node = o_.node;
  offer_.fabric_address = ep_->address();
  exposed_.resize(plan_.files.size());
  for (size_t i = 0; i < plan_.files.size(); ++i) {
    const MoveFile& f = plan_.files[i];
    wire::MigrateFile w{f.rank, f.name, f.length, f.size, static_cast<uint8_t>(f.checked), 0, 0};
    if (f.length > 0) {
      const std::string path = move_path(layout, o_.node, f.rank, f.name);
      CAIRN_ASSIGN_OR_RETURN(map, MappedFile::open_ro(path));
      if (map.size() < f.length)
        return make_error(Code::ERR_CORRUPT, "%s holds %llu bytes, %llu to move: it changed under the migration",
                          path.c_str(), static_cast<unsigned long long>(map.size()),
                          static_cast<unsigned long long>(f.length));
      exposed_[i].map = std::move(map);
      CAIRN_ASSIGN_OR_RETURN(mr, ep_->register_memory(exposed_[i].map.data(), f.length, fabric::kRemoteRead));
      w.addr = mr->remote_base();
      w.key = mr->key();
      exposed_[i].mr = std::move(mr);
    }
    offer_.files.push_back(std::move(w));
  }
  for (const auto& s : plan_.smalls) offer_.smalls.push_back({s.rank, s.name, s.bytes});

  wire::HostPort bound;
  CAIRN_ASSIGN_OR_RETURN(lfd, wire::listen_tcp(wire::HostPort{host, 0}, &bound, 4));
  listen_ = std::move(lfd);
  LOG_INFO("%s, version %llu: %zu files, %llu bytes registered on %s (%s); waiting for the writer at %s",
           o_.node.c_str(), static_cast<unsigned long long>(plan_.version), plan_.files.size(),
           static_cast<unsigned long long>(plan_.stream_bytes()), ep_->address_text(ep_->address()).c_str(),
           ep_->provider().c_str(), bound.str().c_str());
  printf("listening %s\n", bound.str().c_str());
  fflush(stdout);
  return Status::ok();
}

bool Source::on_frame(const wire::Frame& f) {
  if (f.type == wire::Type::migrate_hello && !offered_) {
    auto hello = wire::decode<wire::MigrateHello>(f.payload);
    if (!hello || !wire::same_key(hello->key, key_)) {
      std::string why = hello ? "a wrong key" : hello.status().message();
      LOG_WARN("refused %s: %s", conn_->peer().c_str(), why.c_str());
      conn_->send_message(wire::ErrorMsg{static_cast<int32_t>(Code::ERR_INVALID_ARG), "migration refused: " + why});
      (void)conn_->flush_all(1);
      conn_.reset();
      return false;
    }
    LOG_INFO("writer for %s connected from %s: offering version %llu", hello->spare.c_str(), conn_->peer().c_str(),
             static_cast<unsigned long long>(plan_.version));
    conn_->send_message(offer_);
    offered_ = true;
    return true;
  }
  if (f.type == wire::Type::migrate_done && offered_) {
    auto done = wire::decode<wire::MigrateDone>(f.payload);
    if (done) {
      outcome_ = *done;
    } else {
      outcome_.code = static_cast<int32_t>(Code::ERR_FORMAT);
      outcome_.message = done.status().message();
    }
    finished_ = true;
    return true;
  }
  LOG_WARN("refused %s: an unexpected %s message", conn_->peer().c_str(), wire::type_name(uint16_t(f.type)));
  conn_.reset();
  if (offered_) {
    finished_ = true;
    outcome_.code = static_cast<int32_t>(Code::ERR_FORMAT);
    outcome_.message = "the writer sent an unexpected message";
  }
  return false;
}

Status Source::serve() {
  const double start = wire::monotonic_seconds();
  while (!finished_) {
    if (wire::monotonic_seconds() - start > o_.timeout_s)
      return make_error(Code::ERR_IO, "no writer finished within %.0f s", o_.timeout_s);
    std::vector<pollfd> fds{{signals_.get(), POLLIN, 0}, {listen_.get(), POLLIN, 0}};
    const size_t conn_at = fds.size();  // meaningful only when the connection was there before the poll
    const bool had_conn = conn_ != nullptr;
    if (conn_) fds.push_back({conn_->fd(), static_cast<short>(POLLIN | (conn_->wants_write() ? POLLOUT : 0)), 0});
    // Once the offer is out, reads may come at any moment: progress the provider (tcp serves them only
    // while polled) at least every few ms, or at once when it has no wait object.
    int timeout_ms = offered_ ? 5 : 200;
    if (ep_->wait_fd() >= 0 && ep_->ready_to_block())
      fds.push_back({ep_->wait_fd(), POLLIN, 0});
    else if (offered_)
      timeout_ms = 0;
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) return posix_error("poll", "(migrate-source)", errno);
    if ((fds[0].revents & POLLIN) && read_signal(signals_.get()))
      return make_error(Code::ERR_IO, "stopped by a signal");
    fabric::Completion c[16];
    auto n = ep_->poll(c, 16);  // nothing of ours is posted: this only serves the writer's reads
    if (!n) return n.status();
    if (fds[1].revents & POLLIN) {
      std::string peer;
      auto fd = wire::accept_tcp(listen_.get(), &peer);
      if (fd && !conn_) {
        conn_ = std::make_unique<wire::Connection>(std::move(fd).value(), peer);
      } else if (fd) {
        LOG_WARN("refused %s: a writer is already connected", peer.c_str());
      }
    }
    if (!conn_ || !had_conn) continue;  // a connection accepted just now is read at the next turn
    if (fds[conn_at].revents & (POLLIN | POLLHUP | POLLERR)) {
      Status st = conn_->receive();
      Status framing = wire::dispatch_frames(*conn_, [&](const wire::Frame& f) { return on_frame(f); });
      if (conn_ && (!st.is_ok() || !framing.is_ok())) {
        LOG_WARN("%s went away: %s", conn_->peer().c_str(), (!framing.is_ok() ? framing : st).message().c_str());
        conn_.reset();
        if (offered_ && !finished_)
          return make_error(Code::ERR_IO, "the writer went away before it said how the migration ended");
      }
    }
    if (conn_) {
      Status st = conn_->flush();
      if (!st.is_ok() && offered_) return st.prefixed("sending the offer");
      if (!st.is_ok()) conn_.reset();
    }
  }
  return Status::ok();
}

int Source::run() {
  Status st = setup();
  if (st.is_ok()) st = serve();
  exposed_.clear();  // every key revoked before anything else
  if (!st.is_ok()) {
    LOG_ERROR("migration of %s not served: %s", o_.node.c_str(), st.message().c_str());
    return 1;
  }
  if (outcome_.code != 0) {
    LOG_ERROR("the writer could not take version %llu of %s: %s", static_cast<unsigned long long>(plan_.version),
              o_.node.c_str(), outcome_.message.c_str());
    return 1;
  }
  LOG_INFO("version %llu of %s taken by the writer: %llu bytes, %llu checked chunk by chunk; keys revoked",
           static_cast<unsigned long long>(plan_.version), o_.node.c_str(), static_cast<unsigned long long>(outcome_.bytes),
           static_cast<unsigned long long>(outcome_.checked));
  return 0;
}

}  // namespace

int run_migrate_source(const MigrateSourceOptions& o) {
  Source s(o);
  return s.run();
}

}  // namespace cairn::service
