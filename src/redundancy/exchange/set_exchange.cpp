// The L2 exchange: every step moves one piece (`chunk` bytes of a segment) between the members that
// need it, with nonblocking sends and receives; several steps are in flight so the next pieces travel
// while this one is combined. Data is sent straight from the caller's buffers and only the bytes a
// member really has are sent: the receiver knows every length and zero-fills the rest, so nobody
// builds a padded copy of a snapshot.
#include <mpi.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <initializer_list>
#include <memory>
#include <new>
#include <string>

#include "base/log.hpp"
#include "mpi/mpi_util.hpp"
#include "redundancy/exchange/set_exchange.hpp"
#include "redundancy/exchange/set_spans.hpp"

namespace cairn::redundancy {

namespace {

using spans::changed_span;
using spans::Geometry;
using spans::have;
using spans::round_up;
using spans::shape;
using spans::stripe_span;

constexpr size_t kHugePage = size_t{2} << 20;
// One tag per kind of message. MPI matches the messages of one sender and tag in the order they were
// sent, and every member posts its steps in order, so a step's messages never meet another step's.
constexpr int kTagEncode = kSetTagFirst;
constexpr int kTagRebuild = kSetTagFirst + 1;
constexpr int kTagRebuildRed = kSetTagFirst + 2;
static_assert(kTagRebuildRed < kSetTagFirst + kSetTagCount);

int mod(int a, int n) { return ((a % n) + n) % n; }
// base + off, for a buffer that may be null when its length is 0 (then nothing is read or written).
template <class T>
T* at(T* base, size_t off) { return base == nullptr ? nullptr : base + off; }

// out = a XOR b over n bytes, 8 at a time (the compiler vectorises it).
void xor_of(uint8_t* out, const uint8_t* a, const uint8_t* b, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x, y;
    std::memcpy(&x, a + i, 8);
    std::memcpy(&y, b + i, 8);
    x ^= y;
    std::memcpy(out + i, &x, 8);
  }
  for (; i < n; ++i) out[i] = a[i] ^ b[i];
}

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
using Scratch = std::unique_ptr<uint8_t[], FreeDeleter>;
// The exchange's buffers. Those of a huge page or more start on a huge-page boundary and are advised to
// huge pages: they are often new memory at each exchange (past malloc's threshold for mapping), and their
// first touch then faults 2 MiB at a time where the kernel's THP mode is "madvise", not 4 KiB
// (docs/performance.md, "The L2 restart on huge pages and its landing buffers"). Advice only.
Scratch scratch(size_t bytes) {
  const size_t len = round_up(bytes + 1, kSetCodeAlign);
  if (len < kHugePage) {
    auto* p = static_cast<uint8_t*>(std::aligned_alloc(kSetCodeAlign, len));
    if (p == nullptr) throw std::bad_alloc();
    return Scratch(p);
  }
  void* p = nullptr;
  if (posix_memalign(&p, kHugePage, len) != 0) throw std::bad_alloc();
  (void)madvise(p, len, MADV_HUGEPAGE);
  return Scratch(static_cast<uint8_t*>(p));
}

// The window of steps in flight (`depth`, the same on every member): their requests, one slot per step.
// Zero-byte transfers are skipped: both sides compute the same counts from the agreed lengths.
class StepWindow {
 public:
  // gentle: wait by testing, with a short sleep between tests that complete nothing, instead of
  // MPI_Waitall's busy wait: for a member whose cores are wanted elsewhere meanwhile.
  StepWindow(MPI_Comm comm, const char* op, int depth, bool gentle = false)
      : comm_(comm), op_(op), gentle_(gentle), reqs_(static_cast<size_t>(depth)) {}
  ~StepWindow() { abandon(); }

