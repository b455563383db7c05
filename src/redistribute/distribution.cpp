#include "redistribute/distribution.hpp"

#include <algorithm>
#include <cinttypes>

namespace cairn::redistribute {

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::private_: return "private";
    case Kind::replicated: return "replicated";
    case Kind::block: return "block";
    case Kind::block_cyclic: return "block_cyclic";
    case Kind::block_rows: return "block_rows";
    case Kind::block_cols: return "block_cols";
  }
  return "unknown";
}

Result<Distribution> make(Kind kind, uint64_t global_count, uint64_t block_size, uint64_t rows,
                          uint64_t cols) {
  Distribution d;
  d.kind = kind;
  switch (kind) {
    case Kind::private_:
      return d;
    case Kind::replicated:
    case Kind::block:
      d.global_count = global_count;
      return d;
    case Kind::block_cyclic:
      if (block_size == 0)
        return make_error(Code::ERR_INVALID_ARG,
                          "block_cyclic distribution: block_size must be at least 1 element");
      d.global_count = global_count;
      d.block_size = block_size;
      return d;
    case Kind::block_rows:
    case Kind::block_cols: {
      uint64_t n = 0;
      if (__builtin_mul_overflow(rows, cols, &n))
        return make_error(Code::ERR_INVALID_ARG,
                          "%s distribution: rows x cols = %" PRIu64 " x %" PRIu64
                          " overflows 64 bits",
                          kind_name(kind), rows, cols);
      d.rows = rows;
      d.cols = cols;
      d.global_count = n;
      return d;
    }
  }
  return make_error(Code::ERR_INVALID_ARG,
                    "unknown distribution kind %u (known: 0 private, 1 replicated, 2 block, "
                    "3 block_cyclic, 4 block_rows, 5 block_cols)",
                    static_cast<unsigned>(kind));
}

Status validate(const Distribution& d) {
  auto built = make(d.kind, d.global_count, d.block_size, d.rows, d.cols);
  if (!built) return built.status();
  if (!(*built == d))
    return make_error(Code::ERR_INVALID_ARG,
                      "%s distribution: inconsistent fields (global_count %" PRIu64
                      ", block_size %" PRIu64 ", rows %" PRIu64 ", cols %" PRIu64 ")",
                      kind_name(d.kind), d.global_count, d.block_size, d.rows, d.cols);
  return Status::ok();
}

std::vector<uint64_t> Distribution::to_params() const {
  switch (kind) {
    case Kind::block: return {global_count};
    case Kind::block_cyclic: return {global_count, block_size};
    case Kind::block_rows:
    case Kind::block_cols: return {rows, cols};
    case Kind::private_:
    case Kind::replicated: return {};
  }
  return {};
}

Result<Distribution> Distribution::from_params(uint32_t kind, const std::vector<uint64_t>& params,
                                               uint64_t region_count) {
  if (kind > static_cast<uint32_t>(Kind::block_cols))
    return make_error(Code::ERR_FORMAT,
                      "distribution kind %u is unknown to this reader (written by a newer cairn?)",
                      kind);
  const Kind k = static_cast<Kind>(kind);
  size_t expected = 0;
  switch (k) {
    case Kind::private_:
    case Kind::replicated: expected = 0; break;
    case Kind::block: expected = 1; break;
    case Kind::block_cyclic:
    case Kind::block_rows:
    case Kind::block_cols: expected = 2; break;
  }
  if (params.size() != expected)
    return make_error(Code::ERR_INVALID_ARG, "%s distribution: %zu parameters, expected %zu",
                      kind_name(k), params.size(), expected);
  switch (k) {
    case Kind::private_: return make_private();
    case Kind::replicated: return make_replicated(region_count);
    case Kind::block: return make_block(params[0]);
    case Kind::block_cyclic: return make_block_cyclic(params[0], params[1]);
    case Kind::block_rows: return make_block_rows(params[0], params[1]);
    case Kind::block_cols: return make_block_cols(params[0], params[1]);
  }
  return make_error(Code::ERR_INTERNAL, "unreachable");
}

