// The manifest's byte layout. docs/format.md is the spec; this file and that page change together, and
// tests/unit/golden/manifest_v1.bin pins format 1 forever.
#include "base/manifest.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <tuple>

#include "base/chunk_check.hpp"
#include "base/xxh.hpp"
#include "base/xxh3_copy.hpp"

namespace cairn {
namespace {

using ull = unsigned long long;  // for printf

constexpr char kMagic[8] = {'C', 'A', 'I', 'R', 'N', 'M', 'A', 'N'};
constexpr size_t kMagicSize = sizeof kMagic;
constexpr size_t kTrailerSize = 8;  // u64 XXH3_64bits of every byte before it

// Format 1 sizes (see docs/format.md).
constexpr size_t kV1HeaderLengthAt = 12;
constexpr size_t kV1EncodedLengthAt = 16;
constexpr size_t kV1ChunkSizeAt = 56;
constexpr size_t kV1FixedHeader = 60;                         // magic .. chunk_size
constexpr size_t kV1MinHeader = kV1FixedHeader + 4 + 4;       // + empty label and node
constexpr size_t kV1RegionFixed = 4 * 4 + 3 * 8;              // kind .. size, after record_length
constexpr size_t kV1MinRegionBody = kV1RegionFixed + 4 + 4;   // + empty name, no dist_params
constexpr size_t kV1MinRecord = 4 + kV1MinRegionBody;         // with its record_length
constexpr size_t kV1MinSize = kV1MinHeader + 4 + 8 + kTrailerSize;

// ---- writing -------------------------------------------------------------------------------------

class ByteWriter {
 public:
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>(v >> (8 * i)));
  }
  void bytes(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  void patch_u32(size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) out_[at + i] = static_cast<char>(v >> (8 * i));
  }
  void patch_u64(size_t at, uint64_t v) {
    for (int i = 0; i < 8; ++i) out_[at + i] = static_cast<char>(v >> (8 * i));
  }
  size_t size() const { return out_.size(); }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

// ---- reading -------------------------------------------------------------------------------------

uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

uint64_t load_u64(const uint8_t* p) {
  return static_cast<uint64_t>(load_u32(p)) | static_cast<uint64_t>(load_u32(p + 4)) << 32;
}

// Reads fields from [pos, end) of a buffer. Every read checks its bounds first; a field that does not
// fit is ERR_CORRUPT naming the field, the section and the byte offset. Sections (header, one region
// record) have their own end, so a field never spills into the next section.
class SectionReader {
 public:
  SectionReader(const uint8_t* data, size_t begin, size_t end, std::string section)
      : data_(data), pos_(begin), end_(end), section_(std::move(section)) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return end_ - pos_; }
  const std::string& section() const { return section_; }

  Status u32(uint32_t* v, const char* field) {
    CAIRN_TRY(need(4, field));
    *v = load_u32(data_ + pos_);
    pos_ += 4;
    return Status::ok();
  }
  Status u64(uint64_t* v, const char* field) {
    CAIRN_TRY(need(8, field));
    *v = load_u64(data_ + pos_);
    pos_ += 8;
    return Status::ok();
  }
  Status str(std::string* s, const char* field) {
    const size_t at = pos_;
    uint32_t n = 0;
    CAIRN_TRY(u32(&n, field));
    if (n > remaining()) {
      return make_error(Code::ERR_CORRUPT,
                        "%s: %s at byte %zu has length %u, but only %zu bytes remain before byte %zu",
                        section_.c_str(), field, at, n, remaining(), end_);
    }
    s->assign(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return Status::ok();
  }
  // A u64 array: count then items. The count is checked against the bytes left before allocating.
  Status u64_array(std::vector<uint64_t>* v, const char* field) {
    const size_t at = pos_;
    uint32_t n = 0;
    CAIRN_TRY(u32(&n, field));
    if (n > remaining() / 8) {
      return make_error(Code::ERR_CORRUPT,
                        "%s: %s count %u at byte %zu needs %llu bytes, only %zu remain before byte %zu",
                        section_.c_str(), field, n, at, static_cast<ull>(n) * 8, remaining(), end_);
    }
    read_u64s(v, n);
    return Status::ok();
  }
  // n u64 items; the caller has checked that they fit.
  void read_u64s(std::vector<uint64_t>* v, size_t n) {
    v->resize(n);
    for (size_t i = 0; i < n; ++i) (*v)[i] = load_u64(data_ + pos_ + 8 * i);
    pos_ += 8 * n;
  }

 private:
  Status need(size_t n, const char* field) const {
    if (n <= remaining()) return Status::ok();
    return make_error(Code::ERR_CORRUPT,
                      "%s: %s at byte %zu needs %zu bytes, only %zu remain before byte %zu",
                      section_.c_str(), field, pos_, n, remaining(), end_);
  }

  const uint8_t* data_;
  size_t pos_;
  size_t end_;
  std::string section_;
};

std::string printable(const uint8_t* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\') {
      s.push_back(static_cast<char>(p[i]));
    } else {
      char buf[8];
      snprintf(buf, sizeof buf, "\\x%02x", p[i]);
      s += buf;
    }
  }
  return s;
}

