// Process migration over the fabric (docs/migration.md, "Over the fabric"): the writer on the spare node
// (cairnd migrate-sink) connects to the reader on the node being emptied (cairnd migrate-source) and
// presents the migration's key; the reader answers with the version's files, each registered for remote
// reads (address and key); the writer fi_reads them chunk by chunk into its buffer pool, checks each
// chunk on arrival, writes it into the spare's cache, and says how it ended. Field order and limits:
// docs/format.md, "The service's wire protocol".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wire/message.hpp"

namespace cairn::wire {

constexpr uint32_t kMaxMigrateFiles = 1u << 20;

// The writer introduces itself with the key `cairn run` gave both ends (never on a command line).
struct MigrateHello {
  static constexpr Type kType = Type::migrate_hello;
  AppKey key{};
  std::string spare;           // the node being filled, for the reader's log
  std::string fabric_address;  // fi_getname of the writer's endpoint
  void write(Writer& w) const { w.fixed(key), w.bytes(spare), w.bytes(fabric_address); }
  void read(Reader& r) { key = r.fixed<16>(), spare = r.bytes(kMaxName), fabric_address = r.bytes(kMaxAddress); }
  std::string invalid() const { return fabric_address.empty() ? "no fabric address" : ""; }
};

// A file streamed: `length` bytes from offset 0 of the registered mapping at `addr` (remote address of
// byte 0) with `key`, into a destination file of `size` bytes. checked: a memory-API slot, checked chunk
// by chunk against its rank's manifest (from the rank's L1 record among the small files).
struct MigrateFile {
  uint32_t rank = 0;
  std::string name;
  uint64_t length = 0, size = 0;
  uint8_t checked = 0;
  uint64_t addr = 0, key = 0;
};

// A small file copied whole (set file, protected marker, L1 record; the records last).
struct MigrateSmall {
  uint32_t rank = 0;
  std::string name;
  std::string bytes;
};

struct MigrateOffer {
  static constexpr Type kType = Type::migrate_offer;
  uint64_t version = 0;
  std::string node;            // the node being emptied
  std::string fabric_address;  // the reader's endpoint
  std::vector<MigrateFile> files;
  std::vector<MigrateSmall> smalls;
  void write(Writer& w) const {
    w.u64(version), w.bytes(node), w.bytes(fabric_address), w.u32(static_cast<uint32_t>(files.size()));
    for (const auto& f : files) w.u32(f.rank), w.bytes(f.name), w.u64(f.length), w.u64(f.size), w.u8(f.checked), w.u64(f.addr), w.u64(f.key);
    w.u32(static_cast<uint32_t>(smalls.size()));
    for (const auto& s : smalls) w.u32(s.rank), w.bytes(s.name), w.bytes(s.bytes);
  }
  void read(Reader& r) {
    version = r.u64(), node = r.bytes(kMaxName), fabric_address = r.bytes(kMaxAddress);
    uint32_t n = r.u32();
    if (n > kMaxMigrateFiles) return;  // refused: bytes left over
    for (uint32_t i = 0; i < n && !r.failed(); ++i) {
      MigrateFile f;
      f.rank = r.u32(), f.name = r.bytes(kMaxPath), f.length = r.u64(), f.size = r.u64(), f.checked = r.u8();
      f.addr = r.u64(), f.key = r.u64();
      files.push_back(std::move(f));
    }
    n = r.u32();
    if (n > kMaxMigrateFiles) return;
    for (uint32_t i = 0; i < n && !r.failed(); ++i) {
      MigrateSmall s;
      s.rank = r.u32(), s.name = r.bytes(kMaxPath), s.bytes = r.bytes(kMaxPayload);
      smalls.push_back(std::move(s));
    }
  }
  std::string invalid() const {
    if (version == 0 || fabric_address.empty()) return "no version or fabric address";
    if (files.empty() || smalls.empty()) return "no files";
    for (const auto& f : files)
      if (f.checked > 1 || f.length > f.size) return "a file with a bad length or flag";
    return "";
  }
};

// The writer's outcome: code 0, the version is in the spare's cache (bytes moved, of which `checked`
// were checked chunk by chunk); else a cairn error code and why. The reader then revokes every key.
struct MigrateDone {
  static constexpr Type kType = Type::migrate_done;
  int32_t code = 0;
  uint64_t bytes = 0, checked = 0;
  std::string message;
  void write(Writer& w) const { w.i32(code), w.u64(bytes), w.u64(checked), w.bytes(message); }
  void read(Reader& r) { code = r.i32(), bytes = r.u64(), checked = r.u64(), message = r.bytes(kMaxText); }
  std::string invalid() const { return code <= 0 ? "" : "a positive code"; }
};

}  // namespace cairn::wire
