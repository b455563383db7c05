// The runtime: set-up, protected regions, taking a version (the application's blocking path), policy.
// The progress engine is in pipeline.cpp, restart in restart.cpp, the file API in file_api.cpp.
#include "core/runtime.hpp"

#include "core/flusher_choice.hpp"
#include "pipeline/service_flusher.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>

#include "base/fsutil.hpp"
#include "base/log.hpp"
#include "cache/cache_store.hpp"
#include "cache/snapshot_mode.hpp"
#include "mpi/mpi_util.hpp"
#include "pfs/l3_store.hpp"
#include "policy/exit_policy.hpp"
#include "policy/halt.hpp"
#include "redistribute/distribution.hpp"

namespace cairn {
namespace {
std::unique_ptr<Runtime> g_runtime;
// Rank 0's reading of the halt file; belongs to g_runtime (reset by init).
policy::HaltWatcher g_halt_watcher;

// The halt file's verdict as a policy::HaltAction value, for the max-allreduce (rank 0 only).
double observe_halt_file(const std::string& path, const policy::HaltContext& ctx) {
  std::vector<std::string> messages;
  policy::HaltVerdict v = g_halt_watcher.observe(path, ctx, &messages);
  for (const auto& m : messages) LOG_WARN("%s", m.c_str());
  return static_cast<double>(static_cast<int>(v.action));
}

// The job's end time from Slurm, when inside a Slurm job (docs/halt.md); 0 otherwise.
int64_t end_time_from_slurm() {
  auto found = policy::slurm_end_time(process_env(), [](const std::vector<std::string>& argv) {
    return policy::run_command(argv, 10.0);
  });
  if (found.end_time > 0)
    LOG_INFO("end time %s from Slurm (%s)", policy::format_time(found.end_time).c_str(), found.source.c_str());
  else if (!found.problem.empty())
    LOG_WARN("inside a Slurm job, but its end time is unknown: %s; set end_time (CAIRN_END_TIME) to "
             "checkpoint before the time limit", found.problem.c_str());
  return found.end_time;
}

uint32_t type_size(int type) {
  switch (type) {
    case CAIRN_BYTE: return 1;
    case CAIRN_CHAR: return sizeof(char);
    case CAIRN_INT: return sizeof(int);
    case CAIRN_INT32: return 4;
    case CAIRN_INT64: return 8;
    case CAIRN_UINT32: return 4;
    case CAIRN_UINT64: return 8;
    case CAIRN_FLOAT: return sizeof(float);
    case CAIRN_DOUBLE: return sizeof(double);
    case CAIRN_LONG: return sizeof(long);
    case CAIRN_COMPLEX_FLOAT: return 2 * sizeof(float);
    case CAIRN_COMPLEX_DOUBLE: return 2 * sizeof(double);
  }
  return 0;
}
}  // namespace

Result<redist::Distribution> dist_from_c(const cairn_distribution& d) {
  if (d.kind < 0 || d.kind > CAIRN_DIST_BLOCK_COLS)
    return make_error(Code::ERR_INVALID_ARG, "unknown distribution kind %d", d.kind);
  return redist::make(static_cast<redist::Kind>(d.kind), d.global_count, d.block_size, d.rows, d.cols);
}

Runtime* Runtime::instance() { return g_runtime.get(); }

Status Runtime::create(MPI_Comm comm, const char* config_path) {
  if (g_runtime) return make_error(Code::ERR_ALREADY_INITIALIZED, "cairn_init called twice without cairn_finalize");
  int mpi_up = 0;
  MPI_Initialized(&mpi_up);
  if (!mpi_up) return make_error(Code::ERR_SEQUENCE, "call MPI_Init before cairn_init");
  std::unique_ptr<Runtime> rt(new Runtime());
  Status st = rt->init(comm, config_path);
  if (!st.is_ok()) {
    rt->release_comms();
    return st;
  }
  g_runtime = std::move(rt);
  return Status::ok();
}

Status Runtime::destroy() {
  if (!g_runtime) return make_error(Code::ERR_NOT_INITIALIZED, "call cairn_init before cairn_finalize");
  Status st = g_runtime->finalize();
  g_runtime.reset();
  return st;
}

void Runtime::abandon() {
  if (!g_runtime) return;
  g_runtime->stop_pipeline();
  g_runtime->lease_.stop();  // the job goes on without this process: its record stays
  policy::restore_signal_handlers();
  g_runtime.reset();
}

Status Runtime::init(MPI_Comm comm, const char* config_path) {
  MPI_Query_thread(&thread_level_);
  mpi_in_worker_ = thread_level_ == MPI_THREAD_MULTIPLE;
  CAIRN_MPI(MPI_Comm_dup(comm, &app_comm_));
  MPI_Comm_rank(app_comm_, &rank_);
  log::set_rank(rank_);

  // Configuration: every rank parses; any rank's error is everyone's error.
  auto loaded = load_config(config_path, process_env(), process_env_cairn_names());
  Status cfg_status = loaded.is_ok() ? Status::ok() : loaded.status();
  CAIRN_TRY(agree(app_comm_, cfg_status));
  cfg_ = loaded->config;
  log::set_level(cfg_.log_level);
  if (rank_ == 0)
    for (const auto& w : loaded->warnings) LOG_WARN("%s", w.c_str());
  layout_ = make_layout(cfg_);
  inject_.init(rank_, layout_.state_file());
  CAIRN_TRY(claim_prefix());
  CAIRN_TRY(choose_snapshot());
  CAIRN_TRY(bind_comm(app_comm_));
  events_->began(history::start_info(cfg_, static_cast<uint64_t>(nranks_), node_of_rank_, placement_.enabled,
                                     mpi_in_worker_, next_version_ - 1));
  // Time limit, halt file and signals (docs/halt.md). Rank 0 asks Slurm once; every rank gets its answer.
  long long end_time = cfg_.end_time;
  if (rank_ == 0 && end_time == 0) end_time = end_time_from_slurm();
  CAIRN_MPI(MPI_Bcast(&end_time, 1, MPI_LONG_LONG, 0, app_comm_));
  cfg_.end_time = end_time;
  g_halt_watcher = policy::HaltWatcher{};
  if (!policy::install_signal_handlers(policy::parse_exit_signal(cfg_.exit_signal)) && rank_ == 0)
    LOG_WARN("exit_signal %s: a handler is already installed (by the application, or by the MPI library: "
             "MPICH takes SIGUSR1); cairn does not catch it. Choose another signal with exit_signal "
             "(CAIRN_EXIT_SIGNAL), e.g. USR2",
             cfg_.exit_signal.c_str());
  last_checkpoint_time_ = now_seconds();
  return Status::ok();
}

// copy or copy-on-write (the snapshot knob), per rank: rank 0 says which and why, and how many ranks
// differ from it (nodes may differ in kernel or devices); every rank's reason is at debug level.
Status Runtime::choose_snapshot() {
  // auto weighs the CPUs this rank may use against the ranks sharing its node (the copier needs a core).
  MPI_Comm node_comm = MPI_COMM_NULL;
  int ranks_on_node = 1;
  CAIRN_MPI(MPI_Comm_split_type(app_comm_, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node_comm));
  MPI_Comm_size(node_comm, &ranks_on_node);
  MPI_Comm_free(&node_comm);
  SnapshotChoice snap = choose_snapshotter(cfg_.snapshot, !cfg_.service.empty(), "/sys", this_process_cpus(ranks_on_node));
  // Device regions are copied by the device snapshotter, host regions by the one chosen (docs/gpu.md).
  device::CopyOptions dev;
  dev.mode = cfg_.device_copy == DeviceCopy::wait ? device::CopyMode::wait : device::CopyMode::return_at_once;
  dev.piece = cfg_.device_piece;
  dev.hash_threads = cfg_.device_hash_threads;
  auto wrapped = std::make_unique<device::DeviceSnapshotter>(std::move(snap.snapshotter), dev);
  device_snapshot_ = wrapped.get();
  snapshot_ = std::move(wrapped);
  int cow = std::strcmp(snapshot_->name(), "cow") == 0 ? 1 : 0, cow_ranks = 0, nranks = 1;
  CAIRN_MPI(MPI_Allreduce(&cow, &cow_ranks, 1, MPI_INT, MPI_SUM, app_comm_));
  MPI_Comm_size(app_comm_, &nranks);
  LOG_DEBUG("%s", snap.why.c_str());
  if (rank_ != 0) return Status::ok();
  if (snap.warn)
    LOG_WARN("%s", snap.why.c_str());
  else
    LOG_INFO("%s", snap.why.c_str());
  if (cow_ranks != 0 && cow_ranks != nranks)
    LOG_WARN("snapshot: %d of %d ranks take copy-on-write snapshots, the others copy (CAIRN_LOG=debug says why per rank)",
             cow_ranks, nranks);
  return Status::ok();
}

namespace {
// The executable's name, for the prefix's identity when app_name is not set.
std::string executable_name() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "unknown";
  buf[n] = '\0';
  std::string path(buf);
  return path.substr(path.rfind('/') + 1);
}

std::string this_host() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0 || !buf[0]) return "localhost";
  return buf;
}
}  // namespace