std::string describe(const Distribution& d) {
  char buf[160];
  switch (d.kind) {
    case Kind::private_: return "private";
    case Kind::replicated:
      snprintf(buf, sizeof buf, "replicated(%" PRIu64 ")", d.global_count);
      return buf;
    case Kind::block:
      snprintf(buf, sizeof buf, "block(G=%" PRIu64 ")", d.global_count);
      return buf;
    case Kind::block_cyclic:
      snprintf(buf, sizeof buf, "block_cyclic(G=%" PRIu64 ", b=%" PRIu64 ")", d.global_count,
               d.block_size);
      return buf;
    case Kind::block_rows:
    case Kind::block_cols:
      snprintf(buf, sizeof buf, "%s(%" PRIu64 "x%" PRIu64 ")", kind_name(d.kind), d.rows, d.cols);
      return buf;
  }
  snprintf(buf, sizeof buf, "unknown(%u)", static_cast<unsigned>(d.kind));
  return buf;
}

uint64_t global_elements(const Distribution& d) {
  return d.kind == Kind::private_ ? 0 : d.global_count;
}

Piece block_piece(uint64_t n, int nranks, int rank) {
  const uint64_t p = static_cast<uint64_t>(nranks), r = static_cast<uint64_t>(rank);
  const uint64_t q = n / p, rem = n % p;
  return {r * q + std::min(r, rem), q + (r < rem ? 1 : 0)};
}

int block_owner(uint64_t n, int nranks, uint64_t index) {
  const uint64_t p = static_cast<uint64_t>(nranks);
  const uint64_t q = n / p, rem = n % p;
  const uint64_t big = rem * (q + 1);  // items held by the ranks with one more
  if (index < big) return static_cast<int>(index / (q + 1));
  return static_cast<int>(rem + (index - big) / q);  // q > 0 here, since index < n
}

uint64_t cyclic_block_count(uint64_t global_count, uint64_t block_size) {
  return global_count == 0 ? 0 : (global_count - 1) / block_size + 1;
}

uint64_t cyclic_blocks_of(uint64_t nblocks, int nranks, int rank) {
  const uint64_t r = static_cast<uint64_t>(rank);
  return r < nblocks ? (nblocks - 1 - r) / static_cast<uint64_t>(nranks) + 1 : 0;
}

uint64_t local_count(const Distribution& d, int nranks, int rank) {
  switch (d.kind) {
    case Kind::private_: return 0;
    case Kind::replicated: return d.global_count;
    case Kind::block: return block_piece(d.global_count, nranks, rank).count;
    case Kind::block_cyclic: {
      const uint64_t nb = cyclic_blocks_of(cyclic_block_count(d.global_count, d.block_size), nranks, rank);
      if (nb == 0) return 0;
      // All blocks but the global last are full; only this rank's last block may be that one.
      const uint64_t last = static_cast<uint64_t>(rank) + (nb - 1) * static_cast<uint64_t>(nranks);
      return (nb - 1) * d.block_size + std::min(d.block_size, d.global_count - last * d.block_size);
    }
    case Kind::block_rows: return block_piece(d.rows, nranks, rank).count * d.cols;
    case Kind::block_cols: return d.rows * block_piece(d.cols, nranks, rank).count;
  }
  return 0;
}

Status check_local_count(const Distribution& d, int nranks, int rank, uint64_t count) {
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return make_error(Code::ERR_INVALID_ARG, "rank %d of %d ranks is out of range", rank, nranks);
  if (d.kind == Kind::private_) return Status::ok();
  const uint64_t want = local_count(d, nranks, rank);
  if (count != want)
    return make_error(Code::ERR_SIZE_MISMATCH,
                      "rank %d of %d holds %" PRIu64 " elements, but %s gives it %" PRIu64, rank,
                      nranks, count, describe(d).c_str(), want);
  return Status::ok();
}

}  // namespace cairn::redistribute
