#include "wire/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>

namespace cairn::wire {

double monotonic_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::string HostPort::str() const {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<HostPort> parse_host_port(const std::string& text) {
  HostPort hp;
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    return make_error(Code::ERR_INVALID_ARG, "'%s' is not HOST:PORT", text.c_str());
  hp.host = text.substr(0, colon);
  if (hp.host.size() >= 2 && hp.host.front() == '[' && hp.host.back() == ']') hp.host = hp.host.substr(1, hp.host.size() - 2);
  std::string port = text.substr(colon + 1);
  unsigned v = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
  if (ec != std::errc() || end != port.data() + port.size() || v > 65535 || hp.host.empty())
    return make_error(Code::ERR_INVALID_ARG, "'%s' is not HOST:PORT (a port is 0..65535)", text.c_str());
  hp.port = static_cast<uint16_t>(v);
  return hp;
}

namespace {

Status set_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) return posix_error("fcntl", "O_NONBLOCK", errno);
  return Status::ok();
}

std::string sockaddr_text(const sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
  } else if (sa->sa_family == AF_INET6) {
    auto* in = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof host);
    port = ntohs(in->sin6_port);
  }
  return HostPort{host, port}.str();
}

Result<addrinfo*> resolve(const HostPort& hp, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  std::string port = std::to_string(hp.port);
  int rc = getaddrinfo(hp.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) return make_error(Code::ERR_IO, "cannot resolve %s: %s", hp.host.c_str(), gai_strerror(rc));
  return res;
}

}  // namespace

Result<fs::Fd> listen_tcp(const HostPort& at, HostPort* bound, int backlog) {
  CAIRN_ASSIGN_OR_RETURN(res, resolve(at, true));
  Status last = make_error(Code::ERR_IO, "no address for %s", at.str().c_str());
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    fs::Fd fd(socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      last = posix_error("socket", at.str(), errno);
      continue;
    }
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // a restarted daemon takes its port back
    if (bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd.get(), backlog) != 0) {
      last = posix_error("bind/listen", at.str(), errno);
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
    Status nb = set_nonblocking(fd.get());
    if (!nb.is_ok()) {
      freeaddrinfo(res);
      return nb;
    }
    if (bound) {
      auto hp = parse_host_port(sockaddr_text(reinterpret_cast<sockaddr*>(&ss)));
      if (hp) *bound = *hp;
    }
    freeaddrinfo(res);
    return fd;
  }
  freeaddrinfo(res);
  return last;
}

Result<fs::Fd> connect_tcp(const HostPort& to, double timeout_s) {
  CAIRN_ASSIGN_OR_RETURN(res, resolve(to, false));
  double deadline = monotonic_seconds() + timeout_s;
  Status last = make_error(Code::ERR_IO, "no address for %s", to.str().c_str());
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    fs::Fd fd(socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
    if (!fd.valid()) {
      last = posix_error("socket", to.str(), errno);
      continue;
    }
    int rc = connect(fd.get(), ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno != EINPROGRESS) {
      last = posix_error("connect", to.str(), errno);
      continue;
    }
    if (rc != 0) {
      pollfd p{fd.get(), POLLOUT, 0};
      int left_ms = static_cast<int>((deadline - monotonic_seconds()) * 1000);
      int n = left_ms > 0 ? poll(&p, 1, left_ms) : 0;
      int err = 0;
      socklen_t len = sizeof err;
      if (n <= 0) {
        last = make_error(Code::ERR_IO, "connect %s: no answer within %.1f s", to.str().c_str(), timeout_s);
        continue;
      }
      getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        last = posix_error("connect", to.str(), err);
        continue;
      }
    }
    int one = 1;
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    freeaddrinfo(res);
    return fd;
  }
  freeaddrinfo(res);
  return last;
}

Result<fs::Fd> accept_tcp(int listen_fd, std::string* peer) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return posix_error("accept", "(listener)", errno);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (peer) *peer = sockaddr_text(reinterpret_cast<sockaddr*>(&ss));
  return fs::Fd(fd);
}

std::string local_ip(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  auto hp = parse_host_port(sockaddr_text(reinterpret_cast<sockaddr*>(&ss)));
  return hp ? hp->host : "";
}