Status Runtime::claim_prefix() {
  // A launch id every rank knows: a rank 0 that changes (live redistribution) is still this launch.
  unsigned long long launch = 0;
  if (rank_ == 0) {
    std::random_device rd;
    launch = (static_cast<unsigned long long>(rd()) << 32) ^ rd() ^ static_cast<unsigned long long>(getpid());
  }
  CAIRN_MPI(MPI_Bcast(&launch, 1, MPI_UNSIGNED_LONG_LONG, 0, app_comm_));
  char id[32];
  snprintf(id, sizeof id, "%016llx", launch);
  launch_id_ = id;
  MPI_Comm parent = MPI_COMM_NULL;
  MPI_Comm_get_parent(&parent);
  int size = 1;
  MPI_Comm_size(app_comm_, &size);
  if (parent != MPI_COMM_NULL && size == 1) {
    LOG_DEBUG("spawned alone on its communicator: joins the job that spawned it, claims no prefix");
    return Status::ok();
  }
  // Whether the job's cache already holds versions, on any node (a cache that outlived its prefix is
  // refused at the claim: base/prefix_owner.hpp).
  int mine = cache_holds_versions(layout_, cfg_.node) ? 1 : 0, any = 0;
  CAIRN_MPI(MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, app_comm_));
  return agree(app_comm_, rank_ == 0 ? hold_prefix(any != 0) : Status::ok());
}