  Status send(int slot, const uint8_t* buf, size_t count, int peer, int tag) {
    if (count == 0) return Status::ok();
    MPI_Request r;
    int rc = MPI_Isend(buf, static_cast<int>(count), MPI_BYTE, peer, tag, comm_, &r);
    if (rc != MPI_SUCCESS) return mpi_call_failed(op_, "MPI_Isend", rc, peer);
    reqs_[slot].push_back(r);
    return Status::ok();
  }
  // Receives `count` bytes into buf and zeroes buf[count, piece): the sender's virtual padding.
  Status recv(int slot, uint8_t* buf, size_t count, size_t piece, int peer, int tag) {
    if (piece > count) std::memset(buf + count, 0, piece - count);
    if (count == 0) return Status::ok();
    MPI_Request r;
    int rc = MPI_Irecv(buf, static_cast<int>(count), MPI_BYTE, peer, tag, comm_, &r);
    if (rc != MPI_SUCCESS) return mpi_call_failed(op_, "MPI_Irecv", rc, peer);
    reqs_[slot].push_back(r);
    return Status::ok();
  }
  Status wait(int slot) {
    auto& r = reqs_[slot];
    int rc = MPI_SUCCESS;
    if (gentle_) {
      const struct timespec pause = {0, 20 * 1000};
      for (int done = 0; rc == MPI_SUCCESS;) {
        rc = MPI_Testall(static_cast<int>(r.size()), r.data(), &done, MPI_STATUSES_IGNORE);
        if (done) break;
        nanosleep(&pause, nullptr);
      }
    } else {
      rc = MPI_Waitall(static_cast<int>(r.size()), r.data(), MPI_STATUSES_IGNORE);
    }
    // On error the requests still pending stay in r (completed ones are MPI_REQUEST_NULL now), so
    // that abandon() cancels them.
    if (rc != MPI_SUCCESS) return mpi_call_failed(op_, "MPI_Waitall", rc);
    r.clear();
    return Status::ok();
  }

  // Runs `steps` steps, depth at a time: post(s, slot) queues step s's transfers, and once
  // they completed finish(s, slot) combines what arrived. A slot's buffers are reused depth steps on.
  // On failure the pending requests are cancelled before returning, while the callers' buffers
  // still exist.
  Status run(size_t steps, const std::function<Status(size_t, int)>& post,
             const std::function<Status(size_t, int)>& finish) {
    Status st = run_steps(steps, post, finish);
    if (!st.is_ok()) abandon();
    return st;
  }

 private:
  Status run_steps(size_t steps, const std::function<Status(size_t, int)>& post,
                   const std::function<Status(size_t, int)>& finish) {
    const size_t depth = reqs_.size();
    auto complete = [&](size_t s) -> Status {
      int slot = static_cast<int>(s % depth);
      CAIRN_TRY(wait(slot));
      return finish(s, slot);
    };
    for (size_t s = 0; s < steps; s++) {
      CAIRN_TRY(post(s, static_cast<int>(s % depth)));
      if (s + 1 >= depth) CAIRN_TRY(complete(s + 1 - depth));
    }
    for (size_t s = steps > depth - 1 ? steps - (depth - 1) : 0; s < steps; s++) CAIRN_TRY(complete(s));
    return Status::ok();
  }

  // After an error: cancel what is pending and wait for it (MPI guarantees a wait on a cancelled
  // request returns), so MPI never writes into buffers after they are gone.
  void abandon() {
    for (auto& r : reqs_) {
      for (MPI_Request& req : r) {
        if (req == MPI_REQUEST_NULL) continue;
        int rc = MPI_Cancel(&req);
        if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) LOG_DEBUG("%s: cancelling a request failed: %s", op_, mpi_error_text(rc).c_str());
      }
      r.clear();
    }
  }

  MPI_Comm comm_;
  const char* op_;
  bool gentle_ = false;
  std::vector<std::vector<MPI_Request>> reqs_;
};

uint64_t fnv1a(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; i++) h = (h ^ ((v >> (8 * i)) & 0xff)) * 0x100000001b3ull;
  return h;
}

