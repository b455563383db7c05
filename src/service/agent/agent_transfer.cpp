// The agent's transfers: one version of one rank at a time, its chunks moving through the buffer pool.
#include <algorithm>

#include "base/log.hpp"
#include "service/agent/agent.hpp"

namespace cairn::service {

namespace {
constexpr double kQuarantineSeconds = 2;  // push: how long a credited buffer of a given-up transfer stays out
}

void Agent::start_next() {
  while (!active_ && !queue_.empty()) {
    Request req = std::move(queue_.front());
    queue_.pop_front();
    auto s = sessions_.find(req.session);
    if (s == sessions_.end()) continue;
    active_ = std::make_unique<Transfer>();
    Transfer& t = *active_;
    t.id = next_transfer_++;
    t.req = std::move(req);
    t.started = t.last_completion = wire::monotonic_seconds();
    l3::RankPlacement place;
    place.recorded = t.req.flush.placed != 0;
    place.shared = t.req.flush.placed == 2;
    if (place.recorded) {
      place.where.file = t.req.flush.file;
      place.where.offset = t.req.flush.offset;
      place.where.stored = t.req.manifest.total_size;
    }
    StageVersion v;
    v.application = job_.app_name;
    v.layout = layout_;
    v.manifest = t.req.manifest;
    v.manifest_text = encode_manifest(t.req.manifest);
    v.place = std::move(place);
    v.opts = write_opts_;
    v.opts.zstd_level = t.req.flush.zstd_level;
    sink_.begin(t.id, std::move(v));
    if (job_.mode == wire::TransferMode::pull)
      pull_->start({{s->second.peer, t.req.flush.slot_addr, t.req.flush.slot_key, t.req.manifest.total_size}},
                   pool_->chunk());
    LOG_DEBUG("rank %u version %llu: transfer of %llu bytes begins (%s)", t.req.manifest.rank,
              static_cast<unsigned long long>(t.req.flush.version),
              static_cast<unsigned long long>(t.req.manifest.total_size), wire::mode_name(job_.mode));
    if (job_.mode == wire::TransferMode::push) grant_credits();
  }
}

bool Agent::throttle_allows(uint64_t bytes) {
  if (opts_.bandwidth_mbs <= 0) return true;
  double now = wire::monotonic_seconds();
  if (!limit_) limit_.emplace(opts_.bandwidth_mbs * 1e6, pool_->bytes(), pool_->chunk());
  if (limit_->take(now, bytes)) {
    throttled_until_ = 0;
    return true;
  }
  throttled_until_ = now + limit_->wait_s(now, bytes);
  return false;
}

void Agent::issue_reads() {
  Transfer& t = *active_;
  if (!sessions_.count(t.req.session) || t.aborting) return;
  Status st = pull_->issue([&](uint64_t len) -> std::optional<uint32_t> {
    uint32_t buf = 0;
    if (pool_->free_count() == 0 || !throttle_allows(len) || !pool_->take(&buf)) return std::nullopt;
    t.out[buf] = static_cast<uint32_t>(len);
    return buf;
  });
  t.issued = pull_->issued_bytes();
  if (!st.is_ok()) fail_transfer(st.prefixed("reading rank " + std::to_string(t.req.manifest.rank) + "'s slot"));
}

void Agent::grant_credits() {
  Transfer& t = *active_;
  const uint64_t total = t.req.manifest.total_size;
  auto s = sessions_.find(t.req.session);
  if (s == sessions_.end() || t.aborting) return;
  wire::Credit c;
  c.version = t.req.flush.version;
  while (t.issued < total) {
    uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(pool_->chunk(), total - t.issued));
    if (pool_->free_count() == 0 || !throttle_allows(len)) break;
    uint32_t buf = 0;
    pool_->take(&buf);
    t.out[buf] = 0;
    t.credited.insert(buf);
    t.issued += len;
    c.buffers.push_back(pool_->remote_addr(buf));
  }
  if (!c.buffers.empty()) s->second.conn->send_message(c);
}

void Agent::on_pushed(Session& s, const wire::Pushed& m) {
  if (!active_ || active_->req.session != s.id || active_->req.flush.version != m.version || active_->aborting)
    return;  // a chunk of a version given up on: already accounted for
  Transfer& t = *active_;
  const uint64_t total = t.req.manifest.total_size;
  uint32_t buf = 0;
  Status bad;
  if (!pool_->buffer_at(m.buffer, &buf) || !t.credited.count(buf))
    bad = make_error(Code::ERR_INVALID_ARG, "pushed into buffer 0x%llx, which was not credited",
                     static_cast<unsigned long long>(m.buffer));
  else if (m.offset % pool_->chunk() != 0 || m.offset >= total || t.received.count(m.offset) ||
           m.length != std::min<uint64_t>(pool_->chunk(), total - m.offset))
    bad = make_error(Code::ERR_INVALID_ARG, "pushed bytes %llu..+%u of a %llu-byte version: not a chunk still due",
                     static_cast<unsigned long long>(m.offset), m.length, static_cast<unsigned long long>(total));
  if (!bad.is_ok()) return refuse(s, bad);
  t.credited.erase(buf);
  t.received.insert(m.offset);
  t.out[buf] = m.length;
  t.landed[m.offset] = {buf, m.length};
  t.last_completion = wire::monotonic_seconds();
}