Status Runtime::hold_prefix(bool cache_has_versions) {
  CAIRN_TRY(fs::make_dirs(layout_.control));
  PrefixHolder me;
  me.job = job_name(cfg_);
  me.app = cfg_.app_name.empty() ? executable_name() : cfg_.app_name;
  me.host = this_host();
  me.pid = getpid();
  me.launch = launch_id_;
  if (const char* run = getenv("CAIRN_RUN_ID")) me.run = run;
  me.lease_seconds = cfg_.lease_seconds;
  std::vector<std::string> notes;
  Status st = lease_.acquire(layout_.owner_file(), layout_.identity_file(), me, PrefixIdentity{me.job, me.app},
                             l3::max_version_present(layout_) > 0, cfg_.adopt, layout_.prefix,
                             cache_has_versions ? layout_.cache_job : std::string(), &notes);
  for (const auto& n : notes) LOG_WARN("%s", n.c_str());
  return st;
}

// Make `comm` (already duplicated into app_comm_) cairn's communicator: the pipeline's communicator,
// this rank's cache directory, the L2 sets and the version numbering all follow from it.
Status Runtime::bind_comm(MPI_Comm comm) {
  app_comm_ = comm;
  CAIRN_MPI(MPI_Comm_dup(app_comm_, &bg_comm_));
  MPI_Comm_rank(app_comm_, &rank_);
  MPI_Comm_size(app_comm_, &nranks_);
  log::set_rank(rank_);
  Status dirs = fs::make_dirs(layout_.control);
  if (dirs.is_ok()) dirs = cache_.open(layout_.rank_cache(cfg_.node, rank_), cfg_.cache_versions);
  CAIRN_TRY(agree(app_comm_, dirs.prefixed("cannot create the checkpoint directories")));
  state_.open(layout_, rank_ == 0);
  events_ = std::make_unique<pipeline::JobEvents>(&state_, rank_, layout_.prefix);
  placement_ = redundancy::SetPlacement{};
  code_.reset();
  CAIRN_TRY(compute_placement());
  CAIRN_TRY(setup_l3_options());
  CAIRN_TRY(agree_next_version());
  start_pipeline();
  if (rank_ == 0) {
    LOG_INFO("cairn %d.%d.%d on %d ranks: prefix %s, cache %s, redundancy %s%s, flush every %d, %s",
             CAIRN_VERSION_MAJOR, CAIRN_VERSION_MINOR, CAIRN_VERSION_PATCH, nranks_, layout_.prefix.c_str(),
             layout_.cache_job.c_str(), redundancy_name(cfg_.redundancy),
             placement_.enabled ? "" : " (L2 off)", cfg_.flush_every,
             mpi_in_worker_ ? "background MPI progress" : "MPI progress inside cairn calls");
  }
  events_->computing(nranks_, redundancy_name(cfg_.redundancy), next_version_ - 1, layout_.cache_job);
  return Status::ok();
}