// Checks this member's arguments and that every member passed the same set-wide ones (one
// allreduce: MAX of v and of ~v gives max and ~min, which are equal only if all values are).
// check(me, red_len) names a problem with this member's own buffers ("" if none).
using LocalCheck = std::function<std::string(int me, size_t red_len)>;
// extra: a fingerprint of anything else that must be the same on every member (0: nothing).
Status agree(MPI_Comm comm, const char* op, const SetCode& code, const std::vector<size_t>& lens,
             const std::vector<bool>* lost, size_t chunk, const LocalCheck& check, Geometry* geo,
             uint64_t extra = 0) {
  int size = 0, rc = MPI_Comm_size(comm, &size);
  if (rc != MPI_SUCCESS) return mpi_call_failed(op, "MPI_Comm_size", rc);
  if ((rc = MPI_Comm_rank(comm, &geo->me)) != MPI_SUCCESS) return mpi_call_failed(op, "MPI_Comm_rank", rc);
  std::string problem;
  if (size != code.n())
    problem = "the communicator has " + std::to_string(size) + " members, the code " + std::to_string(code.n());
  else if (lens.size() != static_cast<size_t>(code.n()))
    problem = "lens has " + std::to_string(lens.size()) + " entries for " + std::to_string(code.n()) + " members";
  else if (lost != nullptr && lost->size() != lens.size())
    problem = "lost has " + std::to_string(lost->size()) + " entries for " + std::to_string(code.n()) + " members";
  else if (chunk == 0)
    problem = "chunk must be > 0";
  else
    problem = check(geo->me, code.redundancy_len(*std::max_element(lens.begin(), lens.end())));

  uint64_t fp = 0xcbf29ce484222325ull;
  fp = fnv1a(fp, static_cast<uint64_t>(code.scheme()) << 32 | static_cast<uint32_t>(code.n()));
  fp = fnv1a(fp, static_cast<uint64_t>(code.m()));
  fp = fnv1a(fp, lens.size());
  for (size_t len : lens) fp = fnv1a(fp, len);
  if (lost != nullptr)
    for (bool l : *lost) fp = fnv1a(fp, l);
  fp = fnv1a(fp, extra);
  uint64_t v[5] = {problem.empty() ? 0u : 1u, chunk, ~uint64_t{chunk}, fp, ~fp};
  if ((rc = MPI_Allreduce(MPI_IN_PLACE, v, 5, MPI_UINT64_T, MPI_MAX, comm)) != MPI_SUCCESS)
    return mpi_call_failed(op, "MPI_Allreduce", rc);
  if (!problem.empty()) return make_error(Code::ERR_INVALID_ARG, "%s: member %d: %s", op, geo->me, problem.c_str());
  if (v[0] != 0) return make_error(Code::ERR_INVALID_ARG, "%s: another member passed invalid arguments", op);
  if (v[1] != ~v[2]) return make_error(Code::ERR_INVALID_ARG, "%s: members passed different chunk sizes", op);
  if (v[3] != ~v[4])
    return make_error(Code::ERR_INVALID_ARG, "%s: members passed different codes, lens or lost sets", op);

  shape(code, lens, chunk, geo);
  return Status::ok();
}

// --- encode ----------------------------------------------------------------------------------------

// Member x keeps a copy of member x-1: send my pieces right, receive the left one into my_red. With
// `changed`, only the span of a piece that changed chunks cover travels (the receiver knows which).
// With `base` (partner's delta update): the copy is brought up from B's copy instead: the holder receives
// x-1's bytes over the span changed since B, and copies B's over the rest of the region where x-1 changed
// since B or since my_red's encode (all of it without `changed`).
Status encode_partner(StepWindow& window, const Geometry& g, const std::vector<size_t>& lens,
                      const uint8_t* my_data, uint8_t* my_red, const ChangedChunks* changed, const DeltaBase* base,
                      EncodeReport* report) {
  int left = mod(g.me - 1, g.n), right = mod(g.me + 1, g.n);
  // What travels of member x's piece: the span changed since B, or since my_red's encode.
  auto moves = [&](int x, size_t off, size_t len) {
    return base ? base->since.span(x, lens[static_cast<size_t>(x)], off, len) : changed_span(changed, lens, x, off, len);
  };
  auto post = [&](size_t s, int slot) -> Status {
    size_t off = s * g.piece, len = std::min(g.piece, g.seg - off);
    const auto in = moves(left, off, len), out = moves(g.me, off, len);
    std::pair<size_t, size_t> region = {0, 0};  // of my_red, from B's copy
    if (base != nullptr) {
      region = changed_span(changed, lens, left, off, len);
      if (changed != nullptr && in.first < in.second)
        region = region.first < region.second
                     ? std::make_pair(std::min(region.first, in.first), std::max(region.second, in.second))
                     : in;
    }
    if (in.first == in.second && out.first == out.second && region.first == region.second) ++report->skipped;
    // B's copy goes only where no byte arrives: the receive writes all of `in` (what does not travel is
    // padding, zeroed), so the region's parts before and after it. A writer that rewrote everything
    // since B then costs no copy of B's but of the padding past a shorter neighbour's length.
    auto from_base = [&](size_t a, size_t b) {
      if (a < b) std::memcpy(my_red + off + a, base->red + off + a, b - a);
    };
    from_base(region.first, std::min(region.second, in.first));  // an empty `in` is {0, 0}: all of the region
    from_base(std::max(region.first, in.second), region.second);
    if (in.first < in.second)
      CAIRN_TRY(window.recv(slot, my_red + off + in.first, have(lens[left], off + in.first, in.second - in.first),
                            in.second - in.first, left, kTagEncode));
    report->full += have(lens[g.me], off, len);
    const size_t bytes = have(lens[g.me], off + out.first, out.second - out.first);
    report->sent += bytes;
    if (out.first < out.second) CAIRN_TRY(window.send(slot, at(my_data, off + out.first), bytes, right, kTagEncode));
    return Status::ok();
  };
  report->steps += g.pieces;
  return window.run(g.pieces, post, [](size_t, int) { return Status::ok(); });
}

