#include "redundancy/cache_rebuild.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

#include "base/fsutil.hpp"
#include "redundancy/set_code.hpp"
#include "redundancy/set_record.hpp"

namespace cairn::redundancy {
namespace {

using ull = unsigned long long;

struct Rebuilt {
  Manifest manifest;
  MappedFile data;
};

// The set record of `version` that names `rank`, from the first surviving member that holds one.
std::optional<SetRecord> find_set(uint64_t version, uint32_t rank, const std::vector<CachedCopy>& held) {
  for (const auto& h : held) {
    CacheStore store;
    if (!store.open(h.rank_dir, kMaxL1Slots).is_ok()) continue;
    auto bytes = store.read_set(version);
    if (!bytes) continue;
    auto rec = decode_set_record(*bytes);
    if (rec && std::find(rec->ranks.begin(), rec->ranks.end(), rank) != rec->ranks.end()) return std::move(rec).value();
  }
  return std::nullopt;
}

// Rebuilds the lost members of one set into `out` (rank -> stream).
Status rebuild_set(uint64_t version, const SetRecord& set, const std::map<uint32_t, const CachedCopy*>& by_rank,
                   std::map<uint32_t, Rebuilt>* out) {
  const size_t n = set.ranks.size();
  const std::string what = "version " + std::to_string(version) + ", set of ranks";
  std::string members;
  for (uint32_t r : set.ranks) members += " " + std::to_string(r);
  std::vector<Manifest> manifests(n);
  std::vector<size_t> lens(n);
  std::vector<bool> lost(n);
  for (size_t i = 0; i < n; ++i) {
    auto m = decode_manifest(set.manifests[i].data(), set.manifests[i].size());
    if (!m) return m.status().prefixed(what + members + ": the manifest of rank " + std::to_string(set.ranks[i]));
    manifests[i] = std::move(m).value();
    lens[i] = manifests[i].total_size;
    lost[i] = !by_rank.count(set.ranks[i]);
  }
  auto code = SetCode::make(set.scheme, static_cast<int>(n), static_cast<int>(set.m));
  if (!code) return code.status().prefixed(what + members);
  if (!code->recoverable(lost))
    return make_error(Code::ERR_UNRECOVERABLE, "%s%s: too many members lost for %s", what.c_str(), members.c_str(),
                      redundancy_name(set.scheme));
  const size_t max_len = *std::max_element(lens.begin(), lens.end());
  const size_t red_len = std::max<size_t>(code->redundancy_len(max_len), 1);

  std::vector<std::shared_ptr<VersionView>> views;  // survivors' streams, kept mapped until decoded
  std::vector<MappedFile> buffers;                  // redundancy data, and the lost members' streams
  buffers.reserve(2 * n);
  std::vector<uint8_t*> data(n), red(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t rank = set.ranks[i];
    const std::string who = what + members + ": rank " + std::to_string(rank);
    if (lost[i]) {
      CAIRN_ASSIGN_OR_RETURN(d, MappedFile::anonymous(std::max<uint64_t>(lens[i], 1)));
      buffers.push_back(std::move(d));
      data[i] = buffers.back().data();
      CAIRN_ASSIGN_OR_RETURN(r, MappedFile::anonymous(red_len));
      buffers.push_back(std::move(r));
      red[i] = buffers.back().data();
      continue;
    }
    const CachedCopy& c = *by_rank.at(rank);
    if (!(c.record.manifest == manifests[i]))
      return make_error(Code::ERR_UNRECOVERABLE, "%s: its L1 copy is not the one the set record protects", who.c_str());
    CacheStore store;
    CAIRN_TRY(store.open(c.rank_dir, kMaxL1Slots).prefixed(who));
    if (!store.is_protected(version))
      return make_error(Code::ERR_UNRECOVERABLE, "%s never finished its redundancy (no %s)", who.c_str(),
                        store.protected_path(version).c_str());
    auto view = map_verified_slot(c.rank_dir, c.record);
    if (!view) return view.status().prefixed(who);
    views.push_back(*view);
    // decode_all reads the survivors' streams only; the mapping is read-only and stays so.
    data[i] = const_cast<uint8_t*>(views.back()->data());
    const std::string red_path = store.red_path(static_cast<int>(c.record.slot));
    CAIRN_ASSIGN_OR_RETURN(r, MappedFile::open_ro(red_path));
    if (r.size() < red_len)
      return make_error(Code::ERR_CORRUPT, "%s: %s holds %llu bytes of redundancy data, the set needs %llu", who.c_str(),
                        red_path.c_str(), static_cast<ull>(r.size()), static_cast<ull>(red_len));
    buffers.push_back(std::move(r));
    red[i] = buffers.back().data();
  }
  CAIRN_TRY(code->decode_all(lost, data, lens, max_len, red).prefixed(what + members));
  for (size_t i = 0; i < n; ++i) {
    if (!lost[i]) continue;
    const std::string who = "rank " + std::to_string(set.ranks[i]) + " rebuilt from L2 (" + what + members + ")";
    CAIRN_TRY(verify_stream(manifests[i], data[i], lens[i]).prefixed(who));
    // Move the lost member's stream out of `buffers`: find it by address.
    auto it = std::find_if(buffers.begin(), buffers.end(), [&](MappedFile& b) { return b.data() == data[i]; });
    (*out)[set.ranks[i]] = Rebuilt{manifests[i], std::move(*it)};
  }
  return Status::ok();
}

// One rebuilt rank as an L1 copy in `dir`: the whole stream in slot 0, the file API's files (if any)
// beside it in v<N>.files/, then the record.
Status write_copy(uint64_t version, const std::string& dir, const Rebuilt& r) {
  CAIRN_TRY(fs::remove_tree(dir));
  CacheStore store;
  CAIRN_TRY(store.open(dir, 1));
  const Manifest& m = r.manifest;
  CAIRN_ASSIGN_OR_RETURN(slot, store.slot(0, std::max<uint64_t>(m.total_size, 1)));
  if (m.total_size) std::memcpy(slot->data(), r.data.data(), m.total_size);
  if (has_files(m)) {
    CAIRN_TRY(fs::make_dirs(store.files_dir(version)));
    for (const auto& e : m.regions)
      if (e.kind == RegionKind::file)
        CAIRN_TRY(fs::write_file_atomic(store.files_dir(version) + "/" + e.name,
                                        std::string(reinterpret_cast<const char*>(r.data.data()) + e.offset, e.size),
                                        /*sync=*/false));
  }
  return store.write_record(version, L1Record{0, m});
}

}  // namespace

Result<std::vector<CachedCopy>> rebuild_lost_ranks(uint64_t version, const std::vector<CachedCopy>& held,
                                                   const std::vector<uint32_t>& lost, const std::string& out_dir) {
  std::map<uint32_t, const CachedCopy*> by_rank;
  for (const auto& h : held) by_rank[h.rank] = &h;
  std::map<uint32_t, Rebuilt> rebuilt;
  for (uint32_t rank : lost) {
    if (rebuilt.count(rank)) continue;  // rebuilt with an earlier member of its set
    if (by_rank.count(rank))
      return make_error(Code::ERR_INVALID_ARG, "version %llu: rank %u is given as held and as lost",
                        static_cast<ull>(version), rank);
    auto set = find_set(version, rank, held);
    if (!set)
      return make_error(Code::ERR_UNRECOVERABLE,
                        "version %llu: rank %u is in no set record that survives (L2 off, or every member of its set lost)",
                        static_cast<ull>(version), rank);
    CAIRN_TRY(rebuild_set(version, *set, by_rank, &rebuilt));
  }
  std::vector<CachedCopy> out;
  for (uint32_t rank : lost) {
    CachedCopy c;
    c.rank = rank;
    c.rank_dir = out_dir + "/" + rank_dir_name(rank);
    const Rebuilt& r = rebuilt.at(rank);
    CAIRN_TRY(write_copy(version, c.rank_dir, r).prefixed("writing the rebuilt rank " + std::to_string(rank)));
    c.record = L1Record{0, r.manifest};
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace cairn::redundancy