// The pipeline over this communicator: its team on bg_comm_, L2 on this rank's set (when on), the
// embedded flusher, the job's events.
void Runtime::start_pipeline() {
  team_ = std::make_unique<pipeline::MpiTeam>(bg_comm_);
  if (placement_.enabled)
    protector_ = std::make_unique<pipeline::SetProtector>(
        set_comm_, placement_.members[static_cast<size_t>(placement_.my_set)], &*code_, &cache_, cfg_.exchange_chunk);
  pipeline::PipelineConfig pc;
  pc.layout = layout_;
  pc.keep_flushed = cfg_.keep_flushed;
  pc.l2_every = cfg_.l2_every;
  pc.mpi_in_worker = mpi_in_worker_;
  pc.l3 = l3_base_;
  pc.inject = &inject_;
  pipeline_ = std::make_unique<pipeline::Pipeline>(pc, &cache_, team_.get(), protector_.get(), nullptr, events_.get(),
                                                   snapshot_.get());
  pipeline::Pipeline* p = pipeline_.get();
  auto flusher = choose_flusher(cfg_, layout_, bg_comm_, [p] { return p->l3_options(); });
  if (flusher) {
    flusher_ = std::move(*flusher);
  } else {
    LOG_ERROR("service mode off: %s", flusher.status().message().c_str());
    flusher_ = std::make_unique<pipeline::EmbeddedFlusher>(layout_, [p] { return p->l3_options(); });
  }
  pipeline_->set_flusher(flusher_.get());
}

void Runtime::stop_pipeline() {
  finish_write_back();
  cache_.finish_prepare();  // it asks the pipeline which slots are lent
  if (pipeline_) pipeline_->stop();
  flusher_.reset();
  pipeline_.reset();
  protector_.reset();
  team_.reset();
}

void Runtime::release_comms() {
  stop_pipeline();
  if (set_comm_ != MPI_COMM_NULL) MPI_Comm_free(&set_comm_);
  if (bg_comm_ != MPI_COMM_NULL) MPI_Comm_free(&bg_comm_);
  if (app_comm_ != MPI_COMM_NULL) MPI_Comm_free(&app_comm_);
}

// Failure groups -> redundancy sets. For every "local index" (the i-th rank of a node), the ranks
// with that index are taken in node order and cut into sets of set_size nodes; a short tail joins
// the previous set. Ranks of one node never share a set, so a node loss costs a set one member.
Status Runtime::compute_placement() {
  constexpr int kNameLen = 256;
  std::vector<char> names(static_cast<size_t>(nranks_) * kNameLen, 0);
  char mine[kNameLen] = {0};
  strncpy(mine, cfg_.node.c_str(), kNameLen - 1);
  CAIRN_MPI(MPI_Allgather(mine, kNameLen, MPI_CHAR, names.data(), kNameLen, MPI_CHAR, app_comm_));
  node_of_rank_.assign(static_cast<size_t>(nranks_), "");
  for (int r = 0; r < nranks_; ++r) node_of_rank_[static_cast<size_t>(r)] = std::string(&names[static_cast<size_t>(r) * kNameLen]);
  std::vector<std::string> warnings;
  placement_ = redundancy::place_sets(node_of_rank_, cfg_.redundancy, cfg_.set_size, cfg_.rs_parity, rank_, &warnings);
  if (rank_ == 0)
    for (const auto& w : warnings) LOG_WARN("%s", w.c_str());
  const auto& p = placement_;
  CAIRN_MPI(MPI_Comm_split(bg_comm_, p.enabled ? p.my_set : MPI_UNDEFINED, p.my_member, &set_comm_));
  if (p.enabled) {
    auto code = redundancy::SetCode::make(cfg_.redundancy, static_cast<int>(p.members[static_cast<size_t>(p.my_set)].size()), p.m);
    CAIRN_TRY(agree(app_comm_, code.is_ok() ? Status::ok() : code.status()));
    code_ = std::move(code).value();
  }
  return Status::ok();
}