// Names are byte strings; messages show them escaped, and cut, so one long name cannot hide the rest.
std::string printable(const std::string& name) {
  constexpr size_t kMaxShown = 200;
  std::string s = printable(reinterpret_cast<const uint8_t*>(name.data()),
                            std::min(name.size(), kMaxShown));
  return name.size() > kMaxShown ? s + "..." : s;
}

uint64_t chunk_count_for(uint64_t total_size, uint32_t chunk_size) {
  return total_size / chunk_size + (total_size % chunk_size != 0);
}

// Consistency of regions with each other and with the stream; rec_at[i] is region i's byte offset.
Status check_regions(const Manifest& m, const std::vector<size_t>& rec_at) {
  const auto& r = m.regions;
  for (size_t i = 0; i < r.size(); ++i) {
    uint64_t product = 0;
    if (__builtin_mul_overflow(r[i].count, static_cast<uint64_t>(r[i].elem_size), &product) ||
        product != r[i].size) {
      return make_error(Code::ERR_CORRUPT,
                        "region %zu '%s' (record at byte %zu): size %llu is not count %llu x "
                        "elem_size %u",
                        i, printable(r[i].name).c_str(), rec_at[i], static_cast<ull>(r[i].size),
                        static_cast<ull>(r[i].count), r[i].elem_size);
    }
    if (r[i].size > m.total_size || r[i].offset > m.total_size - r[i].size) {
      return make_error(Code::ERR_CORRUPT,
                        "region %zu '%s' (record at byte %zu): offset %llu + size %llu extends past "
                        "total_size %llu",
                        i, printable(r[i].name).c_str(), rec_at[i], static_cast<ull>(r[i].offset),
                        static_cast<ull>(r[i].size), static_cast<ull>(m.total_size));
    }
  }

  std::vector<size_t> order(r.size());
  std::iota(order.begin(), order.end(), size_t{0});

  // Names are unique per kind: restart looks regions up by name.
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(r[a].kind, r[a].name, a) < std::tie(r[b].kind, r[b].name, b);
  });
  for (size_t k = 1; k < order.size(); ++k) {
    size_t a = order[k - 1], b = order[k];
    if (r[a].kind == r[b].kind && r[a].name == r[b].name) {
      return make_error(Code::ERR_CORRUPT,
                        "region %zu (record at byte %zu) repeats the name '%s' of region %zu",
                        std::max(a, b), rec_at[std::max(a, b)], printable(r[a].name).c_str(),
                        std::min(a, b));
    }
  }

  // No two non-empty regions share a byte of the stream.
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return std::tie(r[a].offset, a) < std::tie(r[b].offset, b); });
  const RegionEntry* prev = nullptr;
  size_t prev_index = 0;
  for (size_t i : order) {
    if (r[i].size == 0) continue;
    if (prev != nullptr && r[i].offset < prev->offset + prev->size) {
      return make_error(Code::ERR_CORRUPT,
                        "region %zu '%s' (record at byte %zu): bytes %llu..%llu overlap region %zu "
                        "'%s' (bytes %llu..%llu)",
                        i, printable(r[i].name).c_str(), rec_at[i], static_cast<ull>(r[i].offset),
                        static_cast<ull>(r[i].offset + r[i].size - 1), prev_index,
                        printable(prev->name).c_str(), static_cast<ull>(prev->offset),
                        static_cast<ull>(prev->offset + prev->size - 1));
    }
    prev = &r[i];
    prev_index = i;
  }
  return Status::ok();
}

