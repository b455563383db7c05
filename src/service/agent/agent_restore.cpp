// Restart from L3 served by the agent (service_restart = agents; docs/service.md, "Restart through the
// agents"): a rank names a committed version and where its memory regions are registered; the agent reads
// the rank's files of that version with the library's own reader (l3::read_data_verified: every chunk
// hashed against the manifest, where-records, shared files and compressed chunks as the library reads
// them), then fi_writes each region's bytes into the rank's memory and says how it went. Nothing is
// written unless the whole stream verified. The rank checks what landed before it counts as restored.
//
// The restore is served in the agent's loop, start to end, while no flush is in flight (a rank restarts
// before it checkpoints again; a restore that finds a transfer running is refused and the rank reads
// the version itself). It stages the rank's stream in memory: one rank's share of a version at a time.
#include <algorithm>
#include <vector>

#include "base/log.hpp"
#include "base/stream_reader.hpp"
#include "service/agent/agent.hpp"

namespace cairn::service {
namespace {
using ull = unsigned long long;

// Write `len` bytes of `buf` to remote (addr, key) in pieces of `piece`, and wait for all of them. No
// transfer is in progress while a restore runs (on_restore refuses one then), so every completion of
// the queue is one of these writes.
Status write_all(fabric::RmaQueue& rma, const uint8_t* buf, uint64_t len, void* desc, uint64_t peer, uint64_t addr,
                 uint64_t key, uint32_t piece, double stall_s) {
  fabric::RmaQueue::Transfer t;
  t.kind = fabric::RmaQueue::Kind::write;
  t.local = const_cast<uint8_t*>(buf);  // read from, never written (a write's source)
  t.len = len;
  t.desc = desc;
  t.peer = peer;
  t.remote_addr = addr;
  t.key = key;
  t.max_op = piece;
  rma.add(t);
  std::vector<fabric::RmaQueue::Done> done;
  double last = wire::monotonic_seconds();
  while (done.empty()) {
    (void)rma.post();  // a failed post is reported by poll(), as its transfer's outcome
    auto got = rma.poll(&done);
    if (!got) return got.status();
    double now = wire::monotonic_seconds();
    if (*got > 0) last = now;
    if (done.empty() && now - last > stall_s) {
      std::vector<uint64_t> unposted;  // never to be posted from `buf` later
      rma.drop_unposted(&unposted);
      return make_error(Code::ERR_IO, "no write completed for %.0f s", stall_s);
    }
  }
  // A failure is told at its first piece: the others must be through before `buf` goes away.
  std::vector<uint64_t> unposted;
  rma.drop_unposted(&unposted);
  rma.settle(stall_s);
  return done.front().status;
}
}  // namespace

void Agent::on_restore(Session& s, const wire::Restore& m) {
  const double t0 = wire::monotonic_seconds();
  wire::Restored out;
  out.version = m.version;
  auto reply = [&](const Status& st) {
    out.code = st.is_ok() ? 0 : (st.c_code() < 0 ? st.c_code() : -1);
    out.message = st.message();
    s.conn->send_message(out);
    if (st.is_ok())
      LOG_INFO("rank %u: version %llu restored from L3 into its memory (%llu bytes, verified, in %.1f ms)", s.rank,
               static_cast<ull>(m.version), static_cast<ull>(out.bytes), (wire::monotonic_seconds() - t0) * 1e3);
    else
      LOG_WARN("rank %u: version %llu not restored: %s", s.rank, static_cast<ull>(m.version), st.message().c_str());
  };
  if (active_ || !queue_.empty())
    return reply(make_error(Code::ERR_SEQUENCE, "agent %llu is moving a version; the rank reads it itself",
                            static_cast<ull>(job_.agent_id)));
  if (!ep_->delivery_complete())  // else `restored` could overtake the bytes it vouches for
    return reply(make_error(Code::ERR_NOT_SUPPORTED, "the provider does not complete writes at delivery "
                            "(FI_DELIVERY_COMPLETE); the rank reads the version itself"));
  auto manifest = l3::read_manifest(layout_, m.version, s.rank);
  if (!manifest) return reply(manifest.status());
  const Manifest& mf = *manifest;
  if (mf.nranks != job_.nranks || mf.rank != s.rank)
    return reply(make_error(Code::ERR_CORRUPT, "version %llu rank %u: the manifest is of rank %u of %u",
                            static_cast<ull>(m.version), s.rank, mf.rank, mf.nranks));
  // Every region of the version, by name and size, and nothing else.
  if (mf.regions.size() != m.regions.size())
    return reply(make_error(Code::ERR_SIZE_MISMATCH, "version %llu has %zu regions, the rank registered %zu",
                            static_cast<ull>(m.version), mf.regions.size(), m.regions.size()));
  std::vector<const wire::RestoreRegion*> target;
  for (const auto& e : mf.regions) {
    auto it = std::find_if(m.regions.begin(), m.regions.end(), [&](const wire::RestoreRegion& g) { return g.name == e.name; });
    if (e.kind != RegionKind::memory || it == m.regions.end() || it->size != e.size)
      return reply(make_error(Code::ERR_SIZE_MISMATCH, "region '%s' of version %llu: not a memory region the rank "
                              "registered with %llu bytes", e.name.c_str(), static_cast<ull>(m.version),
                              static_cast<ull>(e.size)));
    target.push_back(&*it);
  }
  std::vector<uint8_t> stream(mf.total_size);
  Status st = l3::read_data_verified(layout_, mf, whole_stream(mf, stream.data()));
  if (!st.is_ok()) return reply(st);
  const double read_s = wire::monotonic_seconds() - t0;
  auto mr = ep_->register_memory(stream.data(), std::max<size_t>(stream.size(), 1), fabric::kLocalWrite);
  if (!mr) return reply(mr.status());
  for (size_t i = 0; i < mf.regions.size() && st.is_ok(); ++i) {
    const auto& e = mf.regions[i];
    if (e.size == 0) continue;
    st = write_all(*rma_, stream.data() + e.offset, e.size, (*mr)->desc(), s.peer, target[i]->addr, target[i]->key,
                   pool_->chunk(), opts_.stall_timeout_s);
  }
  if (!st.is_ok()) return reply(st.prefixed("fi_write into the rank's memory"));
  out.bytes = mf.total_size;
  LOG_DEBUG("rank %u: version %llu read and verified in %.1f ms", s.rank, static_cast<ull>(m.version), read_s * 1e3);
  reply(Status::ok());
}

}  // namespace cairn::service