Status Runtime::setup_l3_options() {
  l3::WriteOptions o;
  Status st = Status::ok();
  auto level = l3::parse_compress(cfg_.compress);
  if (!level) st = level.status();
  else o.zstd_level = *level;
  auto prefixes = l3::parse_prefixes(cfg_.data_prefixes);
  if (!prefixes) st = prefixes.status().prefixed("data_prefixes");
  else o.data_prefixes = *prefixes;
  o.files_per_node = cfg_.files_per_node;
  o.turnstile_width = cfg_.turnstile_width;
  o.node = cfg_.node;
  o.node_dir = layout_.node_cache(cfg_.node);
  for (int r = 0; r < rank_; ++r) o.local_index += node_of_rank_[static_cast<size_t>(r)] == cfg_.node ? 1 : 0;
  CAIRN_TRY(agree(app_comm_, st));
  l3_base_ = o;
  return Status::ok();
}

// Version numbers only grow, across runs too: a new version never reuses the number of a stale,
// partial one that some cache or the prefix may still hold.
Status Runtime::agree_next_version() {
  unsigned long long seen = 0;
  for (uint64_t v : cache_.versions()) seen = std::max<unsigned long long>(seen, v);
  if (rank_ == 0) seen = std::max<unsigned long long>(seen, l3::max_version_present(layout_));
  unsigned long long max_seen = 0;
  CAIRN_MPI(MPI_Allreduce(&seen, &max_seen, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, app_comm_));
  next_version_ = max_seen + 1;
  return Status::ok();
}

Status Runtime::finalize() {
  // A rank rebuilt from L2 at restart writes the version back into its cache in the background; the
  // flush below reads that copy, so it must be there (a job that ends before its next checkpoint).
  finish_write_back();
  // An earlier failed version does not stop the newest good one from reaching L3.
  Status st = wait_all();
  pipeline::Marks m = pipeline_->marks();
  if (exit_for_migration_ && cfg_.flush_on_finalize && m.local > m.flushed) {
    if (rank_ == 0)
      LOG_INFO("finalize: version %llu stays in the caches: the launcher migrates it (no flush to L3)",
               static_cast<unsigned long long>(m.local));
  } else if (cfg_.flush_on_finalize && m.local > m.flushed) {
    Status fl = pipeline_->flush_now(m.local);
    if (!fl.is_ok() && st.is_ok()) st = fl;
  }
  stop_pipeline();
  policy::restore_signal_handlers();
  events_->finalized(st.is_ok() ? "ok" : st.message(), versions_taken_, exit_requested_);
  lease_.release();
  release_comms();
  return st;
}

Status Runtime::protect(const char* name, void* ptr, size_t count, int type) {
  if (!name || !*name) return make_error(Code::ERR_INVALID_ARG, "cairn_protect: name is empty");
  if (strlen(name) > 255) return make_error(Code::ERR_INVALID_ARG, "cairn_protect: name longer than 255 bytes");
  uint32_t elem = type_size(type);
  if (elem == 0) return make_error(Code::ERR_INVALID_ARG, "cairn_protect('%s'): unknown cairn_type %d", name, type);
  if (!ptr && count > 0)
    return make_error(Code::ERR_INVALID_ARG, "cairn_protect('%s'): NULL pointer with count %zu", name, count);
  if (count > (UINT64_MAX / elem)) return make_error(Code::ERR_INVALID_ARG, "cairn_protect('%s'): count overflows", name);
  bool device = false;
  void* context = nullptr;
  CAIRN_TRY(classify_region(name, ptr, static_cast<uint64_t>(count) * elem, &device, &context));
  // Protecting a name again (a resized buffer): the old one may be freed next, so a copy-on-write
  // snapshot in flight must be done reading it.
  if (regions_.count(name)) snapshot_->wait_copied();
  Region& r = regions_[name];
  r.name = name;
  r.ptr = ptr;
  r.count = count;
  r.type = type;
  r.elem_size = elem;
  r.dist_kind = 0;  // cairn_protect means private; cairn_protect_distributed sets it after
  if (device) device_regions_[name] = context;
  else device_regions_.erase(name);
  r.dist_params.clear();
  prepare_slots();
  return Status::ok();
}

