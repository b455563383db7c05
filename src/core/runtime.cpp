// The runtime: set-up, taking a version (the application's blocking path), and the calls handed on: the
// region calls to core/regions, the policy calls to policy/observer, the L2 sets to
// redundancy/exchange/job_sets. The progress engine is in pipeline.cpp, restart in restart.cpp, the file
// API in file_api.cpp.
#include "core/runtime.hpp"

#include "core/flusher_choice.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>

#include "base/fsutil.hpp"
#include "base/launch_env.hpp"
#include "base/log.hpp"
#include "cache/cache_store.hpp"
#include "cache/snapshot_mode.hpp"
#include "mpi/mpi_util.hpp"
#include "l3/l3_store.hpp"
#include "policy/exit_policy.hpp"
#include "redistribute/distribution.hpp"

namespace cairn {
namespace {
std::unique_ptr<Runtime> g_runtime;
}  // namespace

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
  if (rank_ == 0 && end_time == 0) end_time = policy::end_time_from_slurm();
  CAIRN_MPI(MPI_Bcast(&end_time, 1, MPI_LONG_LONG, 0, app_comm_));
  cfg_.end_time = end_time;
  if (!policy::install_signal_handlers(policy::parse_exit_signal(cfg_.exit_signal)) && rank_ == 0)
    LOG_WARN("exit_signal %s: a handler is already installed (by the application, or by the MPI library: "
             "MPICH takes SIGUSR1); cairn does not catch it. Choose another signal with exit_signal "
             "(CAIRN_EXIT_SIGNAL), e.g. USR2",
             cfg_.exit_signal.c_str());
  observer_.compute_from(now_seconds());
  return Status::ok();
}