// Format 1. Also the model for later formats: when format 2 arrives, this function stays as it is
// (filling the then-current Manifest struct with defaults for fields format 1 lacks).
Result<Manifest> decode_v1(const uint8_t* p, size_t len) {
  if (len < kV1EncodedLengthAt + 8) {
    return make_error(Code::ERR_CORRUPT,
                      "truncated: %zu bytes, the header's length fields end at byte %zu", len,
                      kV1EncodedLengthAt + 8);
  }
  const uint32_t header_length = load_u32(p + kV1HeaderLengthAt);
  const uint64_t encoded_length = load_u64(p + kV1EncodedLengthAt);
  if (len < encoded_length) {
    return make_error(Code::ERR_CORRUPT, "truncated: %zu bytes, manifest says %llu (at byte %zu)",
                      len, static_cast<ull>(encoded_length), kV1EncodedLengthAt);
  }
  if (len > encoded_length) {
    return make_error(Code::ERR_CORRUPT,
                      "%zu bytes, manifest says %llu (at byte %zu): %llu unexpected bytes after "
                      "its end",
                      len, static_cast<ull>(encoded_length), kV1EncodedLengthAt,
                      static_cast<ull>(len - encoded_length));
  }
  if (len < kV1MinSize) {
    return make_error(Code::ERR_CORRUPT,
                      "manifest length %zu (at byte %zu) is below the format 1 minimum of %zu bytes",
                      len, kV1EncodedLengthAt, kV1MinSize);
  }
  const size_t trailer_at = len - kTrailerSize;
  const uint64_t stored = load_u64(p + trailer_at);
  const uint64_t computed = XXH3_64bits(p, trailer_at);
  if (stored != computed) {
    return make_error(Code::ERR_CORRUPT,
                      "checksum mismatch: bytes 0..%zu hash to %016llx, the checksum at byte %zu "
                      "says %016llx",
                      trailer_at - 1, static_cast<ull>(computed), trailer_at,
                      static_cast<ull>(stored));
  }
  // From here on the bytes are what a writer produced; what follows catches writer bugs and
  // deliberate forgeries, so it stays as strict and bounded as before the checksum.
  const size_t max_header = trailer_at - 4 - 8;  // room for the region count and the chunk count
  if (header_length < kV1MinHeader || header_length > max_header) {
    return make_error(Code::ERR_CORRUPT,
                      "header length %u (at byte %zu) is outside %zu..%zu for a %zu-byte manifest",
                      header_length, kV1HeaderLengthAt, kV1MinHeader, max_header, len);
  }

  Manifest m;
  SectionReader header(p, kV1EncodedLengthAt + 8, header_length, "header");
  uint64_t created = 0;
  CAIRN_TRY(header.u64(&m.version, "version"));
  CAIRN_TRY(header.u64(&m.total_size, "total_size"));
  CAIRN_TRY(header.u64(&created, "created_unix_ns"));
  m.created_unix_ns = static_cast<int64_t>(created);
  CAIRN_TRY(header.u32(&m.rank, "rank"));
  CAIRN_TRY(header.u32(&m.nranks, "nranks"));
  CAIRN_TRY(header.u32(&m.chunk_size, "chunk_size"));
  CAIRN_TRY(header.str(&m.label, "label"));
  CAIRN_TRY(header.str(&m.node, "node"));
  // Bytes left in the header are fields a newer writer of format 1 appended: skipped.

  SectionReader body(p, header_length, trailer_at, "body");
  const size_t count_at = body.pos();
  uint32_t region_count = 0;
  CAIRN_TRY(body.u32(&region_count, "region count"));
  if (region_count > (body.remaining() - 8) / kV1MinRecord) {
    return make_error(Code::ERR_CORRUPT,
                      "region count %u at byte %zu cannot fit in the %zu bytes that follow",
                      region_count, count_at, body.remaining());
  }
  m.regions.resize(region_count);
  std::vector<size_t> rec_at(region_count);
  for (uint32_t i = 0; i < region_count; ++i) {
    rec_at[i] = body.pos();
    uint32_t record_length = 0;
    CAIRN_TRY(body.u32(&record_length, "region record length"));
    if (record_length < kV1MinRegionBody || record_length > body.remaining()) {
      return make_error(Code::ERR_CORRUPT,
                        "region %u: record length %u at byte %zu is outside %zu..%zu", i,
                        record_length, rec_at[i], kV1MinRegionBody, body.remaining());
    }
    char section[64];
    snprintf(section, sizeof section, "region %u (record at byte %zu)", i, rec_at[i]);
    SectionReader rec(p, body.pos(), body.pos() + record_length, section);
    RegionEntry& r = m.regions[i];
    uint32_t kind = 0;
    const size_t kind_at = rec.pos();
    CAIRN_TRY(rec.u32(&kind, "kind"));
    if (kind > static_cast<uint32_t>(RegionKind::file)) {
      return make_error(Code::ERR_CORRUPT, "%s: kind %u at byte %zu is neither 0 (memory) nor 1 (file)",
                        section, kind, kind_at);
    }
    r.kind = static_cast<RegionKind>(kind);
    CAIRN_TRY(rec.u32(&r.type, "type"));
    CAIRN_TRY(rec.u32(&r.elem_size, "elem_size"));
    CAIRN_TRY(rec.u32(&r.distribution, "distribution"));
    CAIRN_TRY(rec.u64(&r.count, "count"));
    CAIRN_TRY(rec.u64(&r.offset, "offset"));
    CAIRN_TRY(rec.u64(&r.size, "size"));
    CAIRN_TRY(rec.str(&r.name, "name"));
    CAIRN_TRY(rec.u64_array(&r.dist_params, "dist_params"));
    // Bytes left in the record are fields a newer writer of format 1 appended: skipped.
    body = SectionReader(p, body.pos() + record_length, trailer_at, "body");
  }

  const size_t chunks_at = body.pos();
  uint64_t chunk_count = 0;
  CAIRN_TRY(body.u64(&chunk_count, "chunk count"));
  if (m.chunk_size == 0 && m.total_size > 0) {
    return make_error(Code::ERR_CORRUPT, "chunk_size 0 (at byte %zu) with total_size %llu",
                      kV1ChunkSizeAt, static_cast<ull>(m.total_size));
  }
  const uint64_t expected = m.chunk_size == 0 ? 0 : chunk_count_for(m.total_size, m.chunk_size);
  if (chunk_count != expected) {
    return make_error(Code::ERR_CORRUPT,
                      "chunk count %llu at byte %zu, but total_size %llu in chunks of %u needs %llu",
                      static_cast<ull>(chunk_count), chunks_at, static_cast<ull>(m.total_size),
                      m.chunk_size, static_cast<ull>(expected));
  }
  if (chunk_count > body.remaining() / 8) {
    return make_error(Code::ERR_CORRUPT,
                      "chunk count %llu at byte %zu needs %llu bytes, only %zu remain",
                      static_cast<ull>(chunk_count), chunks_at,
                      static_cast<ull>(chunk_count) * 8, body.remaining());
  }
  body.read_u64s(&m.chunk_hashes, chunk_count);
  // Bytes between the chunk table and the checksum are sections a newer writer of format 1
  // appended: skipped.

  CAIRN_TRY(check_regions(m, rec_at));
  return m;
}

}  // namespace