Status Runtime::protect_distributed(const char* name, void* ptr, size_t count, int type, const cairn_distribution* d) {
  if (!d) return make_error(Code::ERR_INVALID_ARG, "cairn_protect_distributed('%s'): distribution is NULL", name ? name : "");
  CAIRN_ASSIGN_OR_RETURN(dist, dist_from_c(*d));
  if (dist.kind != redist::Kind::private_ && dist.kind != redist::Kind::replicated) {
    uint64_t want = redist::local_count(dist, nranks_, rank_);
    // count 0 on a one-rank communicator: a process about to join a job by cairn_redistribute.
    if (want != count && !(count == 0 && nranks_ == 1))
      return make_error(Code::ERR_SIZE_MISMATCH,
                        "cairn_protect_distributed('%s'): %zu elements given, the %s distribution gives rank %d of %d "
                        "%llu (see cairn_local_count)", name ? name : "", count, redist::kind_name(dist.kind), rank_,
                        nranks_, static_cast<unsigned long long>(want));
  } else if (dist.kind == redist::Kind::replicated && dist.global_count && dist.global_count != count) {
    return make_error(Code::ERR_SIZE_MISMATCH, "cairn_protect_distributed('%s'): replicated region of %llu elements given %zu",
                      name ? name : "", static_cast<unsigned long long>(dist.global_count), count);
  }
  auto old = regions_.find(name ? name : "");
  cairn_resize_fn fn = old != regions_.end() ? old->second.resize : nullptr;
  void* user = old != regions_.end() ? old->second.resize_user : nullptr;
  CAIRN_TRY(protect(name, ptr, count, type));
  Region& r = regions_[name];
  r.dist_kind = static_cast<uint32_t>(dist.kind);
  r.dist_params = dist.to_params();
  r.resize = fn;
  r.resize_user = user;
  return Status::ok();
}

Status Runtime::local_count(const cairn_distribution* d, size_t* count) const {
  if (!d || !count) return make_error(Code::ERR_INVALID_ARG, "cairn_local_count: NULL argument");
  CAIRN_ASSIGN_OR_RETURN(dist, dist_from_c(*d));
  if (dist.kind == redist::Kind::private_)
    return make_error(Code::ERR_INVALID_ARG, "cairn_local_count: a private region has no global shape");
  *count = static_cast<size_t>(dist.kind == redist::Kind::replicated ? dist.global_count
                                                                       : redist::local_count(dist, nranks_, rank_));
  return Status::ok();
}

Status Runtime::set_resize(const char* name, cairn_resize_fn fn, void* user) {
  auto it = regions_.find(name ? name : "");
  if (it == regions_.end())
    return make_error(Code::ERR_UNKNOWN_REGION, "cairn_set_resize: no region named '%s' (protect it first)", name ? name : "(null)");
  it->second.resize = fn;
  it->second.resize_user = user;
  return Status::ok();
}

// The first checkpoints then find their slots made and faulted in, as the later ones do: the cost of the
// page allocations moves off the application's blocking path (docs/architecture.md, "What an L1 slot is").
void Runtime::prepare_slots() {
  if (!pipeline_) return;
  std::vector<RegionEntry> entries;
  uint64_t total = memory_region_entries(&entries);
  uint64_t red = placement_.enabled && code_ ? code_->redundancy_len(total) : 0;
  pipeline_->prepare_slots(total, red);
}

Status Runtime::unprotect(const char* name) {
  if (!name || !regions_.count(name))
    return make_error(Code::ERR_UNKNOWN_REGION, "cairn_unprotect: no region named '%s'", name ? name : "(null)");
  // The application may free the region once this returns: a copy-on-write snapshot in flight must be
  // done reading it.
  snapshot_->wait_copied();
  regions_.erase(name);
  device_regions_.erase(name);
  return Status::ok();
}

// The protected memory regions as manifest entries, back to back in name order; returns their bytes.
uint64_t Runtime::memory_region_entries(std::vector<RegionEntry>* out) const {
  uint64_t off = 0;
  for (const auto& [name, r] : regions_) {
    RegionEntry e;
    e.name = name;
    e.kind = RegionKind::memory;
    e.type = static_cast<uint32_t>(r.type);
    e.elem_size = r.elem_size;
    e.count = r.count;
    e.offset = off;
    e.size = r.bytes();
    e.distribution = r.dist_kind;
    e.dist_params = r.dist_params;
    off += e.size;
    out->push_back(std::move(e));
  }
  return off;
}

