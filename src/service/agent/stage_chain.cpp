#include "service/agent/stage_chain.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <memory>
#include <string>

#include "base/chunk_check.hpp"
#include "cairn/agent_stage.h"

namespace cairn::service {

namespace {

Result<StageSpec> parse_stage(std::string_view s) {
  StageSpec spec;
  if (s == "verify") {
    spec.kind = StageSpec::verify;
  } else if (s == "compress") {
    spec.kind = StageSpec::compress;
  } else if (s == "write") {
    spec.kind = StageSpec::write;
  } else if (s.substr(0, 7) == "plugin:") {
    spec.kind = StageSpec::plugin;
    std::string_view rest = s.substr(7);
    size_t colon = rest.find(':');
    spec.path = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) spec.arg = std::string(rest.substr(colon + 1));
    if (spec.path.empty() || spec.path[0] != '/')
      return make_error(Code::ERR_INVALID_ARG, "stage '%.*s': a plugin is named by an absolute path",
                        static_cast<int>(s.size()), s.data());
  } else {
    return make_error(Code::ERR_INVALID_ARG, "unknown stage '%.*s' (verify, compress, write, plugin:PATH[:ARG])",
                      static_cast<int>(s.size()), s.data());
  }
  return spec;
}

// verify: each checksum chunk compared as its last byte arrives (base/chunk_check).
class VerifyStage final : public Stage {
 public:
  const char* name() const override { return "verify"; }
  Status begin(const StageVersion& v) override {
    check_ = std::make_unique<ChunkCheck>(v.manifest);
    m_ = &v.manifest;
    return check_->status();
  }
  Status data(uint64_t offset, const uint8_t* bytes, uint32_t len) override {
    return check_->feed(offset, bytes, len).prefixed(who());
  }
  Status finish() override { return check_->finish().prefixed(who()); }
  void abort() override {}

 private:
  std::string who() const {
    return "version " + std::to_string(m_->version) + " rank " + std::to_string(m_->rank);
  }
  std::unique_ptr<ChunkCheck> check_;
  const Manifest* m_ = nullptr;
};

// write (with compress: zstd per checksum chunk, the embedded flusher's compress_chunks on the same
// chunks, so the stored bytes and the where-record are the same).
class WriteStage final : public Stage {
 public:
  explicit WriteStage(bool compress) : compress_(compress) {}
  const char* name() const override { return compress_ ? "compress,write" : "write"; }
  Status begin(const StageVersion& v) override {
    level_ = v.opts.zstd_level;
    if (level_ > 0 && !compress_)
      return make_error(Code::ERR_NOT_SUPPORTED, "the application asks for compression and its chain (the "
                        "controller's --chain) has no compress stage");
    if (level_ > 0 && (!v.place.recorded || v.place.shared))
      return make_error(Code::ERR_NOT_SUPPORTED, "compressed data goes to a file of the rank's own, named by a "
                        "where-record");
    m_ = &v.manifest;
    stored_ = 0;
    sizes_.clear();
    pending_.clear();
    l3::RankPlacement place = v.place;
    if (level_ > 0) place.where.zstd = true;
    writer_ = std::make_unique<l3::RankWriter>();
    return writer_->open(v.layout, v.manifest, place, &v.opts);
  }
  Status data(uint64_t offset, const uint8_t* bytes, uint32_t len) override {
    if (level_ == 0) return writer_->write(offset, bytes, len);
    // Whole checksum chunks are compressed; a chunk split across transfers waits in pending_.
    const uint64_t csize = m_->chunk_size;
    uint64_t pos = 0;
    while (pos < len) {
      uint64_t at = offset + pos;
      uint64_t chunk_end = std::min<uint64_t>((at / csize + 1) * csize, m_->total_size);
      uint64_t take = std::min<uint64_t>(len - pos, chunk_end - at);
      const uint8_t* whole = nullptr;
      uint64_t whole_len = 0;
      if (pending_.empty() && at % csize == 0 && take == chunk_end - at) {
        whole = bytes + pos, whole_len = take;  // the chunk is in this buffer: no copy
      } else {
        pending_.append(reinterpret_cast<const char*>(bytes + pos), take);
        if (at + take == chunk_end)
          whole = reinterpret_cast<const uint8_t*>(pending_.data()), whole_len = pending_.size();
      }
      if (whole) {
        CAIRN_TRY(l3::compress_chunks(whole, whole_len, m_->chunk_size, level_, &packed_, &one_));
        CAIRN_TRY(writer_->write(stored_, reinterpret_cast<const uint8_t*>(packed_.data()), packed_.size()));
        stored_ += packed_.size();
        sizes_.push_back(one_.at(0));
        pending_.clear();
      }
      pos += take;
    }
    return Status::ok();
  }
  Status finish() override {
    if (level_ > 0) writer_->record_compressed(sizes_);
    Status st = writer_->finish().status();  // a whole version, no chunk record: written, or an error
    writer_.reset();
    return st;
  }
  void abort() override { writer_.reset(); }  // removes the partial file

