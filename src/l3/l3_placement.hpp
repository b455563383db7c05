// Where a rank's L3 data goes (Pliris-C/R's N-to-M files): a file of its own, or one of
// files_per_node files shared by the ranks of a node, on one of several prefixes (file systems)
// chosen by weight; node-local turnstiles let only turnstile_width ranks of a node write at a time;
// optional zstd compression per chunk. What was done is recorded per rank in rank-<r>.where beside
// the manifest, so the reader handles every layout (docs/format.md, "L3").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.hpp"

namespace cairn::l3 {

struct WeightedPrefix {
  std::string path;  // absolute
  double weight = 1;
};

// How this rank writes. Default-constructed: a file per rank in the version directory, no turnstile,
// no compression (the layout of format 1, which needs no .where record).
struct WriteOptions {
  int files_per_node = 0;                 // 0: one file per rank
  int turnstile_width = 0;                // 0: no limit
  std::vector<WeightedPrefix> data_prefixes;  // empty: the main prefix only
  int zstd_level = 0;                     // 0: stored as is
  std::string node;                       // this rank's failure group
  int local_index = 0;                    // this rank's index among the ranks of its node
  std::string node_dir;                   // node-local directory for turnstiles and offset counters
  uint64_t clean_below = 0;               // versions below this are finished everywhere (counters may go)
  int full_every = 0;                     // > 1: incremental versions between full ones (l3_chunks.hpp)
  bool legacy() const { return files_per_node == 0 && data_prefixes.empty() && zstd_level == 0; }
};

// Parse "PATH[:WEIGHT],PATH[:WEIGHT]..." (weights > 0, default 1).
Result<std::vector<WeightedPrefix>> parse_prefixes(const std::string& text);
// Parse "none" | "zstd" | "zstd:LEVEL" (1..19) into a level (0 = none).
Result<int> parse_compress(const std::string& text);

// The record of where one rank's stream lies.
struct Where {
  std::string file;        // absolute path of the data file
  uint64_t offset = 0;     // where the rank's bytes start in it
  uint64_t stored = 0;     // bytes on disk
  bool zstd = false;
  std::vector<uint64_t> chunk_stored;  // zstd: compressed size of each chunk, in order
};
std::string encode_where(const Where& w);
Result<Where> decode_where(const std::string& text);

// The data file for this rank of version dir `vdir` (basename `vname`), and the prefix it lives on.
std::string choose_data_file(const WriteOptions& o, const std::string& main_prefix, const std::string& vname,
                             uint32_t rank);

// Node-local reservation of [offset, offset + len) in a shared data file: an flock-protected counter
// in o.node_dir. Counters of versions below o.clean_below are removed.
Result<uint64_t> reserve_extent(const WriteOptions& o, uint64_t version, const std::string& file, uint64_t len);

// Hold one of the node's turnstile_width write permits while alive (flock in o.node_dir).
class Turnstile {
 public:
  Turnstile() = default;
  Turnstile(const Turnstile&) = delete;
  Turnstile& operator=(const Turnstile&) = delete;
  ~Turnstile() { leave(); }
  Status enter(const WriteOptions& o);
  void leave();  // give the permit back (also when destroyed)

 private:
  int fd_ = -1;
};

// zstd per chunk: compress each chunk_size piece of [data, data+len) into `out`, recording sizes.
Status compress_chunks(const uint8_t* data, uint64_t len, uint32_t chunk_size, int level, std::string* out,
                       std::vector<uint64_t>* sizes);
// Inverse: `stored` holds the compressed chunks; fills dst (len bytes).
Status decompress_chunks(const uint8_t* stored, uint64_t stored_len, const std::vector<uint64_t>& sizes,
                         uint32_t chunk_size, uint8_t* dst, uint64_t len);

}  // namespace cairn::l3
