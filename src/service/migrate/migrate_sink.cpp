// cairnd migrate-sink: the writer on the spare node (migrate.hpp). The main thread keeps the pool's free
// buffers filled with reads of the next pieces, in stream order (the pull engine, fabric/pull_stream.hpp);
// a piece whose reads all completed goes down the pipe to the writer's thread (cache/node_move.hpp),
// which checks it against the manifest and writes it, and hands the buffer back. So the network, the
// check and the spare's file system overlap, and at most `buffers` pieces are in flight whatever the
// version's size.
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <deque>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/log.hpp"
#include "cache/node_move.hpp"
#include "fabric/buffer_pool.hpp"
#include "fabric/endpoint.hpp"
#include "fabric/pull_stream.hpp"
#include "fabric/rma_queue.hpp"
#include "service/daemon.hpp"
#include "service/migrate/migrate.hpp"
#include "wire/migrate_messages.hpp"
#include "wire/socket.hpp"

namespace cairn::service {
namespace {

class Sink {
 public:
  explicit Sink(const MigrateSinkOptions& o) : o_(o) {}
  int run();

 private:
  Status setup();
  Status transfer();
  void settle_in_flight();
  void report(const Status& st);

  MigrateSinkOptions o_;
  wire::AppKey key_{};
  fs::Fd signals_;
  std::unique_ptr<wire::Connection> conn_;
  std::unique_ptr<fabric::Endpoint> ep_;
  std::unique_ptr<fabric::RmaQueue> rma_;
  std::unique_ptr<fabric::PullStream> pull_;  // the plan's files, a piece per buffer, in reads of rma_size_
  uint64_t peer_ = 0;
  wire::MigrateOffer offer_;
  MovePlan plan_;
  std::unique_ptr<MoveWriter> writer_;
  std::unique_ptr<fabric::BufferPool> pool_;
  std::unique_ptr<MovePipe> pipe_;
  uint64_t buffer_size_ = 0, rma_size_ = 0;
  std::atomic<uint64_t> written_{0};
  double seconds_ = 0;
};

Status Sink::setup() {
  CAIRN_ASSIGN_OR_RETURN(key, read_key_from_stdin());
  key_ = key;
  CAIRN_ASSIGN_OR_RETURN(sig, open_signal_fd(false));
  signals_ = std::move(sig);
  if (o_.source == "-") {
    // Started beside the reader: make libfabric ready while the reader registers, then learn its address.
    fabric::Endpoint::prepare(o_.provider);
    CAIRN_ASSIGN_OR_RETURN(line, read_line_from_stdin());
    o_.source = line;
  }
  CAIRN_ASSIGN_OR_RETURN(hp, wire::parse_host_port(o_.source));
  CAIRN_ASSIGN_OR_RETURN(fd, wire::connect_tcp(hp, 30));
  conn_ = std::make_unique<wire::Connection>(std::move(fd), hp.str());
  fabric::EndpointOptions eo;
  eo.provider = o_.provider;
  eo.node = wire::local_ip(conn_->fd());  // the interface that reaches the reader
  CAIRN_ASSIGN_OR_RETURN(ep, fabric::Endpoint::open(eo));
  ep_ = std::move(ep);
  CAIRN_ASSIGN_OR_RETURN(frame, wire::request(*conn_, wire::frame(wire::MigrateHello{key_, o_.node, ep_->address()}), 30));
  CAIRN_ASSIGN_OR_RETURN(offer, wire::expect<wire::MigrateOffer>(frame));
  offer_ = std::move(offer);
  if (!o_.from.empty() && offer_.node != o_.from)
    return make_error(Code::ERR_INVALID_ARG, "%s offers the cache of %s, not of %s", conn_->peer().c_str(),
                      offer_.node.c_str(), o_.from.c_str());
  plan_.version = offer_.version;
  for (const auto& f : offer_.files) plan_.files.push_back({f.rank, f.name, f.length, f.size, f.checked != 0});
  for (const auto& s : offer_.smalls) plan_.smalls.push_back({s.rank, s.name, s.bytes});
  Layout layout;
  layout.cache_job = o_.cache_job;
  auto writer = MoveWriter::open(layout, o_.node, plan_);  // checks the plan first
  if (!writer) return writer.status().prefixed("the offer of " + offer_.node);
  writer_ = std::move(writer).value();
  CAIRN_ASSIGN_OR_RETURN(peer, ep_->insert_peer(offer_.fabric_address));
  peer_ = peer;

  const uint64_t unit = writer_->chunk_unit();
  buffer_size_ = (std::max<uint64_t>(o_.buffer_size, 1) + unit - 1) / unit * unit;
  if (buffer_size_ > (1ull << 31)) return make_error(Code::ERR_INVALID_ARG, "buffers of at most 2 GiB");
  rma_size_ = std::clamp<uint64_t>(o_.rma_size, 4096, buffer_size_);
  CAIRN_ASSIGN_OR_RETURN(pool, fabric::BufferPool::create(*ep_, buffer_size_ * o_.buffers, static_cast<uint32_t>(buffer_size_),
                                                  fabric::kLocalRead));
  pool_ = std::move(pool);
  pipe_ = std::make_unique<MovePipe>(pool_->count());
  rma_ = std::make_unique<fabric::RmaQueue>(*ep_);
  pull_ = std::make_unique<fabric::PullStream>(*rma_, *pool_);
  std::vector<fabric::PullStream::Range> ranges;
  for (size_t i = 0; i < plan_.files.size(); ++i)
    ranges.push_back({peer_, offer_.files[i].addr, offer_.files[i].key, plan_.files[i].length});
  pull_->start(std::move(ranges), buffer_size_, rma_size_);
  LOG_INFO("version %llu of %s from %s into %s: %zu files, %llu bytes; pool %u x %llu KiB, reads of %llu KiB, %s",
           static_cast<unsigned long long>(plan_.version), offer_.node.c_str(), conn_->peer().c_str(), o_.node.c_str(),
           plan_.files.size(), static_cast<unsigned long long>(plan_.stream_bytes()), pool_->count(),
           static_cast<unsigned long long>(buffer_size_ >> 10), static_cast<unsigned long long>(rma_size_ >> 10),
           ep_->provider().c_str());
  return Status::ok();
}

Status Sink::transfer() {
  const double t0 = wire::monotonic_seconds();
  const uint64_t total = plan_.stream_bytes();
  std::atomic<bool> drained{false};
  std::thread writer([&] {
    drain_move_pipe(*pipe_, *writer_, [&](uint32_t b) { return pool_->data(b); },
                    [&](uint64_t n) { written_.store(n, std::memory_order_relaxed); });
    drained = true;
  });
  double last_progress = wire::monotonic_seconds(), last_completion = last_progress;
  bool filler_done = false;
  Status st = Status::ok();
  while (st.is_ok() && !drained && !pipe_->cancelled()) {
    st = pull_->issue([&](uint64_t) { return pipe_->take_free(/*wait=*/false); });
    if (!st.is_ok()) break;
    if (!filler_done && pull_->all_issued() && pull_->reading() == 0) {
      pipe_->close();
      filler_done = true;
    }
    std::vector<pollfd> fds{{signals_.get(), POLLIN, 0}, {conn_->fd(), POLLIN, 0}, {pipe_->back_fd(), POLLIN, 0}};
    // While reads are in flight, wake at least every few ms even with a wait object: the provider's own
    // events (connection set-up) need not show on it.
    const bool reading = rma_->in_flight() > 0;
    int timeout_ms = reading ? 5 : 100;
    if (ep_->wait_fd() >= 0 && ep_->ready_to_block())
      fds.push_back({ep_->wait_fd(), POLLIN, 0});
    else if (reading)
      timeout_ms = 0;
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
      st = posix_error("poll", "(migrate-sink)", errno);
      break;
    }
    if ((fds[0].revents & POLLIN) && read_signal(signals_.get())) st = make_error(Code::ERR_IO, "stopped by a signal");
    if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
      Status r = conn_->receive();  // the reader says nothing until the end; a close means it is gone
      if (!r.is_ok()) st = make_error(Code::ERR_IO, "the reader on %s went away: %s", offer_.node.c_str(), r.message().c_str());
    }
    if (fds[2].revents & POLLIN) {
      uint64_t v;
      (void)!::read(pipe_->back_fd(), &v, sizeof v);
    }
    auto n = pull_->poll([&](const fabric::PullStream::Piece& p, const Status& read) {
      if (read.is_ok())
        pipe_->post(MovePiece{p.range, p.offset, p.len, p.buffer});
      else if (st.is_ok())
        st = read.prefixed("reading rank " + std::to_string(plan_.files[p.range].rank) + "'s " + plan_.files[p.range].name +
                           " on " + offer_.node);
    });
    if (!n) {
      st = n.status();
      break;
    }
    const double now = wire::monotonic_seconds();
    if (*n > 0) last_completion = now;
    if (rma_->in_flight() > 0 && now - last_completion > o_.stall_timeout_s)
      st = make_error(Code::ERR_IO, "no read from %s completed for %.0f s", offer_.node.c_str(), o_.stall_timeout_s);
    if (now - last_progress >= 0.5) {
      printf("progress %llu %llu\n", static_cast<unsigned long long>(written_.load()), static_cast<unsigned long long>(total));
      fflush(stdout);
      last_progress = now;
    }
  }
  if (!st.is_ok()) pipe_->cancel(st);
  writer.join();
  settle_in_flight();
  if (Status e = pipe_->error(); !e.is_ok()) return e;  // the writer removes what it wrote
  CAIRN_TRY(writer_->commit());
  seconds_ = wire::monotonic_seconds() - t0;
  return Status::ok();
}