void Agent::on_read_done(const fabric::PullStream::Piece& p, const Status& st) {
  if (!active_) {  // cannot happen: a transfer ends only once its reads did
    LOG_ERROR("a read completed for no transfer in progress");
    return pool_->give(p.buffer);
  }
  Transfer& t = *active_;
  t.last_completion = wire::monotonic_seconds();
  if (!st.is_ok() || t.aborting) {
    release_buffer(p.buffer);
    if (!st.is_ok() && !t.aborting)
      fail_transfer(st.prefixed("reading rank " + std::to_string(t.req.manifest.rank) + "'s slot"));
  } else {
    t.landed[p.offset] = {p.buffer, static_cast<uint32_t>(p.len)};
  }
}

void Agent::progress_rma() {
  // Progress the provider every turn: pushes land and reads are answered only while someone polls.
  for (int round = 0; round < 16; ++round) {
    auto n = pull_->poll([this](const fabric::PullStream::Piece& p, const Status& st) { on_read_done(p, st); });
    if (!n) {
      LOG_ERROR("%s", n.status().message().c_str());
      break;
    }
    if (*n < 64) break;
  }
}

// Hand landed chunks to the sink in stream order; once the last is handed over, let it finish.
void Agent::deliver() {
  Transfer& t = *active_;
  if (t.aborting) return;
  while (!t.landed.empty() && t.landed.begin()->first == t.delivered) {
    auto [buf, len] = t.landed.begin()->second;
    t.landed.erase(t.landed.begin());
    sink_.chunk(t.id, t.delivered, pool_->data(buf), len, buf);
    t.delivered += len;
  }
  if (!t.ended && t.delivered == t.req.manifest.total_size) {
    sink_.end(t.id);
    t.ended = true;
  }
}

void Agent::release_buffer(uint32_t buffer) {
  if (active_) active_->out.erase(buffer);
  pool_->give(buffer);
}

void Agent::on_sink_events() {
  for (const auto& e : sink_.test()) {
    bool mine = active_ && e.transfer == active_->id;
    switch (e.kind) {
      case ChunkSink::Event::buffer_free:
        if (mine) active_->written += active_->out.count(e.buffer) ? active_->out[e.buffer] : 0;
        if (mine) active_->out.erase(e.buffer);
        pool_->give(e.buffer);
        break;
      case ChunkSink::Event::finished:
        if (mine) finish_transfer();
        break;
      case ChunkSink::Event::failed:
        if (mine) fail_transfer(e.status);
        break;
    }
  }
}

void Agent::drive() {
  progress_rma();
  double now = wire::monotonic_seconds();
  for (auto it = quarantine_.begin(); it != quarantine_.end();) {
    if (it->first <= now) {
      pool_->give(it->second);
      it = quarantine_.erase(it);
    } else {
      ++it;
    }
  }
  if (!active_) start_next();
  if (!active_) return;
  if (job_.mode == wire::TransferMode::pull)
    issue_reads();
  else
    grant_credits();
  if (active_) deliver();
  end_if_quiet();
}

void Agent::fail_transfer(const Status& why) {
  if (!active_ || active_->aborting) return;
  Transfer& t = *active_;
  t.aborting = true;
  t.outcome = why;
  sink_.cancel(t.id);
  // Push: the rank may still write into buffers it was credited; keep them out of use for a while.
  double until = wire::monotonic_seconds() + kQuarantineSeconds;
  for (uint32_t b : t.credited) {
    quarantine_.push_back({until, b});
    t.out.erase(b);
  }
  t.credited.clear();
  for (uint32_t b : pull_->abandon()) release_buffer(b);  // pull: reads the provider never got
  for (auto& [off, bl] : t.landed) release_buffer(bl.first);
  t.landed.clear();
  ++transfers_failed_;
  auto s = sessions_.find(t.req.session);
  if (s != sessions_.end())
    s->second.conn->send_message(wire::Done{t.req.flush.version, why.c_code() < 0 ? why.c_code() : -1, why.message()});
  LOG_WARN("rank %u version %llu: transfer given up: %s", t.req.manifest.rank,
           static_cast<unsigned long long>(t.req.flush.version), why.message().c_str());
  end_if_quiet();
}

void Agent::finish_transfer() {
  Transfer& t = *active_;
  t.finished = true;
  double secs = wire::monotonic_seconds() - t.started;
  bytes_drained_ += t.req.manifest.total_size;
  ++transfers_done_;
  auto s = sessions_.find(t.req.session);
  if (s != sessions_.end()) s->second.conn->send_message(wire::Done{t.req.flush.version, 0, ""});
  LOG_INFO("rank %u version %llu: %llu bytes verified and written in %.3f s (%.2f GB/s)", t.req.manifest.rank,
           static_cast<unsigned long long>(t.req.flush.version),
           static_cast<unsigned long long>(t.req.manifest.total_size), secs,
           secs > 0 ? static_cast<double>(t.req.manifest.total_size) / secs / 1e9 : 0.0);
  end_if_quiet();
}

// A transfer leaves once it finished or was given up, no read is in flight and every buffer came back.
void Agent::end_if_quiet() {
  if (!active_) return;
  Transfer& t = *active_;
  if (!(t.finished || t.aborting) || pull_->reading() > 0 || !t.out.empty()) return;
  // Busy time is counted exactly, per transfer (the part since the last tick; tick() counted the rest),
  // so that a short transfer is not taken for a tick's worth of work.
  busy_s_ += wire::monotonic_seconds() - std::max(t.started, last_tick_);
  active_.reset();
  start_next();
}

}  // namespace cairn::service
