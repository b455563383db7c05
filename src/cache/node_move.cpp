#include "cache/node_move.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

namespace cairn {
namespace {

constexpr uint64_t kMaxMoveFileSize = 1ull << 50;  // a sanity bound on what a plan from the wire may ask for

uint64_t file_size_of(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

bool plain_file_name(const std::string& n) {
  return !n.empty() && n.size() <= 255 && n != "." && n != ".." && n.find('/') == std::string::npos &&
         n.find('\0') == std::string::npos;
}

bool is_file_region(const Manifest& m, const std::string& name) {
  for (const auto& e : m.regions)
    if (e.kind == RegionKind::file && e.name == name) return true;
  return false;
}

std::string files_prefix(uint64_t version) { return version_file_name(version, VersionFile::files) + "/"; }

}  // namespace

uint64_t MovePlan::stream_bytes() const {
  uint64_t n = 0;
  for (const auto& f : files) n += f.length;
  return n;
}

std::string move_path(const Layout& layout, const std::string& node, uint32_t rank, const std::string& name) {
  return rank_dir(layout, node, rank) + "/" + name;
}

Result<MovePlan> plan_node_move(const Layout& layout, const std::string& node) {
  const std::string node_dir = layout.node_cache(node);
  auto names = fs::list_dir(node_dir);
  if (!names)
    return make_error(Code::ERR_NO_CHECKPOINT, "%s has no cache to migrate (%s): %s", node.c_str(), node_dir.c_str(),
                      names.status().message().c_str());
  std::vector<uint32_t> ranks;
  for (const auto& n : *names) {
    uint32_t r = 0;
    if (parse_rank_dir_name(n, &r)) ranks.push_back(r);
  }
  std::sort(ranks.begin(), ranks.end());
  if (ranks.empty())
    return make_error(Code::ERR_NO_CHECKPOINT, "%s has no cache to migrate (no rank directory in %s)", node.c_str(),
                      node_dir.c_str());

  // The newest version every rank directory holds at L1.
  std::optional<std::set<uint64_t>> common;
  for (uint32_t r : ranks) {
    auto vs = recorded_versions(rank_dir(layout, node, r));
    std::set<uint64_t> mine(vs.begin(), vs.end()), both;
    for (uint64_t v : common ? *common : mine)
      if (mine.count(v)) both.insert(v);
    common = std::move(both);
  }
  if (!common || common->empty())
    return make_error(Code::ERR_NO_CHECKPOINT, "no version is complete at L1 on every rank of %s (%s)", node.c_str(),
                      node_dir.c_str());
  MovePlan plan;
  plan.version = *common->rbegin();
  const uint64_t v = plan.version;

  std::vector<MoveSmall> records;
  uint32_t chunk = 0;
  for (uint32_t r : ranks) {
    CacheStore store;
    CAIRN_TRY(store.open(rank_dir(layout, node, r), kMaxL1Slots));  // any slot a record names (cache_versions <= 64)
    auto rec = store.read_record(v);
    if (!rec)
      return make_error(rec.status().code(), "rank %u of %s, version %llu: %s", r, node.c_str(),
                        static_cast<unsigned long long>(v), rec.status().message().c_str());
    const Manifest& m = rec->manifest;
    if (m.chunk_size == 0) return make_error(Code::ERR_CORRUPT, "rank %u of %s: a manifest with chunk size 0", r, node.c_str());
    if (chunk != 0 && chunk != m.chunk_size)
      return make_error(Code::ERR_CORRUPT, "the ranks of %s disagree on chunk_size (%u and %u)", node.c_str(), chunk,
                        m.chunk_size);
    chunk = m.chunk_size;
    const int slot = static_cast<int>(rec->slot);
    const std::string slot_name = slot_file_name(rec->slot, SlotFile::data);
    const uint64_t slot_size = file_size_of(store.slot_path(slot));
    if (has_files(m)) {
      // A version of the file API: the slot holds the memory regions, v<N>.files/ the routed files, at
      // other offsets of the stream than in their files. Both are streamed as they are; the writer
      // verifies the version whole at the destination before its record is written.
      plan.files.push_back({r, slot_name, slot_size, slot_size, false});
      for (const auto& e : m.regions)
        if (e.kind == RegionKind::file) {
          const uint64_t n = file_size_of(store.files_dir(v) + "/" + e.name);
          plan.files.push_back({r, files_prefix(v) + e.name, n, n, false});
        }
    } else {
      if (slot_size < m.total_size)
        return make_error(Code::ERR_CORRUPT, "rank %u of %s: %s holds %llu bytes, version %llu needs %llu; not migrated",
                          r, node.c_str(), store.slot_path(slot).c_str(), static_cast<unsigned long long>(slot_size),
                          static_cast<unsigned long long>(v), static_cast<unsigned long long>(m.total_size));
      plan.files.push_back({r, slot_name, m.total_size, slot_size, true});
    }
    if (fs::exists(store.red_path(slot))) {
      const uint64_t n = file_size_of(store.red_path(slot));
      plan.files.push_back({r, slot_file_name(rec->slot, SlotFile::red), n, n, false});
    }
    for (VersionFile kind : {VersionFile::set, VersionFile::protected_marker}) {
      const std::string name = version_file_name(v, kind);
      if (!fs::exists(move_path(layout, node, r, name))) continue;
      CAIRN_ASSIGN_OR_RETURN(bytes, fs::read_file(move_path(layout, node, r, name)));
      plan.smalls.push_back({r, name, std::move(bytes)});
    }
    records.push_back({r, version_file_name(v, VersionFile::record), encode_l1_record(*rec)});
  }
  for (auto& rec : records) plan.smalls.push_back(std::move(rec));
  return plan;
}

Status check_move_plan(const MovePlan& plan, std::vector<std::pair<uint32_t, L1Record>>* records) {
  auto bad = [](const char* fmt, auto... args) { return make_error(Code::ERR_FORMAT, fmt, args...); };
  if (plan.version == 0) return bad("a migration plan without a version");
  const std::string record_name = version_file_name(plan.version, VersionFile::record);
  std::map<uint32_t, L1Record> recs;
  std::set<std::pair<uint32_t, std::string>> seen;
  bool records_began = false;
  for (const auto& s : plan.smalls) {
    if (!seen.insert({s.rank, s.name}).second)
      return bad("rank %u's %s named twice in the migration plan", s.rank, s.name.c_str());
    if (s.name == record_name) {
      records_began = true;
      auto rec = decode_l1_record(s.bytes);
      if (!rec) return bad("rank %u's L1 record: %s", s.rank, rec.status().message().c_str());
      const Manifest& m = rec->manifest;
      if (m.version != plan.version || m.rank != s.rank)
        return bad("rank %u's L1 record holds rank %u's version %llu, not version %llu", s.rank, m.rank,
                   static_cast<unsigned long long>(m.version), static_cast<unsigned long long>(plan.version));
      if (rec->slot >= static_cast<uint32_t>(kMaxL1Slots)) return bad("rank %u's record names slot %u", s.rank, rec->slot);
      auto chunks = check_chunk_table(m);
      if (!chunks) return bad("rank %u's manifest: %s", s.rank, chunks.status().message().c_str());
      recs.emplace(s.rank, std::move(rec).value());
    } else if (records_began) {
      return bad("rank %u's %s comes after the L1 records (they must be written last)", s.rank, s.name.c_str());
    } else if (s.name != version_file_name(plan.version, VersionFile::set) &&
               s.name != version_file_name(plan.version, VersionFile::protected_marker)) {
      return bad("'%s' is not a small file of version %llu", s.name.c_str(), static_cast<unsigned long long>(plan.version));
    }
  }
  if (recs.empty()) return bad("a migration plan without an L1 record");
  std::set<uint32_t> have_slot;
  for (const auto& f : plan.files) {
    auto rec = recs.find(f.rank);
    if (rec == recs.end()) return bad("a file of rank %u, which has no L1 record in the plan", f.rank);
    const Manifest& m = rec->second.manifest;
    if (!seen.insert({f.rank, f.name}).second) return bad("rank %u's %s named twice in the migration plan", f.rank, f.name.c_str());
    if (f.length > f.size || f.size > kMaxMoveFileSize)
      return bad("rank %u's %s: %llu bytes to stream into a file of %llu", f.rank, f.name.c_str(),
                 static_cast<unsigned long long>(f.length), static_cast<unsigned long long>(f.size));
    const std::string files = files_prefix(plan.version);
    if (f.name == slot_file_name(rec->second.slot, SlotFile::data)) {
      have_slot.insert(f.rank);
      if (f.checked != !has_files(m)) return bad("rank %u's slot: checked must be %s", f.rank, has_files(m) ? "off" : "on");
      if (f.checked && f.length != m.total_size)
        return bad("rank %u's slot: %llu bytes to stream, the manifest has %llu", f.rank,
                   static_cast<unsigned long long>(f.length), static_cast<unsigned long long>(m.total_size));
    } else if (f.name == slot_file_name(rec->second.slot, SlotFile::red)) {
      if (f.checked) return bad("rank %u's redundancy data cannot be checked against the manifest", f.rank);
    } else if (f.name.compare(0, files.size(), files) == 0) {
      const std::string file = f.name.substr(files.size());
      if (!plain_file_name(file) || !has_files(m) || !is_file_region(m, file) || f.checked)
        return bad("rank %u: '%s' is not a routed file of version %llu", f.rank, f.name.c_str(),
                   static_cast<unsigned long long>(plan.version));
    } else {
      return bad("rank %u: '%s' is not a file of version %llu's slot", f.rank, f.name.c_str(),
                 static_cast<unsigned long long>(plan.version));
    }
  }
  for (const auto& [rank, rec] : recs)
    if (!have_slot.count(rank)) return bad("rank %u's slot is not in the migration plan", rank);
  if (records) {
    records->clear();
    for (const auto& s : plan.smalls)
      if (s.name == record_name) records->emplace_back(s.rank, recs.at(s.rank));
  }
  return Status::ok();
}

// ---- the writer ---------------------------------------------------------------------------------------

Result<std::unique_ptr<MoveWriter>> MoveWriter::open(const Layout& layout, const std::string& to, const MovePlan& plan) {
  std::unique_ptr<MoveWriter> w(new MoveWriter());
  CAIRN_TRY(check_move_plan(plan, &w->records_));
  w->plan_ = plan;
  w->to_node_ = layout.node_cache(to);
  w->node_existed_ = fs::exists(w->to_node_);
  std::map<uint32_t, const L1Record*> by_rank;
  for (const auto& [rank, rec] : w->records_) {
    by_rank[rank] = &rec;
    w->chunk_unit_ = std::max(w->chunk_unit_, rec.manifest.chunk_size);
    w->dirs_.push_back(rank_dir(layout, to, rank));
    if (has_files(rec.manifest)) w->dirs_.push_back(move_path(layout, to, rank, version_file_name(plan.version, VersionFile::files)));
  }
  for (const auto& dir : w->dirs_) CAIRN_TRY(fs::make_dirs(dir));
  for (const auto& f : w->plan_.files) {
    const L1Record* rec = by_rank.at(f.rank);
    w->check_of_.push_back(f.checked ? std::make_unique<ChunkCheck>(rec->manifest) : nullptr);
    w->paths_.push_back(move_path(layout, to, f.rank, f.name));
    auto fd = fs::open_file(w->paths_.back(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!fd) return fd.status();  // the destructor removes what was made
    w->written_.push_back(w->paths_.back());
    if (::ftruncate(fd->get(), static_cast<off_t>(f.size)) != 0)
      return make_error(Code::ERR_IO, "sizing %s to %llu bytes: %s", w->paths_.back().c_str(),
                        static_cast<unsigned long long>(f.size), strerror(errno));
    w->out_.push_back(std::move(fd).value());
  }
  w->received_.assign(w->plan_.files.size(), 0);
  return w;
}

MoveWriter::~MoveWriter() {
  if (!committed_) undo();
}

void MoveWriter::undo() {
  out_.clear();
  for (const auto& f : written_) (void)fs::remove_file(f);
  written_.clear();
  if (!node_existed_) (void)fs::remove_tree(to_node_);
}

Status MoveWriter::put(size_t file, uint64_t offset, const uint8_t* data, uint64_t len) {
  if (file >= plan_.files.size() || committed_) return make_error(Code::ERR_INVALID_ARG, "no file %zu to write", file);
  const MoveFile& f = plan_.files[file];
  if (len == 0 || offset > f.length || len > f.length - offset)
    return make_error(Code::ERR_INVALID_ARG, "bytes %llu..+%llu of rank %u's %s, which streams %llu",
                      static_cast<unsigned long long>(offset), static_cast<unsigned long long>(len), f.rank, f.name.c_str(),
                      static_cast<unsigned long long>(f.length));
  if (ChunkCheck* check = check_of_[file].get()) {
    Status st = check->whole(offset, data, len);
    if (st.code() == Code::ERR_CORRUPT)
      return make_error(Code::ERR_CORRUPT,
                        "rank %u, version %llu, %s: %s; it does not match its manifest: the node's cache (or the copy on "
                        "its way) is damaged, and the version was not migrated",
                        f.rank, static_cast<unsigned long long>(plan_.version), f.name.c_str(), st.message().c_str());
    if (!st) return st.prefixed("rank " + std::to_string(f.rank) + "'s " + f.name);
    checked_ += len;
  }
  CAIRN_TRY(fs::pwrite_all(out_[file].get(), data, len, offset, paths_[file]));
  received_[file] += len;
  return Status::ok();
}

Status MoveWriter::commit() {
  for (size_t i = 0; i < plan_.files.size(); ++i) {
    if (received_[i] != plan_.files[i].length)
      return make_error(Code::ERR_IO, "rank %u's %s: %llu of %llu bytes arrived", plan_.files[i].rank,
                        plan_.files[i].name.c_str(), static_cast<unsigned long long>(received_[i]),
                        static_cast<unsigned long long>(plan_.files[i].length));
    if (::fdatasync(out_[i].get()) != 0)
      return make_error(Code::ERR_IO, "fdatasync %s: %s", paths_[i].c_str(), strerror(errno));
  }
  out_.clear();
  for (const auto& [rank, rec] : records_) {
    if (!has_files(rec.manifest)) continue;
    auto view = map_verified_slot(to_node_ + "/" + rank_dir_name(rank), rec);
    if (!view)
      return make_error(Code::ERR_CORRUPT, "rank %u, version %llu: %s; not migrated", rank,
                        static_cast<unsigned long long>(plan_.version), view.status().message().c_str());
    checked_ += rec.manifest.total_size;
  }
  // The set files and protected markers, then each rank's record: the version exists at the destination
  // only once everything it needs is there.
  for (const auto& s : plan_.smalls) {
    const std::string path = to_node_ + "/" + rank_dir_name(s.rank) + "/" + s.name;
    written_.push_back(path);
    CAIRN_TRY(fs::write_file_atomic(path, s.bytes, /*sync=*/true));
  }
  for (const auto& dir : dirs_) CAIRN_TRY(fs::fsync_dir(dir));
  committed_ = true;
  return Status::ok();
}

// ---- the pipe -----------------------------------------------------------------------------------------

MovePipe::MovePipe(uint32_t buffers) {
  for (uint32_t i = 0; i < buffers; ++i) free_.push_back(i);
}

std::optional<uint32_t> MovePipe::take_free(bool wait) {
  if (cancelled()) return std::nullopt;
  if (free_.empty())
    for (uint32_t b : wait ? this->wait() : test()) free_.push_back(b);
  if (free_.empty() || cancelled()) return std::nullopt;
  uint32_t b = free_.front();
  free_.pop_front();
  return b;
}

void drain_move_pipe(MovePipe& pipe, MoveWriter& writer, const std::function<const uint8_t*(uint32_t)>& buffer,
                     const std::function<void(uint64_t)>& progress) {
  uint64_t done = 0;
  while (auto p = pipe.take()) {
    Status st = writer.put(p->file, p->offset, buffer(p->buffer), p->length);
    if (!st) return pipe.cancel(st);
    pipe.hand_back(p->buffer);
    done += p->length;
    if (progress) progress(done);
  }
}

}  // namespace cairn
