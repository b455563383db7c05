// Encoding and decoding one message of the service protocol. Every message type is a struct with
//   static constexpr Type kType;        its frame type
//   void write(Writer&) const;          its fields, in the order docs/format.md lists them
//   void read(Reader&);                 the same fields, each length bounded
//   std::string invalid() const;        "" when the values make sense, else why not
// and decode<M>() accepts a payload only when every field was there, nothing is left over and the
// values make sense: a decoded message can be used without further checks of its shape.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "base/status.hpp"
#include "wire/codec.hpp"
#include "wire/frame.hpp"

namespace cairn::wire {

// Limits on the fields (bytes or counts), the same on both sides.
constexpr size_t kMaxName = 256;       // application, job, manager and host names, HOST:PORT
constexpr size_t kMaxPath = 4096;      // prefixes and data files
constexpr size_t kMaxAddress = 256;    // a libfabric endpoint name (fi_getname)
constexpr size_t kMaxRoots = 64;       // data prefixes of an application
constexpr size_t kMaxText = 4096;      // error messages
constexpr size_t kMaxCredits = 65536;  // buffers named in one credit message
constexpr size_t kMaxVersions = 1 << 20;

// An application's key: 128 random bits drawn by the application at cairn_init. It is the credential
// of every request about the application's data; it is never logged or shown.
using AppKey = std::array<uint8_t, 16>;
// Compares in time independent of where the keys differ.
bool same_key(const AppKey& a, const AppKey& b);
// The same for two strings of any length (a deployment's token).
bool same_secret(const std::string& a, const std::string& b);
// 128 bits from getrandom(2).
Result<AppKey> random_key();
// 32 lower-case hex digits, and back (ERR_FORMAT for anything else): how `cairn run` hands a migration's
// key to its two ends, on their stdin.
std::string key_hex(const AppKey& k);
Result<AppKey> parse_key_hex(const std::string& text);

// Pull: agents fi_read the ranks' slots. Push: ranks fi_write into the agents' buffers.
enum class TransferMode : uint8_t { pull = 0, push = 1 };
const char* mode_name(TransferMode m);

template <class M>
std::string encode(const M& m) {
  Writer w;
  m.write(w);
  return w.take();
}

template <class M>
std::string frame(const M& m) {
  return encode_frame(M::kType, encode(m));
}

template <class M>
Result<M> decode(const std::string& payload) {
  Reader r(payload);
  M m;
  m.read(r);
  if (!r.ok())
    return make_error(Code::ERR_FORMAT, "malformed %s message (%zu bytes: %s)", type_name(uint16_t(M::kType)),
                      payload.size(), r.failed() ? "a field is truncated or too long" : "bytes left over");
  std::string why = m.invalid();
  if (!why.empty())
    return make_error(Code::ERR_FORMAT, "invalid %s message: %s", type_name(uint16_t(M::kType)), why.c_str());
  return m;
}

// The refusal of a request: a cairn error code (negative) and the reason.
struct ErrorMsg {
  static constexpr Type kType = Type::error;
  int32_t code = 0;
  std::string message;
  void write(Writer& w) const {
    w.i32(code);
    w.bytes(message);
  }
  void read(Reader& r) {
    code = r.i32();
    message = r.bytes(kMaxText);
  }
  std::string invalid() const { return code < 0 ? "" : "an error code must be negative"; }
};

}  // namespace cairn::wire
