// The service's framing (docs/format.md, "The service's wire protocol"): every message travels as a
// 12-byte header -- magic "cnsv", protocol version (u16), message type (u16), payload length (u32),
// little-endian -- followed by the payload. The header is checked before anything else is believed:
// a wrong magic, another protocol version, an unknown type or a payload over kMaxPayload is refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.hpp"

namespace cairn::wire {

constexpr uint32_t kMagic = 0x76736e63;  // "cnsv" read as a little-endian u32
constexpr uint16_t kProtocol = 2;        // the version this code speaks (and the only one it reads)
constexpr size_t kHeaderSize = 12;
constexpr uint32_t kMaxPayload = 64u << 20;  // a manifest of 8 million chunks; far above any real one

enum class Type : uint16_t {
  error = 1,            // any -> any: a request was refused (code, message)
  register_rank = 2,    // rank -> controller
  assigned = 3,         // controller -> rank: the rank's agent
  reassign = 4,         // rank -> controller: my agent is lost, give me another
  unregister = 5,       // rank -> controller: leaving
  rank_usage = 6,       // rank -> controller: its bytes per version and checkpoint interval, as measured
  manager_hello = 16,   // manager -> controller
  manager_welcome = 17, // controller -> manager
  start_agent = 18,     // controller -> manager -> agent (on its stdin)
  stop_agent = 19,      // controller -> manager
  agent_up = 20,        // agent -> manager -> controller
  agent_exit = 21,      // manager -> controller
  agent_stats = 22,     // agent -> manager -> controller
  status_request = 32,  // client -> controller
  status_reply = 33,    // controller -> client: a JSON document
  session_hello = 48,   // rank -> agent
  session_welcome = 49, // agent -> rank
  flush = 50,           // rank -> agent: move this version
  progress = 51,        // agent -> rank: still moving (bytes done)
  credit = 52,          // agent -> rank (push): buffers the rank may write into
  pushed = 53,          // rank -> agent (push): a chunk landed in a buffer
  done = 54,            // agent -> rank: the version's files are durable, or why not
  cancel = 55,          // rank -> agent: stop moving this version
  list_versions = 56,   // rank or tool -> agent: committed versions of the application's prefix
  version_list = 57,    // agent -> requester
  restore = 58,         // rank -> agent: write this version's bytes of mine into my registered regions
  restored = 59,        // agent -> rank: the restore's outcome
  migrate_hello = 64,   // migration writer (spare) -> reader (node being emptied)
  migrate_offer = 65,   // reader -> writer: the version's files, registered for remote reads
  migrate_done = 66,    // writer -> reader: the outcome
};

// "register_rank"; "unknown" for a value outside the list.
const char* type_name(uint16_t type);
bool known_type(uint16_t type);

struct Header {
  uint16_t protocol = kProtocol;
  Type type = Type::error;
  uint32_t length = 0;
};

std::string encode_header(Type type, uint32_t length);
// `p` holds at least kHeaderSize bytes. ERR_FORMAT naming what is wrong: not the magic (garbage, or
// another protocol altogether), another protocol version, an unknown type, an oversized payload.
Result<Header> decode_header(const uint8_t* p);
// The whole frame: header and payload.
std::string encode_frame(Type type, const std::string& payload);

}  // namespace cairn::wire