// Step (piece i, row p): I hold parity row p of stripe me+p and receive its k data pieces; my
// segment j is data shard j of stripe me-1-j and goes to that stripe's row-p holder.
// With `changed`: a parity piece (stripe, offset) is recomputed only where one of its k data pieces
// changed: over the span its changed chunks cover together (widened to 64 bytes for the codec), the rest
// of the piece is the previous encode's; every member computes that span alike for the pieces it sends
// and receives.
Status encode_coded(StepWindow& window, const SetCode& code, const Geometry& g,
                    const std::vector<size_t>& lens, const uint8_t* my_data, uint8_t* my_red,
                    const ChangedChunks* changed, EncodeReport* report) {
  Scratch bufs = scratch(static_cast<size_t>(g.depth) * g.k * g.piece);
  auto piece_buf = [&](int slot, int j) { return bufs.get() + (static_cast<size_t>(slot) * g.k + j) * g.piece; };
  std::vector<const uint8_t*> src(g.k);
  // The span of the piece at off of `stripe` to encode: [first, second), empty when none of its k data
  // pieces changed.
  auto touched = [&](int stripe, size_t off, size_t len) {
    return spans::parity_span(code, g, lens, changed, stripe, off, len);
  };
  auto post = [&](size_t s, int slot) -> Status {
    int p = static_cast<int>(s % g.m);
    size_t off = (s / g.m) * g.piece, len = std::min(g.piece, g.seg - off);
    const auto mine = touched(mod(g.me + p, g.n), off, len);
    const size_t lo = mine.first, n = mine.second - mine.first;
    if (n == 0) ++report->skipped;
    for (int j = 0; j < g.k && n > 0; j++) {
      int y = code.shard_owner(mod(g.me + p, g.n), j);
      size_t pos = static_cast<size_t>(j) * g.seg + off;
      // A parity row that is a copy of its one source lands in place, as partner's copy does.
      uint8_t* to = code.parity_row_is_copy(p) ? my_red + static_cast<size_t>(p) * g.seg + off : piece_buf(slot, j);
      CAIRN_TRY(window.recv(slot, to + lo, have(lens[y], pos + lo, n), n, y, kTagEncode));
    }
    for (int j = 0; j < g.k; j++) {
      size_t pos = static_cast<size_t>(j) * g.seg + off;
      report->full += have(lens[g.me], pos, len);
      const auto theirs = touched(mod(g.me - 1 - j, g.n), off, len);  // as its holder computes it
      const size_t bytes = have(lens[g.me], pos + theirs.first, theirs.second - theirs.first);
      if (theirs.first == theirs.second) continue;  // its holder skips this parity piece
      int holder = code.shard_owner(mod(g.me - 1 - j, g.n), g.k + p);
      report->sent += bytes;
      CAIRN_TRY(window.send(slot, at(my_data, pos + theirs.first), bytes, holder, kTagEncode));
    }
    return Status::ok();
  };
  auto finish = [&](size_t s, int slot) -> Status {
    int p = static_cast<int>(s % g.m);
    size_t off = (s / g.m) * g.piece, len = std::min(g.piece, g.seg - off);
    const auto mine = touched(mod(g.me + p, g.n), off, len);
    if (mine.first == mine.second) return Status::ok();  // my_red keeps it
    if (code.parity_row_is_copy(p)) return Status::ok();  // landed in place
    for (int j = 0; j < g.k; j++) src[j] = piece_buf(slot, j) + mine.first;
    code.encode_parity_row(p, mine.second - mine.first, src.data(),
                           my_red + static_cast<size_t>(p) * g.seg + off + mine.first);
    return Status::ok();
  };
  report->steps += g.pieces * g.m;
  return window.run(g.pieces * g.m, post, finish);
}