// copy or copy-on-write (the snapshot knob), per rank: rank 0 says which and why, and how many ranks
// differ from it (nodes may differ in kernel or devices); every rank's reason is at debug level.
Status Runtime::choose_snapshot() {
  // auto weighs the CPUs this rank may use against the ranks sharing its node (the copier needs a core).
  HostShare host;
  CAIRN_TRY(host_share(app_comm_, &host));
  SnapshotChoice snap = choose_snapshotter(cfg_.snapshot, !cfg_.service.empty(), "/sys", this_process_cpus(host.ranks),
                                           cfg_.l1_incremental != L1Incremental::off);
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
  // A task that is alone in MPI_COMM_WORLD although the launcher started several (base/launch_env.hpp)
  // must not claim the prefix: its siblings would each claim it as the same run.
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::string mismatch = parent == MPI_COMM_NULL ? singleton_mismatch(world, launched_tasks(process_env())) : "";
  if (!mismatch.empty()) return make_error(Code::ERR_MPI, "%s", mismatch.c_str());
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
  redundancy::JobSets sets;
  Status placed = redundancy::place_job_sets(app_comm_, bg_comm_, cfg_.node, cfg_.redundancy, cfg_.set_size,
                                             cfg_.rs_parity, &sets);
  node_of_rank_ = std::move(sets.node_of_rank);
  placement_ = std::move(sets.placement);
  set_comm_ = sets.set_comm;
  code_ = std::move(sets.code);
  CAIRN_TRY(placed);
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
    protector_ = std::make_unique<redundancy::SetProtector>(
        set_comm_, placement_.members[static_cast<size_t>(placement_.my_set)], &*code_, &cache_, cfg_.exchange_chunk);
  pipeline::PipelineConfig pc;
  pc.layout = layout_;
  pc.keep_flushed = cfg_.keep_flushed;
  pc.recycle_flushed = cfg_.recycle_flushed;
  pc.l2_every = cfg_.l2_every;
  pc.mpi_in_worker = mpi_in_worker_;
  pc.l3 = l3_base_;
  pc.inject = &inject_;
  pc.l1_incremental = cfg_.l1_incremental;
  pipeline_ = std::make_unique<pipeline::Pipeline>(pc, &cache_, team_.get(), protector_.get(), nullptr, events_.get(),
                                                   snapshot_.get());
  pipeline::Pipeline* p = pipeline_.get();
  auto flusher = choose_flusher(cfg_, layout_, bg_comm_, [p] { return p->l3_options(); });
  if (flusher) {
    flusher_ = std::move(*flusher);
  } else {
    LOG_ERROR("service mode off: %s", flusher.status().message().c_str());
    flusher_ = std::make_unique<flush::EmbeddedFlusher>(layout_, [p] { return p->l3_options(); });
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
  o.full_every = cfg_.full_every;
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
  if (observer_.exit_for_migration() && cfg_.flush_on_finalize && m.local > m.flushed) {
    if (rank_ == 0)
      LOG_INFO("finalize: version %llu stays in the caches: the launcher migrates it (no flush to L3)",
               static_cast<unsigned long long>(m.local));
  } else if (cfg_.flush_on_finalize && m.local > m.flushed) {
    Status fl = pipeline_->flush_now(m.local);
    if (!fl.is_ok() && st.is_ok()) st = fl;
  }
  stop_pipeline();
  policy::restore_signal_handlers();
  events_->finalized(st.is_ok() ? "ok" : st.message(), versions_taken_, observer_.exit_requested());
  lease_.release();
  release_comms();
  return st;
}

Status Runtime::protect(const char* name, void* ptr, size_t count, int type) {
  CAIRN_ASSIGN_OR_RETURN(elem, ProtectedRegions::check(name, ptr, count, type));
  bool device = false;
  void* context = nullptr;
  CAIRN_TRY(classify_region(name, ptr, static_cast<uint64_t>(count) * elem, &device, &context));
  // Protecting a name again (a resized buffer): the old one may be freed next, so a copy-on-write
  // snapshot in flight must be done reading it, and its write tracking must let go of it.
  if (regions_.contains(name)) {
    const auto& old = regions_.table().at(name);
    if (old.ptr != ptr || old.bytes() != static_cast<uint64_t>(count) * elem)
      snapshot_->forget(old.ptr, old.bytes());
    else
      snapshot_->wait_copied();
  }
  regions_.put(name, ptr, count, type, elem, device, context);
  prepare_slots();
  return Status::ok();
}

Status Runtime::protect_distributed(const char* name, void* ptr, size_t count, int type, const cairn_distribution* d) {
  CAIRN_ASSIGN_OR_RETURN(dist, ProtectedRegions::check_distribution(name, count, d, rank_, nranks_));
  CAIRN_TRY(protect(name, ptr, count, type));  // keeps the region's resize callback
  regions_.distribute(name, dist);
  return Status::ok();
}

Status Runtime::local_count(const cairn_distribution* d, size_t* count) const {
  return ProtectedRegions::local_count(d, rank_, nranks_, count);
}

Status Runtime::set_resize(const char* name, cairn_resize_fn fn, void* user) { return regions_.set_resize(name, fn, user); }

// The first checkpoints then find their slots made and faulted in, as the later ones do: the cost of the
// page allocations moves off the application's blocking path (docs/architecture.md, "What an L1 slot is").
void Runtime::prepare_slots() {
  if (!pipeline_) return;
  std::vector<RegionEntry> entries;
  uint64_t total = regions_.memory_entries(&entries);
  uint64_t red = placement_.enabled && code_ ? code_->redundancy_len(total) : 0;
  pipeline_->prepare_slots(total, red);
}

Status Runtime::unprotect(const char* name) {
  CAIRN_TRY(regions_.check_unprotect(name));
  // The application may free the region once this returns: a copy-on-write snapshot in flight must be
  // done reading it, and its write tracking must let go of it.
  const auto& old = regions_.table().at(name);
  snapshot_->forget(old.ptr, old.bytes());
  regions_.erase(name);
  return Status::ok();
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
    uint64_t off = regions_.memory_entries(&m.regions);
    memory = regions_.sources(m.regions);
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
  const double t_return = now_seconds();
  LOG_DEBUG("cairn_checkpoint %llu: %.3f ms, of which before the pipeline %.3f (write-back, description)",
            static_cast<unsigned long long>(v), (t_return - t_enter) * 1e3, (t_described - t_enter) * 1e3);
  observer_.checkpoint_taken(t_return - t_enter + pipeline_seconds_on_app_, t_return);
  pipeline_seconds_on_app_ = 0;
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
  bool c = false;
  CAIRN_TRY(flusher_->probe_agents(&c));
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

// Every rank observes; a max-allreduce makes the decision the same everywhere (policy/observer.hpp).
Status Runtime::policy_observe(int* need, int* exit) {
  drive_pipeline();
  policy::Observer::Reading local = observer_.local(cfg_, layout_, rank_ == 0, next_version_ - 1, versions_taken_ > 0,
                                                    now_seconds());
  policy::Observer::Reading all;
  CAIRN_MPI(MPI_Allreduce(local.data(), all.data(), static_cast<int>(all.size()), MPI_DOUBLE, MPI_MAX, app_comm_));
  std::string request;
  policy::Decision d = observer_.decide(all, cfg_, rank_ == 0, &request);
  if (!request.empty()) events_->exit_requested(request);
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