// After a failure: no read may still land in the pool when it is unmapped.
void Sink::settle_in_flight() {
  if (!rma_) return;
  if (pull_) (void)pull_->abandon();  // the pool goes away with the sink: its buffers need not come back
  if (uint64_t left = rma_->settle(10); left > 0)
    LOG_WARN("%llu reads still in flight; closing the endpoint cancels them", static_cast<unsigned long long>(left));
}

void Sink::report(const Status& st) {
  nlohmann::ordered_json j;
  std::set<uint32_t> ranks;
  for (const auto& f : plan_.files) ranks.insert(f.rank);
  j["status"] = st.is_ok() ? "done" : "failed";
  j["from"] = offer_.node.empty() ? o_.from : offer_.node;
  j["spare"] = o_.node;
  j["version"] = plan_.version;
  if (st.is_ok()) {
    j["ranks"] = ranks.size();
    j["files"] = writer_->file_count();
    j["bytes"] = plan_.stream_bytes();
    j["checked"] = writer_->checked_bytes();
    j["seconds"] = seconds_;
    j["buffers"] = pool_->count();
    j["buffer_size"] = buffer_size_;
    j["rma_size"] = rma_size_;
    j["peak_in_use"] = pipe_->peak();
    j["provider"] = ep_->provider();
  } else {
    j["code"] = code_name(static_cast<int>(st.code())) ? code_name(static_cast<int>(st.code())) : "ERR_INTERNAL";
    j["message"] = st.message();
  }
  printf("%s\n", j.dump().c_str());
  fflush(stdout);
}