// The delta update (DeltaBase): step (piece i, row p) as encode_coded's, but member y sends, for the
// parity piece of a stripe where it is data shard j, (its bytes XOR B's) over the span of its chunks
// changed since B (widened to 64 bytes); the holder copies B's parity over the piece's region (where any
// source changed since my_red's encode or since B) and adds each delta times its coefficient.
Status encode_delta(StepWindow& window, const SetCode& code, const Geometry& g, const std::vector<size_t>& lens,
                    const uint8_t* my_data, uint8_t* my_red, const ChangedChunks* changed, const DeltaBase& base,
                    EncodeReport* report) {
  Scratch in = scratch(static_cast<size_t>(g.depth) * g.k * g.piece);
  Scratch out = scratch(static_cast<size_t>(g.depth) * g.k * g.piece);
  auto buf = [&](const Scratch& b, int slot, int j) { return b.get() + (static_cast<size_t>(slot) * g.k + j) * g.piece; };
  // Source j of `stripe`: the span of its delta in the piece at off.
  auto delta_span = [&](int stripe, int j, size_t off, size_t len) {
    return spans::delta_span(code, g, lens, base.since, stripe, j, off, len);
  };
  // The region of the piece at off of `stripe` its holder writes: where any source changed since B or
  // since my_red's encode (everywhere without `changed`); empty when none did.
  auto region = [&](int stripe, size_t off, size_t len) {
    return changed == nullptr ? std::make_pair(size_t{0}, len)
                              : stripe_span(code, g, lens, stripe, off, len, {changed, &base.since});
  };
  auto post = [&](size_t s, int slot) -> Status {
    const int p = static_cast<int>(s % g.m);
    const size_t off = (s / g.m) * g.piece, len = std::min(g.piece, g.seg - off);
    const int mine = mod(g.me + p, g.n);
    const auto r = region(mine, off, len);
    if (r.first == r.second) ++report->skipped;
    for (int j = 0; j < g.k && r.first < r.second; j++) {
      const auto d = delta_span(mine, j, off, len);
      if (d.first == d.second) continue;
      const int y = code.shard_owner(mine, j);
      const size_t pos = static_cast<size_t>(j) * g.seg + off;
      CAIRN_TRY(window.recv(slot, buf(in, slot, j) + d.first, have(lens[y], pos + d.first, d.second - d.first),
                            d.second - d.first, y, kTagEncode));
    }
    for (int j = 0; j < g.k; j++) {
      const size_t pos = static_cast<size_t>(j) * g.seg + off;
      report->full += have(lens[g.me], pos, len);
      const int stripe = mod(g.me - 1 - j, g.n);
      const auto r_theirs = region(stripe, off, len);  // as its holder computes them
      const auto d = delta_span(stripe, j, off, len);
      const size_t bytes = have(lens[g.me], pos + d.first, d.second - d.first);
      if (r_theirs.first == r_theirs.second || bytes == 0) continue;
      uint8_t* delta = buf(out, slot, j);
      xor_of(delta, my_data + pos + d.first, base.data + pos + d.first, bytes);  // whatever the code
      report->sent += bytes;
      CAIRN_TRY(window.send(slot, delta, bytes, code.shard_owner(stripe, g.k + p), kTagEncode));
    }
    return Status::ok();
  };
  auto finish = [&](size_t s, int slot) -> Status {
    const int p = static_cast<int>(s % g.m);
    const size_t off = (s / g.m) * g.piece, len = std::min(g.piece, g.seg - off);
    const int mine = mod(g.me + p, g.n);
    const auto r = region(mine, off, len);
    if (r.first == r.second) return Status::ok();  // my_red keeps it
    const size_t at_row = static_cast<size_t>(p) * g.seg + off;
    std::memcpy(my_red + at_row + r.first, base.red + at_row + r.first, r.second - r.first);
    for (int j = 0; j < g.k; j++) {
      const auto d = delta_span(mine, j, off, len);
      if (d.first < d.second)
        code.update_parity_row(p, j, d.second - d.first, buf(in, slot, j) + d.first, my_red + at_row + d.first);
    }
    return Status::ok();
  };
  report->steps += g.pieces * g.m;
  return window.run(g.pieces * g.m, post, finish);
}

// --- rebuild ---------------------------------------------------------------------------------------

