// TCP for the service's control traffic: HOST:PORT addresses, listening, connecting with a deadline,
// and a buffered non-blocking connection that yields whole frames (wire/frame.hpp). The bulk data
// never travels here: it moves over libfabric RMA (src/fabric/).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/fsutil.hpp"
#include "base/status.hpp"
#include "wire/frame.hpp"
#include "wire/message.hpp"

namespace cairn::wire {

struct HostPort {
  std::string host;
  uint16_t port = 0;
  std::string str() const;  // "host:port", "[v6]:port"
};
// "HOST:PORT" or "[V6]:PORT"; the port 0..65535 (0: let the system choose, for listeners).
Result<HostPort> parse_host_port(const std::string& text);

// Listen on `at` (port 0: a free port). *bound: the address actually bound.
Result<fs::Fd> listen_tcp(const HostPort& at, HostPort* bound, int backlog = 256);
// Connect, giving up after timeout_s seconds. The socket is non-blocking, without Nagle's delay.
Result<fs::Fd> connect_tcp(const HostPort& to, double timeout_s);
// Accept one connection (non-blocking socket); *peer: "host:port" of the other side.
Result<fs::Fd> accept_tcp(int listen_fd, std::string* peer);
// The local IP address of a connected socket (the interface that reaches the peer).
std::string local_ip(int fd);

struct Frame {
  Type type = Type::error;
  std::string payload;
};

// A byte stream (a TCP socket or a pipe) carrying frames, with an input and an output buffer.
class Connection {
 public:
  Connection(fs::Fd fd, std::string peer) : fd_(std::move(fd)), peer_(std::move(peer)) {}
  Connection(int read_fd, int write_fd, std::string peer);  // a pair of pipes (agent <-> manager)
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  int fd() const { return fd_.valid() ? fd_.get() : read_fd_.get(); }
  int write_fd() const { return fd_.valid() ? fd_.get() : write_fd_.get(); }
  const std::string& peer() const { return peer_; }

  // Read what is available. ERR_IO when the other side closed or the read failed.
  Status receive();
  // Take the next whole frame off the input: *have = false when none is complete yet. ERR_FORMAT for a
  // bad header: the stream cannot be resynchronised, close the connection.
  Status next(Frame* out, bool* have);
  void send(const std::string& frame_bytes) { out_ += frame_bytes; }
  template <class M>
  void send_message(const M& m) {
    send(frame(m));
  }
  // Write what the other side takes now.
  Status flush();
  bool wants_write() const { return out_off_ < out_.size(); }
  // Flush everything within timeout_s (for a last message before closing).
  Status flush_all(double timeout_s);

 private:
  fs::Fd fd_, read_fd_, write_fd_;
  std::string peer_;
  std::string in_;
  size_t in_off_ = 0;
  std::string out_;
  size_t out_off_ = 0;
};

// Hand every whole frame received so far to `on_frame`, in order, while it returns true; false means the
// handler closed (destroyed) the connection, and nothing more is touched. ERR_FORMAT for a bad header:
// the stream is out of step, and the connection must go.
Status dispatch_frames(Connection& c, const std::function<bool(const Frame&)>& on_frame);

// Blocking request/answer for short-lived clients (`cairn status`, registration): send one frame and
// wait for one, within timeout_s. An error frame comes back as its code and message.
Result<Frame> request(Connection& c, const std::string& frame_bytes, double timeout_s);
// Wait for one whole frame within timeout_s (< 0: no limit).
Result<Frame> read_frame(Connection& c, double timeout_s);

// decode<M> of a frame of the expected type; an error frame becomes its Status.
template <class M>
Result<M> expect(const Frame& f) {
  if (f.type == Type::error) {
    auto e = decode<ErrorMsg>(f.payload);
    if (!e) return e.status();
    return Status(static_cast<Code>(e->code), e->message);
  }
  if (f.type != M::kType)
    return make_error(Code::ERR_FORMAT, "expected a %s message, got %s", type_name(uint16_t(M::kType)),
                      type_name(uint16_t(f.type)));
  return decode<M>(f.payload);
}

double monotonic_seconds();

}  // namespace cairn::wire
