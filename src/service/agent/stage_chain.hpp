// What an agent does with a version: a chain of stages (docs/service.md, "Agent plugins"). The chain is
// named per application by the controller (`--chain`), travels to the agent in start_agent, and is
// parsed and loaded there once; then every version of every rank runs through fresh stage instances:
//
//   verify            every checksum chunk's xxh3 against the manifest (required, first)
//   compress          the write stage stores the chunks zstd-compressed at the application's level
//                     (its `compress` knob), exactly as the embedded flusher does (optional, before write)
//   write             the L3 writer: the rank's files under the prefix, the manifest last (required, once)
//   plugin:PATH[:ARG] a shared object with the C interface of include/cairn/agent_stage.h (any number,
//                     after verify); it sees the verified stream bytes
//
// parse_chain is a pure function (unit tests); the default chain is "verify,compress,write".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/layout.hpp"
#include "base/manifest.hpp"
#include "base/status.hpp"
#include "l3/l3_store.hpp"

struct cairn_agent_stage;

namespace cairn::service {

struct StageSpec {
  enum Kind { verify, compress, write, plugin } kind = verify;
  std::string path, arg;  // plugin: the shared object (absolute) and its argument
  bool operator==(const StageSpec&) const = default;
};
constexpr std::string_view kDefaultChain = "verify,compress,write";

// "verify,compress,write,plugin:/x.so:arg": refused with the reason unless verify comes first, write
// exactly once, compress at most once and before write, and each plugin names an absolute path.
Result<std::vector<StageSpec>> parse_chain(std::string_view text);
std::string chain_text(const std::vector<StageSpec>& chain);
// "NAME=CHAIN" of the controller's --chain: the application name ("*": every application without one
// of its own) and the chain.
Result<std::pair<std::string, std::vector<StageSpec>>> parse_chain_option(std::string_view text);

// One version of one rank, as the stages see it.
struct StageVersion {
  std::string application;
  Layout layout;
  Manifest manifest;
  std::string manifest_text;  // encode_manifest(manifest)
  l3::RankPlacement place;
  l3::WriteOptions opts;      // opts.zstd_level: the application's level (0: stored as is)
};

// A stage's run over one version: begin, data in stream order, then finish or abort (either ends it).
class Stage {
 public:
  virtual ~Stage() = default;
  virtual const char* name() const = 0;
  virtual Status begin(const StageVersion& v) = 0;
  virtual Status data(uint64_t offset, const uint8_t* bytes, uint32_t len) = 0;
  virtual Status finish() = 0;
  virtual void abort() = 0;
};

// A loaded plugin (the shared object stays open while the chain lives).
class Plugin {
 public:
  static Result<std::shared_ptr<Plugin>> load(const std::string& path);
  ~Plugin();
  const cairn_agent_stage* stage() const { return stage_; }
  const std::string& path() const { return path_; }

 private:
  Plugin() = default;
  void* handle_ = nullptr;
  const cairn_agent_stage* stage_ = nullptr;
  std::string path_;
};

// The agent's chain: parsed, plugins loaded; instantiate() makes the stages of one version.
class Chain {
 public:
  static Result<Chain> load(const std::vector<StageSpec>& specs);
  bool compresses() const;
  std::vector<std::unique_ptr<Stage>> instantiate() const;

 private:
  std::vector<StageSpec> specs_;
  std::vector<std::shared_ptr<Plugin>> plugins_;  // one per plugin spec, in order
};

}  // namespace cairn::service
