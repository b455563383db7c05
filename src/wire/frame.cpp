#include "wire/frame.hpp"

#include "wire/codec.hpp"

namespace cairn::wire {

const char* type_name(uint16_t type) {
  switch (static_cast<Type>(type)) {
    case Type::error: return "error";
    case Type::register_rank: return "register_rank";
    case Type::assigned: return "assigned";
    case Type::reassign: return "reassign";
    case Type::unregister: return "unregister";
    case Type::rank_usage: return "rank_usage";
    case Type::manager_hello: return "manager_hello";
    case Type::manager_welcome: return "manager_welcome";
    case Type::start_agent: return "start_agent";
    case Type::stop_agent: return "stop_agent";
    case Type::agent_up: return "agent_up";
    case Type::agent_exit: return "agent_exit";
    case Type::agent_stats: return "agent_stats";
    case Type::status_request: return "status_request";
    case Type::status_reply: return "status_reply";
    case Type::session_hello: return "session_hello";
    case Type::session_welcome: return "session_welcome";
    case Type::flush: return "flush";
    case Type::progress: return "progress";
    case Type::credit: return "credit";
    case Type::pushed: return "pushed";
    case Type::done: return "done";
    case Type::cancel: return "cancel";
    case Type::list_versions: return "list_versions";
    case Type::version_list: return "version_list";
    case Type::restore: return "restore";
    case Type::restored: return "restored";
    case Type::migrate_hello: return "migrate_hello";
    case Type::migrate_offer: return "migrate_offer";
    case Type::migrate_done: return "migrate_done";
  }
  return "unknown";
}

bool known_type(uint16_t type) { return std::string(type_name(type)) != "unknown"; }

std::string encode_header(Type type, uint32_t length) {
  Writer w;
  w.u32(kMagic);
  w.u16(kProtocol);
  w.u16(static_cast<uint16_t>(type));
  w.u32(length);
  return w.take();
}

Result<Header> decode_header(const uint8_t* p) {
  Reader r(p, kHeaderSize);
  uint32_t magic = r.u32();
  Header h;
  h.protocol = r.u16();
  uint16_t type = r.u16();
  h.length = r.u32();
  if (magic != kMagic)
    return make_error(Code::ERR_FORMAT, "not a cairn service message (magic 0x%08x, expected 0x%08x)", magic, kMagic);
  if (h.protocol != kProtocol)
    return make_error(Code::ERR_FORMAT, "protocol version %u is not supported (this side speaks version %u)",
                      h.protocol, kProtocol);
  if (!known_type(type)) return make_error(Code::ERR_FORMAT, "unknown message type %u", type);
  if (h.length > kMaxPayload)
    return make_error(Code::ERR_FORMAT, "%s message of %u bytes exceeds the limit of %u", type_name(type), h.length,
                      kMaxPayload);
  h.type = static_cast<Type>(type);
  return h;
}

std::string encode_frame(Type type, const std::string& payload) {
  return encode_header(type, static_cast<uint32_t>(payload.size())) + payload;
}

}  // namespace cairn::wire