// A lost x gets its data back from x+1's copy and its copy (of x-1's data) from x-1.
Status rebuild_partner(StepWindow& window, const Geometry& g, const std::vector<size_t>& lens,
                       const std::vector<bool>& lost, uint8_t* my_data, uint8_t* my_red, RebuildPart part,
                       const Place& place) {
  int left = mod(g.me - 1, g.n), right = mod(g.me + 1, g.n);
  const bool red_too = part == RebuildPart::all;
  // With `place`, a lost member's data arrives in a piece buffer per slot, which place() copies on.
  Scratch bufs = scratch(lost[g.me] && place ? static_cast<size_t>(g.depth) * g.piece : 0);
  auto post = [&](size_t s, int slot) -> Status {
    size_t off = s * g.piece, len = std::min(g.piece, g.seg - off);
    if (lost[g.me]) {
      size_t mine = have(lens[g.me], off, len);  // my data has no padding to fill
      uint8_t* to = place ? bufs.get() + static_cast<size_t>(slot) * g.piece : at(my_data, off);
      CAIRN_TRY(window.recv(slot, to, mine, mine, right, kTagRebuild));
      if (!red_too) return Status::ok();
      return window.recv(slot, my_red + off, have(lens[left], off, len), len, left, kTagRebuildRed);
    }
    if (lost[left])
      CAIRN_TRY(window.send(slot, my_red + off, have(lens[left], off, len), left, kTagRebuild));
    if (lost[right] && red_too)
      CAIRN_TRY(window.send(slot, at(my_data, off), have(lens[g.me], off, len), right, kTagRebuildRed));
    return Status::ok();
  };
  auto finish = [&](size_t s, int slot) -> Status {
    size_t off = s * g.piece, len = std::min(g.piece, g.seg - off);
    if (lost[g.me] && place && have(lens[g.me], off, len))
      place(off, bufs.get() + static_cast<size_t>(slot) * g.piece, have(lens[g.me], off, len));
    return Status::ok();
  };
  return window.run(g.pieces, post, finish);
}

