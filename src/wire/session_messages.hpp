// The session between a rank and its agent: the rank introduces itself (application, key, its
// libfabric address), then hands over versions; the agent moves them (pull: it fi_reads the rank's
// registered slot; push: it credits buffers of its pool and the rank fi_writes into them) and reports
// progress and the outcome. Field order and limits: docs/format.md, "The service's wire protocol".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wire/control_messages.hpp"

namespace cairn::wire {

struct SessionHello {
  static constexpr Type kType = Type::session_hello;
  uint64_t app_id = 0;
  AppKey key{};
  uint32_t rank = 0;
  std::string fabric_address;  // fi_getname of the rank's endpoint
  void write(Writer& w) const { w.u64(app_id), w.fixed(key), w.u32(rank), w.bytes(fabric_address); }
  void read(Reader& r) { app_id = r.u64(), key = r.fixed<16>(), rank = r.u32(), fabric_address = r.bytes(kMaxAddress); }
  std::string invalid() const { return fabric_address.empty() ? "no fabric address" : ""; }
};

struct SessionWelcome {
  static constexpr Type kType = Type::session_welcome;
  uint64_t agent_id = 0;
  std::string fabric_address;  // the agent's endpoint
  TransferMode mode = TransferMode::pull;
  uint32_t chunk_size = 0;
  uint64_t pool_addr = 0, pool_key = 0, pool_bytes = 0;  // push: where credits point (remote address base, key)
  void write(Writer& w) const {
    w.u64(agent_id), w.bytes(fabric_address), w.u8(uint8_t(mode)), w.u32(chunk_size), w.u64(pool_addr);
    w.u64(pool_key), w.u64(pool_bytes);
  }
  void read(Reader& r) {
    agent_id = r.u64(), fabric_address = r.bytes(kMaxAddress), mode = TransferMode(r.u8()), chunk_size = r.u32();
    pool_addr = r.u64(), pool_key = r.u64(), pool_bytes = r.u64();
  }
  std::string invalid() const {
    if (fabric_address.empty() || uint8_t(mode) > 1 || chunk_size == 0) return "no address, mode or chunk size";
    if (mode == TransferMode::push && pool_bytes < chunk_size) return "push without a buffer pool";
    return "";
  }
};

// Move one version of the rank: its manifest (docs/format.md "Manifest"), where its slot is registered,
// and where the data goes, as the rank decided it (l3::place_rank): placed = 0, the rank's own file in
// the version directory; 1, `file` of its own named by a where-record; 2, `file` shared with other ranks,
// at the `offset` the rank reserved, named by a where-record.
struct Flush {
  static constexpr Type kType = Type::flush;
  uint64_t version = 0;
  std::string manifest;
  uint64_t slot_addr = 0, slot_key = 0;  // pull: the remote address of stream byte 0, and the key
  uint8_t placed = 0;
  std::string file;
  uint64_t offset = 0;
  uint8_t zstd_level = 0;  // the application's compress level: 0 stored as is, 1..19 zstd chunks (placed 1)
  void write(Writer& w) const {
    w.u64(version), w.bytes(manifest), w.u64(slot_addr), w.u64(slot_key), w.u8(placed), w.bytes(file), w.u64(offset);
    w.u8(zstd_level);
  }
  void read(Reader& r) {
    version = r.u64(), manifest = r.bytes(kMaxPayload), slot_addr = r.u64(), slot_key = r.u64(), placed = r.u8();
    file = r.bytes(kMaxPath), offset = r.u64(), zstd_level = r.u8();
  }
  std::string invalid() const {
    if (version == 0 || manifest.empty()) return "no version or manifest";
    if (placed > 2) return "unknown placement";
    if (placed != 0 && !absolute_path(file)) return "the data file is not an absolute path";
    if (placed == 0 && (!file.empty() || offset != 0)) return "a data file without placement";
    if (zstd_level > 19) return "a compression level over 19";
    if (zstd_level > 0 && placed != 1) return "compressed data in a file not of the rank's own";
    return "";
  }
};

struct Progress {
  static constexpr Type kType = Type::progress;
  uint64_t version = 0;
  uint64_t bytes_done = 0;  // 0 while the version waits behind others
  void write(Writer& w) const { w.u64(version), w.u64(bytes_done); }
  void read(Reader& r) { version = r.u64(), bytes_done = r.u64(); }
  std::string invalid() const { return ""; }
};

// Push: the rank may write the next chunks of `version` into these buffers (offsets into the pool).
struct Credit {
  static constexpr Type kType = Type::credit;
  uint64_t version = 0;
  std::vector<uint64_t> buffers;
  void write(Writer& w) const { w.u64(version), w.u64s(buffers); }
  void read(Reader& r) { version = r.u64(), buffers = r.u64s(kMaxCredits); }
  std::string invalid() const { return buffers.empty() ? "no buffers" : ""; }
};

// Push: stream bytes [offset, offset + length) of `version` are in the buffer at pool offset `buffer`.
struct Pushed {
  static constexpr Type kType = Type::pushed;
  uint64_t version = 0, offset = 0;
  uint32_t length = 0;
  uint64_t buffer = 0;
  void write(Writer& w) const { w.u64(version), w.u64(offset), w.u32(length), w.u64(buffer); }
  void read(Reader& r) { version = r.u64(), offset = r.u64(), length = r.u32(), buffer = r.u64(); }
  std::string invalid() const { return length ? "" : "empty chunk"; }
};

// The outcome: code 0, the rank's files of the version are durable under the prefix; else a cairn
// error code and why.
struct Done {
  static constexpr Type kType = Type::done;
  uint64_t version = 0;
  int32_t code = 0;
  std::string message;
  void write(Writer& w) const { w.u64(version), w.i32(code), w.bytes(message); }
  void read(Reader& r) { version = r.u64(), code = r.i32(), message = r.bytes(kMaxText); }
  std::string invalid() const { return code <= 0 ? "" : "a positive code"; }
};

struct Cancel {
  static constexpr Type kType = Type::cancel;
  uint64_t version = 0;
  void write(Writer& w) const { w.u64(version); }
  void read(Reader& r) { version = r.u64(); }
  std::string invalid() const { return ""; }
};

// The committed versions under the application's prefix, newest first. Only with the application's key.
struct ListVersions {
  static constexpr Type kType = Type::list_versions;
  uint64_t app_id = 0;
  AppKey key{};
  void write(Writer& w) const { w.u64(app_id), w.fixed(key); }
  void read(Reader& r) { app_id = r.u64(), key = r.fixed<16>(); }
  std::string invalid() const { return ""; }
};

struct VersionList {
  static constexpr Type kType = Type::version_list;
  std::vector<uint64_t> versions;
  void write(Writer& w) const { w.u64s(versions); }
  void read(Reader& r) { versions = r.u64s(kMaxVersions); }
  std::string invalid() const { return ""; }
};

}  // namespace cairn::wire
