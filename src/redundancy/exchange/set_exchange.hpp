// L2 over MPI: the members of one redundancy set (one MPI communicator, member x = rank x in it)
// compute and store their redundancy data, and rebuild lost members. Same result, byte for byte, as
// SetCode::encode_all / decode_all (tests check this). Data moves in pieces of `chunk` bytes so
// buffers stay bounded (a few chunks per member), whatever the snapshot size.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "redundancy/set_code.hpp"

namespace cairn::redundancy {

// Point-to-point tags used on set_comm: [kSetTagFirst, kSetTagFirst + kSetTagCount). The caller gives
// a dedicated communicator; the fixed range still keeps the exchange apart from anything else sent
// on it. Below MPI's guaranteed minimum MPI_TAG_UB (32767).
inline constexpr int kSetTagFirst = 0x6300;
inline constexpr int kSetTagCount = 8;

// Steps in flight: as many as the pieces they hold (the buffers a coded member combines, or what partner
// moves in place) fit kExchangeInFlightBytes, at least kExchangeMinSteps and at most kExchangeMaxSteps.
// Each piece is a message of its own (a rendezvous on most transports); with only two in flight the
// transport sat idle between them, and the exchange of two 256 MiB members took about a sixth longer
// (docs/performance.md).
inline constexpr int kExchangeMinSteps = 2, kExchangeMaxSteps = 8;
inline constexpr size_t kExchangeInFlightBytes = size_t{32} << 20;
// The steps in flight for steps of `per_step` bytes (> 0).
constexpr int exchange_depth(size_t per_step) {
  const size_t fit = kExchangeInFlightBytes / per_step;
  return fit < kExchangeMinSteps ? kExchangeMinSteps : fit > kExchangeMaxSteps ? kExchangeMaxSteps : static_cast<int>(fit);
}

// Common to both calls:
// - chunk: pipeline unit in bytes (> 0; rounded up to a multiple of 64, at most 1 GiB); the same on
//   every member. Steps in flight: as many as their pieces fit 32 MiB, 2 to 8 (a partner step moves one
//   piece, an xor or rs step combines k). Extra memory per member: xor/rs encode and a lost member's
//   rebuild hold the steps' pieces, at most max(32 MiB, 2 * k * chunk) (twice that for a delta update:
//   the deltas being sent), plus one chunk for a lost
//   member; a lost member that places its data (partner too) holds one piece per step; nothing more for
//   partner or for rebuild survivors.
// - Inputs are checked together first (one small allreduce): a bad or inconsistent argument on any
//   member (length, chunk, lens, lost) is ERR_INVALID_ARG on every member, never a hang.
// - MPI errors: the communicator's error handler is set to MPI_ERRORS_RETURN for the call and
//   restored after; a failed call is ERR_MPI naming it and the peer. After ERR_MPI the set's
//   communicator should be considered broken (peers may be left waiting).
// - Thread safety: calls MPI from the calling thread; the caller owns the thread level question.
//   Not reentrant on one set_comm.
// - Buffers of any alignment; kSetCodeAlign-aligned my_red lets ISA-L's xor_gen run for xor.

// What changed in each member's data since the encode whose redundancy data my_red already holds (the
// same set, code and lengths): member x's chunk c (chunk_size bytes of its data) changed when
// chunks[x][c] is nonzero; a chunk the vector does not reach counts as changed. The same on every member.
struct ChangedChunks {
  uint32_t chunk_size = 0;
  std::vector<std::vector<uint8_t>> chunks;  // per member
  // The part of bytes [pos, pos + len) of member x's data (of lens_x bytes; beyond it: padding,
  // unchanged) that its changed chunks cover, from the first changed byte to the last, relative to pos:
  // [first, second), empty (first == second) when none changed.
  std::pair<size_t, size_t> span(int x, size_t lens_x, size_t pos, size_t len) const;
};
// What an encode moved: its pipeline steps, and those skipped because nothing they carry changed; the
// bytes this member sent, and those a full encode would have had it send (the same without `changed`;
// with it, a step moves only the span of its piece that changed chunks cover).
struct EncodeReport {
  size_t steps = 0, skipped = 0;
  uint64_t sent = 0, full = 0;
  bool delta = false;  // a delta update was taken (given a base, and it pays: delta_update_pays)
};

// A delta update: the set protected an earlier version B, whose bytes and redundancy data are still on
// every member (another L1 slot), and the redundancy data is brought from B's to this version's with the
// changes since B alone, reading B's, never writing it.
// - xor and rs (k > 1): each member sends (its bytes XOR B's) over the span of its chunks that differ
//   from B's; each holder writes B's parity plus every delta times its coefficient into my_red. So each
//   member sends its own change, where a recomputed parity piece needs all k sources over the union of
//   their spans (k times the change).
// - partner: the holder copies B's copy where its neighbour changed since B or since my_red's encode,
//   and receives the neighbour's bytes changed since B: fewer than those changed since my_red's version
//   where the state changes in different places from one version to the next (a chunk changed in B and
//   changed back since is sent too).
// - xor and rs with one data member per stripe (k = 1: sets of two, rs with n - 1 parity rows) move each
//   member's change alone already: ignored.
struct DeltaBase {
  const uint8_t* data = nullptr;  // B's bytes of this member (my_len bytes: B has this version's lengths)
  const uint8_t* red = nullptr;   // B's redundancy data of this member (redundancy_len(max_len) bytes)
  ChangedChunks since;            // per member, the chunks that differ from B's (more is correct, and slower)
};

// What an encode of xor or rs with k > 1 sources per stripe would send over the whole set (every member's
// bytes): plainly, the k sources of each parity piece over the span where any of them changed (`changed`;
// all without it), and as a delta update from B, each source over its own span changed since B (`since`).
// From the agreed inputs alone: the same on every member, no communication. Zero for partner and k = 1.
struct EncodeForecast {
  uint64_t plain = 0, delta = 0;
};
EncodeForecast forecast_encode(const SetCode& code, const std::vector<size_t>& lens, size_t chunk,
                               const ChangedChunks* changed, const ChangedChunks& since);
// Whether encode_set takes the delta update it is given. Partner's costs no more than its plain copy (B's
// bytes go only where none arrive): always. Under xor and rs with k > 1 each source reads B's bytes and
// sends a delta, and the holder copies B's parity and adds every delta, where the plain encode only sends
// the sources: per byte sent, about 1.8 times the plain encode's time in sets of four (docs/performance.md,
// "The delta update of a rewritten state"). So only where it sends at most kDeltaShare of the plain
// encode's bytes. Where a base is ignored (k = 1): false.
inline constexpr double kDeltaShare = 0.55;
bool delta_update_pays(const SetCode& code, const EncodeForecast& f);

// Collective over set_comm (size == code.n()). my_data: this member's snapshot (my_len bytes);
// lens: every member's length (same on all members); my_red: code.redundancy_len(max_len) bytes,
// written. max_len = max(lens).
// changed (optional, the same on every member): my_red holds the redundancy data of an earlier encode
// of this set, and only what changed since is moved and encoded: a step whose sources (partner: the piece
// copied; xor/rs: the k data pieces of a parity piece) are all unchanged moves nothing and leaves its
// part of my_red as it is, which is already the redundancy of those bytes. Both codes are per piece, so
// the result is byte for byte the full encode's. The caller makes sure my_red held that encode in full
// (a version protected at L2), and that a failure half-way never counts: my_red is then a mix.
// base (optional, the same kind on every member): a delta update from B (DeltaBase), where it pays
// (delta_update_pays; report->delta says). A parity piece is then written where any of its sources changed
// since my_red's encode (all of it without `changed`) or since B: B's parity there, plus the deltas. The
// result is byte for byte the full encode's too. Extra memory: the deltas being sent, one piece per source
// and step in flight.
Status encode_set(MPI_Comm set_comm, const SetCode& code, const uint8_t* my_data, size_t my_len,
                  const std::vector<size_t>& lens, uint8_t* my_red, size_t chunk,
                  const ChangedChunks* changed = nullptr, EncodeReport* report = nullptr,
                  const DeltaBase* base = nullptr);

// What a rebuild restores of the lost members: everything, or their data only (a restart that needs
// the data now and their redundancy data later; the same on every member).
enum class RebuildPart { all, data };

// Collective over set_comm. lost: same vector on every member. Survivors pass their data and
// redundancy; a lost member passes buffers to receive its data (lens[x] bytes) and its redundancy
// (redundancy_len bytes; none, and my_red may be null, with RebuildPart::data). ERR_UNRECOVERABLE (on
// every member) if !code.recoverable(lost). gentle: a survivor waits for its transfers with short sleeps
// rather than MPI's busy wait (it has other work on a thread of its own meanwhile). place: on a lost
// member, its data does not arrive in my_data but in a buffer of the exchange's own, a piece (`chunk`
// bytes) at a time, which stays in the CPU cache; place(off, src, len) (on the calling thread) puts bytes
// [off, off + len) of its data, now at src, into their place, in no particular order, each byte once,
// verifying them as it copies (LandingVerifier::place). A failure is the callee's to record: the
// exchange goes on, as every member must finish it.
using Place = std::function<void(size_t off, const uint8_t* src, size_t len)>;
Status rebuild_set(MPI_Comm set_comm, const SetCode& code, const std::vector<bool>& lost,
                   uint8_t* my_data, const std::vector<size_t>& lens, uint8_t* my_red, size_t chunk,
                   RebuildPart part = RebuildPart::all, bool gentle = false, const Place& place = {});

}  // namespace cairn::redundancy