Connection::Connection(int read_fd, int write_fd, std::string peer)
    : read_fd_(read_fd), write_fd_(write_fd), peer_(std::move(peer)) {
  set_nonblocking(read_fd).ignore();
  set_nonblocking(write_fd).ignore();
}

Status Connection::receive() {
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd(), buf, sizeof buf);
    if (n > 0) {
      in_.append(buf, static_cast<size_t>(n));
      if (static_cast<size_t>(n) < sizeof buf) return Status::ok();
      continue;
    }
    if (n == 0) return make_error(Code::ERR_IO, "%s closed the connection", peer_.c_str());
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::ok();
    return posix_error("read", peer_, errno);
  }
}

Status Connection::next(Frame* out, bool* have) {
  *have = false;
  size_t avail = in_.size() - in_off_;
  if (avail < kHeaderSize) return Status::ok();
  auto h = decode_header(reinterpret_cast<const uint8_t*>(in_.data() + in_off_));
  if (!h) return h.status().prefixed(peer_);
  if (avail < kHeaderSize + h->length) return Status::ok();
  out->type = h->type;
  out->payload.assign(in_, in_off_ + kHeaderSize, h->length);
  in_off_ += kHeaderSize + h->length;
  if (in_off_ == in_.size()) {
    in_.clear();
    in_off_ = 0;
  } else if (in_off_ > (1u << 20)) {
    in_.erase(0, in_off_);
    in_off_ = 0;
  }
  *have = true;
  return Status::ok();
}

Status Connection::flush() {
  while (out_off_ < out_.size()) {
    const char* p = out_.data() + out_off_;
    size_t len = out_.size() - out_off_;
    ssize_t n = ::send(write_fd(), p, len, MSG_NOSIGNAL);  // never SIGPIPE in the application's process
    if (n < 0 && errno == ENOTSOCK) n = write(write_fd(), p, len);
    if (n > 0) {
      out_off_ += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Status::ok();
    return posix_error("write", peer_, n < 0 ? errno : EPIPE);
  }
  out_.clear();
  out_off_ = 0;
  return Status::ok();
}

Status Connection::flush_all(double timeout_s) {
  double deadline = monotonic_seconds() + timeout_s;
  for (;;) {
    CAIRN_TRY(flush());
    if (!wants_write()) return Status::ok();
    int left_ms = static_cast<int>((deadline - monotonic_seconds()) * 1000);
    if (left_ms <= 0) return make_error(Code::ERR_IO, "%s: not accepting data within %.1f s", peer_.c_str(), timeout_s);
    pollfd p{write_fd(), POLLOUT, 0};
    poll(&p, 1, left_ms);
  }
}

Status dispatch_frames(Connection& c, const std::function<bool(const Frame&)>& on_frame) {
  for (;;) {
    Frame f;
    bool have = false;
    CAIRN_TRY(c.next(&f, &have));
    if (!have || !on_frame(f)) return Status::ok();
  }
}

Result<Frame> read_frame(Connection& c, double timeout_s) {
  double deadline = monotonic_seconds() + timeout_s;
  for (;;) {
    Frame f;
    bool have = false;
    CAIRN_TRY(c.next(&f, &have));
    if (have) return f;
    int left_ms = -1;
    if (timeout_s >= 0) {
      left_ms = static_cast<int>((deadline - monotonic_seconds()) * 1000);
      if (left_ms <= 0) return make_error(Code::ERR_IO, "%s: no answer within %.1f s", c.peer().c_str(), timeout_s);
    }
    pollfd p{c.fd(), POLLIN, 0};
    int n = poll(&p, 1, left_ms);
    if (n < 0 && errno != EINTR) return posix_error("poll", c.peer(), errno);
    if (n > 0) CAIRN_TRY(c.receive());
  }
}

Result<Frame> request(Connection& c, const std::string& frame_bytes, double timeout_s) {
  double t0 = monotonic_seconds();
  c.send(frame_bytes);
  CAIRN_TRY(c.flush_all(timeout_s));
  return read_frame(c, timeout_s - (monotonic_seconds() - t0));
}

}  // namespace cairn::wire