std::string encode_manifest(const Manifest& m) {
  ByteWriter w;
  size_t estimate = kV1MinSize + m.label.size() + m.node.size() + 8 * m.chunk_hashes.size();
  for (const RegionEntry& r : m.regions) estimate += kV1MinRecord + r.name.size() + 8 * r.dist_params.size();
  w.out().reserve(estimate);

  w.bytes(kMagic, kMagicSize);
  w.u32(kManifestFormat);
  w.u32(0);  // header length, patched below
  w.u64(0);  // encoded length, patched below
  w.u64(m.version);
  w.u64(m.total_size);
  w.u64(static_cast<uint64_t>(m.created_unix_ns));
  w.u32(m.rank);
  w.u32(m.nranks);
  w.u32(m.chunk_size);
  w.str(m.label);
  w.str(m.node);
  w.patch_u32(kV1HeaderLengthAt, static_cast<uint32_t>(w.size()));

  w.u32(static_cast<uint32_t>(m.regions.size()));
  for (const RegionEntry& r : m.regions) {
    const size_t record_at = w.size();
    w.u32(0);  // record length, patched below
    w.u32(static_cast<uint32_t>(r.kind));
    w.u32(r.type);
    w.u32(r.elem_size);
    w.u32(r.distribution);
    w.u64(r.count);
    w.u64(r.offset);
    w.u64(r.size);
    w.str(r.name);
    w.u32(static_cast<uint32_t>(r.dist_params.size()));
    for (uint64_t v : r.dist_params) w.u64(v);
    w.patch_u32(record_at, static_cast<uint32_t>(w.size() - record_at - 4));
  }

  w.u64(m.chunk_hashes.size());
  for (uint64_t h : m.chunk_hashes) w.u64(h);

  w.patch_u64(kV1EncodedLengthAt, w.size() + kTrailerSize);
  w.u64(XXH3_64bits(w.out().data(), w.size()));
  return std::move(w.out());
}