// Step (piece i, stripe st): each lost member rebuilds its shard of stripe st from the k sources
// of that stripe's plan, which send their piece to every lost member that needs it.
Status rebuild_coded(StepWindow& window, const SetCode& code, const Geometry& g,
                     const std::vector<size_t>& lens, const std::vector<bool>& lost, uint8_t* my_data,
                     uint8_t* my_red, RebuildPart part, const Place& place) {
  std::vector<SetCode::StripeRecovery> plans;
  std::vector<bool> lost_shards(g.n);
  for (int st = 0; st < g.n; st++) {
    for (int sh = 0; sh < g.n; sh++) lost_shards[sh] = lost[code.shard_owner(st, sh)];
    auto plan = code.plan_recovery(lost_shards);
    if (!plan) return plan.status().prefixed("L2 rebuild");
    plans.push_back(std::move(plan.value()));
  }
  // Where shard sh's piece at `off` lives in its holder's buffers, and how many bytes it has there.
  auto shard_at = [&](int sh, size_t off) { return sh < g.k ? static_cast<size_t>(sh) * g.seg + off
                                                            : static_cast<size_t>(sh - g.k) * g.seg + off; };
  auto shard_bytes = [&](int holder, int sh, size_t off, size_t len) {
    return sh < g.k ? have(lens[holder], shard_at(sh, off), len) : len;
  };
  // A lost member whose data ends before this piece of a data shard needs nothing for it; with
  // RebuildPart::data, nothing for its parity shards either.
  auto needs = [&](int x, int st, size_t off, size_t len) {
    const int sh = code.shard_of(st, x);
    if (part == RebuildPart::data && sh >= g.k) return false;
    return shard_bytes(x, sh, off, len) > 0;
  };
  // Where a lost member's piece of stripe st lands, and whether it can land there straight from its one
  // source (k = 1 and the source's coefficient 1, as for xor of two members: a copy, so no scratch and
  // no second pass): the whole piece is the source's and is the member's to keep.
  auto direct = [&](int st, size_t off, size_t len) -> uint8_t* {
    const auto& plan = plans[st];
    const int sh = code.shard_of(st, g.me);
    const int t = static_cast<int>(std::find(plan.targets.begin(), plan.targets.end(), sh) - plan.targets.begin());
    if (g.k != 1 || plan.coeffs[static_cast<size_t>(t)] != 1) return nullptr;
    const int src = plan.sources[0], y = code.shard_owner(st, src);
    if (shard_bytes(y, src, off, len) != len || shard_bytes(g.me, sh, off, len) != len) return nullptr;
    return (sh >= g.k ? my_red : my_data) + shard_at(sh, off);
  };

  bool rebuilding = lost[g.me];
  // Whether my piece of stripe st goes through place() (my data's pieces, where the caller gave it).
  auto placed = [&](int st) { return place && code.shard_of(st, g.me) < g.k; };
  Scratch bufs = scratch(rebuilding ? static_cast<size_t>(g.depth * g.k) * g.piece : 0);
  Scratch aside_buf;  // a piece rebuilt aside: allocated when a step first needs one (none does where all are direct)
  auto piece_buf = [&](int slot, int j) { return bufs.get() + (static_cast<size_t>(slot) * g.k + j) * g.piece; };
  auto aside = [&] {
    if (!aside_buf) aside_buf = scratch(g.piece);
    return aside_buf.get();
  };
  std::vector<const uint8_t*> src(g.k);
  auto step = [&](size_t s, int* st, size_t* off, size_t* len) {
    *st = static_cast<int>(s % g.n);
    *off = (s / g.n) * g.piece;
    *len = std::min(g.piece, g.seg - *off);
  };
  auto post = [&](size_t s, int slot) -> Status {
    int st;
    size_t off, len;
    step(s, &st, &off, &len);
    const auto& plan = plans[st];
    if (rebuilding) {
      if (!needs(g.me, st, off, len)) return Status::ok();
      if (uint8_t* dst = direct(st, off, len)) {
        int sh = plan.sources[0], y = code.shard_owner(st, sh);
        return window.recv(slot, placed(st) ? piece_buf(slot, 0) : dst, len, len, y, kTagRebuild);
      }
      for (int j = 0; j < g.k; j++) {
        int sh = plan.sources[j], y = code.shard_owner(st, sh);
        CAIRN_TRY(window.recv(slot, piece_buf(slot, j), shard_bytes(y, sh, off, len), len, y, kTagRebuild));
      }
      return Status::ok();
    }
    int sh = code.shard_of(st, g.me);
    if (std::find(plan.sources.begin(), plan.sources.end(), sh) == plan.sources.end()) return Status::ok();
    const uint8_t* piece = sh < g.k ? at(my_data, shard_at(sh, off)) : my_red + shard_at(sh, off);
    for (int x = 0; x < g.n; x++)
      if (lost[x] && needs(x, st, off, len))
        CAIRN_TRY(window.send(slot, piece, shard_bytes(g.me, sh, off, len), x, kTagRebuild));
    return Status::ok();
  };
  auto finish = [&](size_t s, int slot) -> Status {
    int st;
    size_t off, len;
    step(s, &st, &off, &len);
    if (!rebuilding || !needs(g.me, st, off, len)) return Status::ok();
    const auto& plan = plans[st];
    int sh = code.shard_of(st, g.me);
    const size_t keep = shard_bytes(g.me, sh, off, len);
    if (direct(st, off, len)) {
      if (placed(st)) place(shard_at(sh, off), piece_buf(slot, 0), keep);
      return Status::ok();
    }
    int t = static_cast<int>(std::find(plan.targets.begin(), plan.targets.end(), sh) - plan.targets.begin());
    for (int j = 0; j < g.k; j++) src[j] = piece_buf(slot, j);
    if (!placed(st) && (sh >= g.k || keep == len)) {  // the whole piece is mine to keep: rebuild in place
      code.recover_shard(plan, t, len, src.data(), (sh >= g.k ? my_red : my_data) + shard_at(sh, off));
      return Status::ok();
    }
    // Rebuilt aside: placed from there, or, where my data ends inside this piece, its head kept.
    uint8_t* to = aside();
    code.recover_shard(plan, t, len, src.data(), to);
    if (placed(st)) place(shard_at(sh, off), to, keep);
    else std::memcpy(my_data + shard_at(sh, off), to, keep);
    return Status::ok();
  };
  return window.run(g.pieces * g.n, post, finish);
}

}  // namespace

