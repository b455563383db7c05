// Inputs for the fuzz tests of the decoders of on-disk formats (one per format's test file, in the shape
// of manifest_test.cpp's "ManifestFuzz"): random bytes, and valid encodings mutated a few edits at a
// time, so that most inputs get past the first checks and reach deep into the decoder. A fuzz test
// asserts that no input crashes or throws, that every rejection is a clean error, that what decodes
// re-encodes to what decodes the same, and that some mutations still decode.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace cairn::fuzz {

inline std::string random_bytes(std::mt19937_64& rng, size_t max_len) {
  std::string s(rng() % (max_len + 1), '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

// 1..4 edits of `s`: a byte flipped, a byte or a token written over it, random bytes or a token
// inserted, a few bytes erased, the tail cut off, or a piece repeated. `tokens` are pieces of the
// format (keywords, separators, numbers at the edges of their range) that make edits meaningful.
inline void mutate(std::string& s, std::mt19937_64& rng, const std::vector<std::string>& tokens = {}) {
  for (int ops = 1 + static_cast<int>(rng() % 4); ops > 0; --ops) {
    const size_t at = s.empty() ? 0 : rng() % (s.size() + 1);
    const std::string token = tokens.empty() ? std::string(1, static_cast<char>(rng())) : tokens[rng() % tokens.size()];
    switch (rng() % 7) {
      case 0:
        if (at < s.size()) s[at] = static_cast<char>(static_cast<uint8_t>(s[at]) ^ static_cast<uint8_t>(1 + rng() % 255));
        break;
      case 1:
        if (at < s.size()) s.replace(at, std::min(token.size(), s.size() - at), token);
        break;
      case 2: s.insert(at, random_bytes(rng, 8)); break;
      case 3: s.insert(at, token); break;
      case 4: s.erase(at, 1 + rng() % 8); break;
      case 5: s.resize(at); break;
      case 6:
        if (at < s.size()) s.insert(rng() % (s.size() + 1), s.substr(at, 1 + rng() % 16));
        break;
    }
  }
}

}  // namespace cairn::fuzz