// cairn_checkpoint: a version of the memory regions, labelled ckpt.N. Every rank calls it, so no vote is
// needed: a local failure reaches the other ranks through the pipeline's first agreement, which
// discards the version everywhere.
Status Runtime::checkpoint() {
  if (in_output_) return make_error(Code::ERR_SEQUENCE, "cairn_checkpoint: an output is open (call cairn_complete_output first)");
  if (in_restart_) return make_error(Code::ERR_SEQUENCE, "cairn_checkpoint: a restart is open (call cairn_complete_restart first)");
  return take_version("ckpt." + std::to_string(next_version_), /*have_files=*/false, Status::ok());
}

// The application's blocking path, for cairn_checkpoint and cairn_complete_output alike: describe the
// version, hand it to the pipeline (which waits for a slot, takes the snapshot and moves it on in the
// background).
Status Runtime::take_version(const std::string& label, bool have_files, const Status& failed_before) {
  const double t_enter = now_seconds();
  finish_write_back();
  uint64_t v = next_version_++;
  pending_.reset();
  plan_.reset();
  Manifest m;
  std::vector<SnapshotRegion> memory;
  std::vector<pipeline::FileSource> files;
  // A failure here is this rank's alone; the version still enters the pipeline (marked failed) so that
  // every rank runs the same agreements, which then discard it everywhere.
  Status described = [&]() -> Status {
    CAIRN_TRY(failed_before);
    m.version = v;
    m.label = label;
    m.rank = static_cast<uint32_t>(rank_);
    m.nranks = static_cast<uint32_t>(nranks_);
    m.node = cfg_.node;
    m.created_unix_ns = static_cast<int64_t>(now_seconds() * 1e9);
    m.chunk_size = static_cast<uint32_t>(cfg_.chunk_size);
    uint64_t off = memory_region_entries(&m.regions);
    for (const auto& e : m.regions) {
      const Region& r = regions_[e.name];
      auto dev = device_regions_.find(e.name);
      bool on_device = dev != device_regions_.end();
      memory.push_back({e.name, r.ptr, e.size, e.offset, on_device, on_device ? dev->second : nullptr});
    }
    if (have_files) {
      for (const auto& [name, path] : routed_) {
        struct stat st;
        if (::stat(path.c_str(), &st) != 0) return posix_error("stat", path, errno);
        RegionEntry e;
        e.name = name;
        e.kind = RegionKind::file;
        e.count = static_cast<uint64_t>(st.st_size);
        e.offset = file_region_offset(off);  // mapped where it lies: page aligned (cache/version_view.hpp)
        e.size = e.count;
        off = e.offset + e.size;
        files.push_back({path, e.offset, e.size});
        m.regions.push_back(std::move(e));
      }
    }
    m.total_size = off;
    return Status::ok();
  }();
  if (!described.is_ok()) {
    memory.clear();
    files.clear();
  }
  bool flush = cfg_.flush_every > 0 && v % static_cast<uint64_t>(cfg_.flush_every) == 0;
  double blocking = 0;
  const double t_described = now_seconds();
  Status local = pipeline_->take(std::move(m), flush, memory, files, described, &blocking);
  ++versions_taken_;
  last_checkpoint_time_ = now_seconds();
  LOG_DEBUG("cairn_checkpoint %llu: %.3f ms, of which before the pipeline %.3f (write-back, description)",
            static_cast<unsigned long long>(v), (last_checkpoint_time_ - t_enter) * 1e3, (t_described - t_enter) * 1e3);
  checkpoint_cost_.add(last_checkpoint_time_ - t_enter + pipeline_seconds_on_app_);
  pipeline_seconds_on_app_ = 0;
  if (exit_requested_) checkpoint_since_request_ = true;
  return local;
}

Status Runtime::need_checkpoint(int* flag) {
  if (!flag) return make_error(Code::ERR_INVALID_ARG, "cairn_need_checkpoint: flag is NULL");
  int need = 0, exit = 0;
  CAIRN_TRY(policy_observe(&need, &exit));
  *flag = need;
  return Status::ok();
}