 private:
  bool compress_;
  int level_ = 0;
  const Manifest* m_ = nullptr;
  std::unique_ptr<l3::RankWriter> writer_;
  std::string pending_, packed_;
  std::vector<uint64_t> sizes_, one_;
  uint64_t stored_ = 0;
};

class PluginStage final : public Stage {
 public:
  PluginStage(std::shared_ptr<Plugin> p, std::string arg) : plugin_(std::move(p)), arg_(std::move(arg)) {}
  ~PluginStage() override { abort(); }
  const char* name() const override { return plugin_->stage()->name ? plugin_->stage()->name : "plugin"; }
  Status begin(const StageVersion& v) override {
    app_ = v.application;
    prefix_ = v.layout.prefix;
    vdir_ = Layout::l3_version_name(v.manifest.version);
    cairn_stage_version sv{};
    sv.application = app_.c_str();
    sv.prefix = prefix_.c_str();
    sv.version_dir = vdir_.c_str();
    sv.version = v.manifest.version;
    sv.rank = v.manifest.rank;
    sv.nranks = v.manifest.nranks;
    sv.total_size = v.manifest.total_size;
    sv.chunk_size = v.manifest.chunk_size;
    sv.manifest = v.manifest_text.data();
    sv.manifest_len = v.manifest_text.size();
    sv.arg = arg_.c_str();
    char err[512] = "";
    state_ = plugin_->stage()->begin(&sv, err, sizeof err);
    return state_ ? Status::ok() : failure("begin", err);
  }
  Status data(uint64_t offset, const uint8_t* bytes, uint32_t len) override {
    char err[512] = "";
    return plugin_->stage()->data(state_, offset, bytes, len, err, sizeof err) == 0 ? Status::ok() : failure("data", err);
  }
  Status finish() override {
    char err[512] = "";
    void* s = state_;
    state_ = nullptr;
    return plugin_->stage()->finish(s, err, sizeof err) == 0 ? Status::ok() : failure("finish", err);
  }
  void abort() override {
    if (state_) plugin_->stage()->abort(state_);
    state_ = nullptr;
  }

 private:
  Status failure(const char* call, const char* err) const {
    return make_error(Code::ERR_IO, "plugin %s (%s) %s: %s", name(), plugin_->path().c_str(), call,
                      err[0] ? err : "failed without saying why");
  }
  std::shared_ptr<Plugin> plugin_;
  std::string arg_, app_, prefix_, vdir_;
  void* state_ = nullptr;
};

}  // namespace