int Sink::run() {
  Status st = setup();
  if (st.is_ok()) st = transfer();
  if (conn_) {  // tell the reader, which then revokes its keys
    wire::MigrateDone done{st.is_ok() ? 0 : static_cast<int32_t>(st.code()), st.is_ok() ? plan_.stream_bytes() : 0,
                           st.is_ok() ? writer_->checked_bytes() : 0, st.is_ok() ? "" : st.message()};
    conn_->send_message(done);
    (void)conn_->flush_all(5);
  }
  if (st.is_ok()) {
    LOG_INFO("version %llu of %s is in %s's cache: %llu bytes in %.3f s (%.2f GB/s), %llu checked chunk by chunk",
             static_cast<unsigned long long>(plan_.version), offer_.node.c_str(), o_.node.c_str(),
             static_cast<unsigned long long>(plan_.stream_bytes()), seconds_,
             seconds_ > 0 ? static_cast<double>(plan_.stream_bytes()) / seconds_ / 1e9 : 0.0,
             static_cast<unsigned long long>(writer_->checked_bytes()));
  } else {
    LOG_ERROR("migration into %s failed: %s", o_.node.c_str(), st.message().c_str());
  }
  report(st);
  writer_.reset();  // removes what it wrote unless committed
  pool_.reset();    // before the endpoint
  return st.is_ok() ? 0 : 1;
}

}  // namespace

int run_migrate_sink(const MigrateSinkOptions& o) {
  Sink s(o);
  return s.run();
}

}  // namespace cairn::service
