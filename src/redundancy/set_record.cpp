#include "redundancy/set_record.hpp"

#include <cstring>

#include "base/xxh.hpp"

namespace cairn::redundancy {
namespace {
constexpr char kMagic[8] = {'C', 'A', 'I', 'R', 'N', 'S', 'E', 'T'};

void put32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
struct Reader {
  const std::string& s;
  size_t pos = 0;
  bool ok = true;
  uint64_t get(int bytes) {
    if (pos + static_cast<size_t>(bytes) > s.size()) {
      ok = false;
      return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(s[pos + i])) << (8 * i);
    pos += static_cast<size_t>(bytes);
    return v;
  }
};
}  // namespace

std::string encode_set_record(const SetRecord& r) {
  std::string s(kMagic, 8);
  put32(s, 1);  // format
  put32(s, static_cast<uint32_t>(r.scheme));
  put32(s, r.n);
  put32(s, r.m);
  for (size_t i = 0; i < r.n; ++i) {
    put32(s, r.ranks[i]);
    put32(s, static_cast<uint32_t>(r.manifests[i].size()));
    s += r.manifests[i];
  }
  put64(s, XXH3_64bits(s.data(), s.size()));
  return s;
}

Result<SetRecord> decode_set_record(const std::string& bytes) {
  if (bytes.size() < 8 + 16 + 8 || memcmp(bytes.data(), kMagic, 8) != 0)
    return make_error(Code::ERR_FORMAT, "not a cairn set record");
  uint64_t want = 0;
  for (int i = 0; i < 8; ++i) want |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[bytes.size() - 8 + i])) << (8 * i);
  if (XXH3_64bits(bytes.data(), bytes.size() - 8) != want)
    return make_error(Code::ERR_CORRUPT, "set record checksum mismatch");
  Reader rd{bytes};
  rd.pos = 8;
  SetRecord r;
  if (rd.get(4) != 1) return make_error(Code::ERR_FORMAT, "set record: unknown format");
  const uint64_t scheme = rd.get(4);
  if (scheme > static_cast<uint64_t>(Redundancy::rs))
    return make_error(Code::ERR_FORMAT, "set record: unknown scheme %llu", static_cast<unsigned long long>(scheme));
  r.scheme = static_cast<Redundancy>(scheme);
  r.n = static_cast<uint32_t>(rd.get(4));
  r.m = static_cast<uint32_t>(rd.get(4));
  if (r.n > 4096) return make_error(Code::ERR_CORRUPT, "set record: %u members", r.n);
  if (r.m > r.n) return make_error(Code::ERR_CORRUPT, "set record: %u parity members of %u", r.m, r.n);
  for (uint32_t i = 0; i < r.n && rd.ok; ++i) {
    r.ranks.push_back(static_cast<uint32_t>(rd.get(4)));
    size_t len = static_cast<size_t>(rd.get(4));
    if (!rd.ok || rd.pos + len > bytes.size() - 8) return make_error(Code::ERR_CORRUPT, "set record truncated");
    r.manifests.push_back(bytes.substr(rd.pos, len));
    rd.pos += len;
  }
  if (!rd.ok || rd.pos != bytes.size() - 8) return make_error(Code::ERR_CORRUPT, "set record: bad length");
  return r;
}

}  // namespace cairn::redundancy