Result<std::vector<StageSpec>> parse_chain(std::string_view text) {
  std::vector<StageSpec> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    CAIRN_ASSIGN_OR_RETURN(spec, parse_stage(text.substr(start, comma - start)));
    out.push_back(std::move(spec));
    start = comma + 1;
  }
  auto count = [&](StageSpec::Kind k) { return std::count_if(out.begin(), out.end(), [&](auto& s) { return s.kind == k; }); };
  auto where = [&](StageSpec::Kind k) {
    return std::find_if(out.begin(), out.end(), [&](auto& s) { return s.kind == k; }) - out.begin();
  };
  const std::string t(text);
  if (out.front().kind != StageSpec::verify || count(StageSpec::verify) != 1)
    return make_error(Code::ERR_INVALID_ARG, "chain '%s': verify comes first, once (nothing unverified is written)", t.c_str());
  if (count(StageSpec::write) != 1)
    return make_error(Code::ERR_INVALID_ARG, "chain '%s': write comes exactly once", t.c_str());
  if (count(StageSpec::compress) > 1 || (count(StageSpec::compress) == 1 && where(StageSpec::compress) > where(StageSpec::write)))
    return make_error(Code::ERR_INVALID_ARG, "chain '%s': compress comes at most once, before write", t.c_str());
  return out;
}

std::string chain_text(const std::vector<StageSpec>& chain) {
  std::string out;
  for (const auto& s : chain) {
    if (!out.empty()) out += ',';
    switch (s.kind) {
      case StageSpec::verify: out += "verify"; break;
      case StageSpec::compress: out += "compress"; break;
      case StageSpec::write: out += "write"; break;
      case StageSpec::plugin: out += "plugin:" + s.path + (s.arg.empty() ? "" : ":" + s.arg); break;
    }
  }
  return out;
}

Result<std::pair<std::string, std::vector<StageSpec>>> parse_chain_option(std::string_view text) {
  size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return make_error(Code::ERR_INVALID_ARG, "--chain %.*s: expected NAME=STAGES (NAME: an application, or *)",
                      static_cast<int>(text.size()), text.data());
  CAIRN_ASSIGN_OR_RETURN(chain, parse_chain(text.substr(eq + 1)));
  return std::make_pair(std::string(text.substr(0, eq)), std::move(chain));
}

Result<std::shared_ptr<Plugin>> Plugin::load(const std::string& path) {
  std::shared_ptr<Plugin> p(new Plugin());
  p->path_ = path;
  p->handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!p->handle_) return make_error(Code::ERR_IO, "plugin %s: %s", path.c_str(), dlerror());
  auto fn = reinterpret_cast<cairn_agent_stage_fn>(dlsym(p->handle_, CAIRN_AGENT_STAGE_SYMBOL));
  if (!fn) return make_error(Code::ERR_FORMAT, "plugin %s exports no %s()", path.c_str(), CAIRN_AGENT_STAGE_SYMBOL);
  p->stage_ = fn();
  if (!p->stage_ || p->stage_->abi != CAIRN_AGENT_STAGE_ABI || !p->stage_->begin || !p->stage_->data ||
      !p->stage_->finish || !p->stage_->abort)
    return make_error(Code::ERR_FORMAT, "plugin %s: not a stage of ABI %d (or a function missing)", path.c_str(),
                      CAIRN_AGENT_STAGE_ABI);
  return p;
}

Plugin::~Plugin() {
  if (handle_) dlclose(handle_);
}

Result<Chain> Chain::load(const std::vector<StageSpec>& specs) {
  Chain c;
  c.specs_ = specs;
  for (const auto& s : specs)
    if (s.kind == StageSpec::plugin) {
      CAIRN_ASSIGN_OR_RETURN(p, Plugin::load(s.path));
      c.plugins_.push_back(std::move(p));
    }
  return c;
}

bool Chain::compresses() const {
  return std::any_of(specs_.begin(), specs_.end(), [](auto& s) { return s.kind == StageSpec::compress; });
}

std::vector<std::unique_ptr<Stage>> Chain::instantiate() const {
  std::vector<std::unique_ptr<Stage>> out;
  size_t plugin = 0;
  for (const auto& s : specs_) {
    switch (s.kind) {
      case StageSpec::verify: out.push_back(std::make_unique<VerifyStage>()); break;
      case StageSpec::compress: break;  // a property of the write stage
      case StageSpec::write: out.push_back(std::make_unique<WriteStage>(compresses())); break;
      case StageSpec::plugin: out.push_back(std::make_unique<PluginStage>(plugins_[plugin++], s.arg)); break;
    }
  }
  return out;
}

}  // namespace cairn::service