Status encode_set(MPI_Comm set_comm, const SetCode& code, const uint8_t* my_data, size_t my_len,
                  const std::vector<size_t>& lens, uint8_t* my_red, size_t chunk, const ChangedChunks* changed,
                  EncodeReport* report, const DeltaBase* base) {
  const char* op = "L2 encode";
  EncodeReport ignored;
  if (report == nullptr) report = &ignored;
  *report = {};
  ErrorsReturnScope errors;
  CAIRN_TRY(errors.enter(set_comm, op));
  const bool delta = base != nullptr && (code.scheme() == Redundancy::partner || code.k() > 1);
  auto check = [&](int me, size_t red_len) -> std::string {
    if (lens[me] != my_len)
      return "my_len " + std::to_string(my_len) + " differs from lens[" + std::to_string(me) + "] " +
             std::to_string(lens[me]);
    if (my_len > 0 && my_data == nullptr) return "my_data is null";
    if (red_len > 0 && my_red == nullptr) return "my_red is null";
    if (delta && code.scheme() != Redundancy::partner && my_len > 0 && base->data == nullptr)
      return "the delta base has no data";
    if (delta && red_len > 0 && base->red == nullptr) return "the delta base has no redundancy data";
    return "";
  };
  // Every member must skip the same steps: the changed chunks are part of what they agree on.
  auto mix = [](uint64_t fp, const ChangedChunks& c) {
    fp = fnv1a(fp, c.chunk_size);
    for (const auto& x : c.chunks) {
      fp = fnv1a(fp, x.size());
      for (size_t i = 0; i < x.size(); ++i)
        if (x[i]) fp = fnv1a(fp, i);
    }
    return fp;
  };
  uint64_t fp = 0;
  if (changed != nullptr) fp = mix(0x9e3779b97f4a7c15ull, *changed);
  if (delta) fp = mix(fnv1a(fp, 0xde17a), base->since);
  Geometry g;
  CAIRN_TRY(agree(set_comm, op, code, lens, nullptr, chunk, check, &g, fp));
  if (g.seg == 0) return Status::ok();
  StepWindow window(set_comm, op, g.depth);
  report->delta = delta;
  if (code.scheme() == Redundancy::partner)
    return encode_partner(window, g, lens, my_data, my_red, changed, delta ? base : nullptr, report);
  if (delta) {
    // The same forecast on every member: its inputs are part of the agreement.
    const EncodeForecast f = forecast_encode(code, lens, chunk, changed, base->since);
    if (!delta_update_pays(code, f)) {
      LOG_DEBUG("%s: plainly: a delta update would send %.2f MiB over the set, the plain encode %.2f", op,
                static_cast<double>(f.delta) / (1 << 20), static_cast<double>(f.plain) / (1 << 20));
      report->delta = false;
    }
  }
  if (report->delta) return encode_delta(window, code, g, lens, my_data, my_red, changed, *base, report);
  return encode_coded(window, code, g, lens, my_data, my_red, changed, report);
}

Status rebuild_set(MPI_Comm set_comm, const SetCode& code, const std::vector<bool>& lost,
                   uint8_t* my_data, const std::vector<size_t>& lens, uint8_t* my_red, size_t chunk,
                   RebuildPart part, bool gentle, const Place& place) {
  const char* op = "L2 rebuild";
  // Decided from `lost` alone, the same everywhere: no communication when there is nothing to do.
  if (lost.size() == static_cast<size_t>(code.n())) {
    if (!code.recoverable(lost)) {
      std::string who;
      for (size_t x = 0; x < lost.size(); x++)
        if (lost[x]) who += (who.empty() ? "" : ",") + std::to_string(x);
      return make_error(Code::ERR_UNRECOVERABLE, "%s: members {%s} of %d lost, more than the scheme tolerates",
                        op, who.c_str(), code.n());
    }
    if (std::none_of(lost.begin(), lost.end(), [](bool l) { return l; })) return Status::ok();
  }
  ErrorsReturnScope errors;
  CAIRN_TRY(errors.enter(set_comm, op));
  auto check = [&](int me, size_t red_len) -> std::string {
    if (lens[me] > 0 && my_data == nullptr) return "my_data is null";
    // A lost member rebuilding its data only writes no redundancy data.
    if (red_len > 0 && my_red == nullptr && !(part == RebuildPart::data && lost[static_cast<size_t>(me)]))
      return "my_red is null";
    return "";
  };
  Geometry g;
  CAIRN_TRY(agree(set_comm, op, code, lens, &lost, chunk, check, &g));
  if (g.seg == 0) return Status::ok();
  StepWindow window(set_comm, op, g.depth, gentle && !lost[static_cast<size_t>(g.me)]);
  if (code.scheme() == Redundancy::partner)
    return rebuild_partner(window, g, lens, lost, my_data, my_red, part, place);
  return rebuild_coded(window, code, g, lens, lost, my_data, my_red, part, place);
}

}  // namespace cairn::redundancy