// Service mode's dynamic agents; without the service nothing ever changes.
Status Runtime::probe_agents(int* changed) {
  if (!changed) return make_error(Code::ERR_INVALID_ARG, "cairn_probe_agents: changed is NULL");
  *changed = 0;
  auto* service = dynamic_cast<pipeline::ServiceFlusher*>(flusher_.get());
  if (!service) return Status::ok();
  bool c = false;
  CAIRN_TRY(service->probe_agents(&c));
  *changed = c ? 1 : 0;
  return Status::ok();
}

Status Runtime::should_exit(int* flag) {
  if (!flag) return make_error(Code::ERR_INVALID_ARG, "cairn_should_exit: flag is NULL");
  int need = 0, exit = 0;
  CAIRN_TRY(policy_observe(&need, &exit));
  *flag = exit;
  return Status::ok();
}

// Every rank observes; a max-allreduce makes the decision the same everywhere. The computation
// since the last checkpoint and the measured checkpoint cost are agreed in the same reduction (the
// largest of any rank), so every rank computes the same interval from the same inputs.
Status Runtime::policy_observe(int* need, int* exit) {
  drive_pipeline();
  double now = now_seconds();
  double halt = rank_ != 0 ? 0.0 : observe_halt_file(layout_.halt_file(), {now, cfg_.end_time, cfg_.halt_seconds,
      next_version_ - 1, versions_taken_ > 0 ? last_checkpoint_time_ : 0.0});
  // A migration request (`cairn migrate`, docs/migration.md): rank 0 looks for the file, one stat().
  double migrate = rank_ == 0 && fs::exists(layout_.migrate_file()) ? 1.0 : 0.0;
  double local[6] = {policy::caught_signal() != 0 ? 1.0 : 0.0, halt,
                     policy::end_time_reached(cfg_.end_time, cfg_.halt_seconds, now) ? 1.0 : 0.0,
                     now - last_checkpoint_time_, checkpoint_cost_.value(), migrate};
  double all[6];
  CAIRN_MPI(MPI_Allreduce(local, all, 6, MPI_DOUBLE, MPI_MAX, app_comm_));
  double interval = cfg_.interval_seconds;
  if (cfg_.interval == IntervalMode::automatic) {
    interval = policy::auto_interval(all[4], cfg_.mtbf_seconds, cfg_.interval_seconds);
    if (rank_ == 0 && checkpoint_cost_.samples() != auto_interval_logged_) {
      auto_interval_logged_ = checkpoint_cost_.samples();
      LOG_INFO("interval auto: checkpoint cost %.3f s (mean of the last %d, slowest rank), MTBF %.0f s: "
               "next checkpoint after %.1f s of computation",
               all[4], static_cast<int>(std::min<uint64_t>(auto_interval_logged_, policy::CheckpointCostAverage::kWindow)),
               cfg_.mtbf_seconds, interval);
    }
  }
  policy::Observation o{all[0] != 0, all[1] != 0, all[2] != 0, policy::interval_due(interval, all[3])};
  o.halt_file = all[1] == static_cast<int>(policy::HaltAction::checkpoint_then_exit);
  o.halt_exit_now = all[1] == static_cast<int>(policy::HaltAction::exit_now);
  o.migrate = all[5] != 0;
  if (o.exit_requested() && !exit_requested_) {
    exit_requested_ = true;
    checkpoint_since_request_ = false;
    // Only a migration alone leaves the final flush to the launcher (the snapshots move to the spare).
    exit_for_migration_ = o.migrate && !o.signal && !o.halt_file && !o.end_time;
    if (rank_ == 0) LOG_WARN("exit requested by %s: checkpoint at the next chance, then exit", policy::describe(o).c_str());
    events_->exit_requested(exit_for_migration_ ? "migrate" : policy::describe(o));
  }
  o.signal = o.signal || exit_requested_;
  auto d = policy::decide(o, checkpoint_since_request_);
  *need = d.need_checkpoint;
  *exit = d.should_exit;
  return Status::ok();
}

}  // namespace cairn

namespace cairn {

void Runtime::drive_pipeline() {
  if (mpi_in_worker_) return;
  double t0 = now_seconds();
  pipeline_->drive();
  pipeline_seconds_on_app_ += now_seconds() - t0;
}

Status Runtime::wait_all() {
  double t0 = now_seconds();
  Status st = pipeline_->wait_all();
  pipeline_seconds_on_app_ += now_seconds() - t0;  // the application waited on checkpoints
  return st;
}

}  // namespace cairn