Result<Manifest> decode_manifest(const void* data, size_t len) {
  if (data == nullptr && len > 0) {
    return make_error(Code::ERR_INVALID_ARG, "decode_manifest: null data with length %zu", len);
  }
  const auto* p = static_cast<const uint8_t*>(data);
  const size_t magic_have = std::min(len, kMagicSize);
  if (len == 0 || std::memcmp(p, kMagic, magic_have) != 0) {
    if (len == 0) {
      return make_error(Code::ERR_CORRUPT, "truncated: 0 bytes, a manifest starts with \"CAIRNMAN\"");
    }
    return make_error(Code::ERR_FORMAT,
                      "not a cairn manifest: bytes 0..%zu are \"%s\", expected \"CAIRNMAN\"",
                      magic_have - 1, printable(p, magic_have).c_str());
  }
  if (len < kMagicSize + 4) {
    return make_error(Code::ERR_CORRUPT,
                      "truncated: %zu bytes, the format version field ends at byte %zu", len,
                      kMagicSize + 4);
  }

  // The format version decides how everything after it is read. A reader knows every format up to
  // its own kManifestFormat and keeps a decoder for each; formats only grow.
  const uint32_t format = load_u32(p + kMagicSize);
  if (format > kManifestFormat) {
    return make_error(Code::ERR_FORMAT,
                      "written by a newer cairn (format %u, this reader knows up to %u)", format,
                      kManifestFormat);
  }
  switch (format) {
    case 1:
      return decode_v1(p, len);
  }
  return make_error(Code::ERR_FORMAT, "format version %u at byte %zu is not a manifest format",
                    format, kMagicSize);
}

std::vector<uint64_t> chunk_hashes(const void* data, uint64_t len, uint32_t chunk_size) {
  std::vector<uint64_t> out;
  if (chunk_size == 0 || len == 0) return out;
  const auto* p = static_cast<const uint8_t*>(data);
  out.resize(chunk_count_for(len, chunk_size));
  const uint64_t whole = len / chunk_size;  // side by side (xxh3_hash); a short last chunk alone
  xxh3_hash(p, chunk_size, static_cast<size_t>(whole), out.data());
  if (whole < out.size()) out.back() = XXH3_64bits(p + whole * chunk_size, static_cast<size_t>(len - whole * chunk_size));
  return out;
}

Result<uint64_t> check_chunk_table(const Manifest& m) {
  const uint64_t len = m.total_size;
  if (m.chunk_size == 0 && len > 0) {
    return make_error(Code::ERR_CORRUPT, "manifest has chunk_size 0 for a %llu-byte stream",
                      static_cast<ull>(len));
  }
  const uint64_t expected = m.chunk_size == 0 ? 0 : chunk_count_for(len, m.chunk_size);
  if (m.chunk_hashes.size() != expected) {
    return make_error(Code::ERR_CORRUPT,
                      "manifest has %zu chunk checksums, a %llu-byte stream in chunks of %u needs %llu",
                      m.chunk_hashes.size(), static_cast<ull>(len), m.chunk_size,
                      static_cast<ull>(expected));
  }
  return expected;
}

std::string regions_in(const std::vector<RegionEntry>& regions, uint64_t begin, uint64_t end) {
  constexpr int kMaxNamed = 3;
  std::string s;
  int named = 0, more = 0;
  for (const RegionEntry& r : regions) {
    if (r.size == 0 || r.offset >= end || r.offset + r.size <= begin) continue;
    if (named == kMaxNamed) {
      ++more;
      continue;
    }
    if (named++ > 0) s += ", ";
    s += (r.kind == RegionKind::file ? "file '" : "region '") + printable(r.name) + "'";
  }
  if (named == 0) return "no region";
  if (more > 0) s += " and " + std::to_string(more) + " more";
  return s;
}

Status verify_stream(const Manifest& m, const void* data, uint64_t len) {
  if (data == nullptr && len > 0) {
    return make_error(Code::ERR_INVALID_ARG, "verify_stream: null data with length %llu",
                      static_cast<ull>(len));
  }
  if (len != m.total_size) {
    return make_error(Code::ERR_CORRUPT, "%s: %llu bytes, manifest says %llu",
                      len < m.total_size ? "truncated" : "too long", static_cast<ull>(len),
                      static_cast<ull>(m.total_size));
  }
  CAIRN_TRY(check_chunk_table(m).status());
  if (len == 0) return Status::ok();
  const ChunkCheck check(m);
  return check.whole(0, static_cast<const uint8_t*>(data), len);
}

}  // namespace cairn
