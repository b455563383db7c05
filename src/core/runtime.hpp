// The per-process runtime behind the C API: its set-up, the API calls, restart. Each version is
// handed to the pipeline (src/pipeline), which moves it through L1 -> L2 -> L3 in the background. One
// instance between cairn_init and cairn_finalize. Threading model in docs/architecture.md ("Background
// progress and MPI threads").
#pragma once

#include <mpi.h>

#include "cairn/cairn.h"

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cache/cache_store.hpp"
#include "base/background_thread.hpp"
#include "base/config.hpp"
#include "base/job_state.hpp"
#include "base/layout.hpp"
#include "base/clock.hpp"
#include "base/manifest.hpp"
#include "base/prefix_owner.hpp"
#include "base/status.hpp"
#include "cache/snapshot.hpp"
#include "core/regions.hpp"
#include "device/device_snapshot.hpp"
#include "l3/l3_placement.hpp"
#include "flush/embedded_flusher.hpp"
#include "pipeline/job_events.hpp"
#include "redundancy/exchange/set_protector.hpp"
#include "pipeline/mpi/team_mpi.hpp"
#include "pipeline/pipeline.hpp"
#include "policy/observer.hpp"
#include "redistribute/exec/reshaper.hpp"
#include "redundancy/exchange/job_sets.hpp"
#include "restore/mpi/set_rebuild.hpp"
#include "redundancy/set_code.hpp"

namespace cairn {

struct RestartChoice {
  uint64_t version = 0;
  int level = 0;  // enum cairn_level
  int p_old = 0;  // ranks that wrote the version, when not this job's count (a reshaping restart)
  std::vector<int> host_of_old;
  std::vector<HeldStream> held;
  Manifest manifest;
  const uint8_t* data = nullptr;       // verified snapshot stream (slot or staging buffer)
  std::shared_ptr<MappedFile> staging; // holds L3 data (anonymous memory)
  std::shared_ptr<VersionView> view;   // a version with files, read where it lies (L1)
  bool files_in_place = false;         // its files are its L1 copy in this rank's cache, verified: route there
  bool in_place = false;               // the bytes are already in the regions, verified (read in place, or
                                       // streamed from the L1 hosts)
  bool in_l3 = false;                  // the version is also committed in L3
};

// What cairn_restart will restore, decided from the ranks' inventories alone (restart_inplace.cpp).
struct RestartPlan {
  uint64_t version = 0;
  int level = 0;                // enum cairn_level
  bool in_l3 = false;           // committed in L3 too
  std::string label;
  std::vector<uint64_t> flags;  // every rank's inventory flags for the version (restore/inventory.hpp)
  int p_old = 0;                // a version of another rank count (Reshaper::probe): cairn_restart searches
};

namespace restore {
struct RestartInventory;
}

class Runtime {
 public:
  static Runtime* instance();
  static Status create(MPI_Comm comm, const char* config_path);
  static Status destroy();
  // After a process left the job in cairn_redistribute: stop without any collective.
  static void abandon();

  // Memory API (the table and its checks: core/regions.hpp)
  Status protect(const char* name, void* ptr, size_t count, int type);
  Status protect_distributed(const char* name, void* ptr, size_t count, int type, const cairn_distribution* d);
  Status local_count(const cairn_distribution* d, size_t* count) const;
  Status set_resize(const char* name, cairn_resize_fn fn, void* user);
  // Live redistribution onto new_comm (see cairn.h). On return `*left` tells whether this process
  // left the job (its runtime is then to be destroyed).
  Status redistribute(MPI_Comm new_comm, bool* left);
  Status unprotect(const char* name);
  Status checkpoint();
  Status wait_all();
  // The restart calls (restart.cpp) write the job history's restart events (events_).
  Status restart_available(int* available, int* version);
  Status restart();
  void restart_level(int* version, int* level) const;

  // Device memory (docs/gpu.md; restart_device.cpp)
  Status device_stream(void* stream);
  Status device_copied_event(void** event);
  Status device_wait_copied(void* stream);

  // File API
  Status route_file(const char* name, char* out, size_t len);
  Status start_output(const char* label, int flags);
  Status complete_output(int valid);
  Status have_restart(int* available, char* label, size_t len);
  Status start_restart(char* label, size_t len);
  Status complete_restart(int valid);
  // Dataset management (delete_versions.cpp)
  Status delete_versions(const char* label, int flags);
  Status local_dir(char* out, size_t len);

  // Policy (what decides: policy/observer.hpp)
  Status need_checkpoint(int* flag);
  Status probe_agents(int* changed);
  Status should_exit(int* flag);

  int rank() const { return rank_; }
  struct DeviceStage;  // a device region during a restart (restart_device.cpp)

 private:
  Runtime() = default;
  Status init(MPI_Comm comm, const char* config_path);
  Status choose_snapshot();
  Status finalize();

  // setup
  Status agree_next_version();
  Status setup_l3_options();
  // Rank 0 claims the prefix for this job (one job per prefix, base/prefix_owner.hpp); agreed by all.
  // A spawned process alone on its communicator joins the job that spawned it (cairn_redistribute):
  // it claims nothing; after the redistribution the new rank 0 holds the job's claim.
  Status claim_prefix();
  // rank 0: acquire for launch_id_; cache_has_versions: some rank's node cache holds versions already.
  Status hold_prefix(bool cache_has_versions = false);
  // The pipeline and its levels for the current communicator (bind_comm); torn down by release_comms.
  void start_pipeline();
  void stop_pipeline();

  // Ask the cache to prepare every slot for the regions protected now, in the background.
  void prepare_slots();

  // checkpoint path (app thread)
  Status take_version(const std::string& label, bool have_files, const Status& failed_before = Status::ok());
  // Run the pipeline's collective stages that wait for this thread (funneled MPI), timed as checkpoint
  // cost for interval = auto.
  void drive_pipeline();

  // restart: the plan and its execution in place (restart_inplace.cpp)
  Status plan_restart();  // sets plan_, or pending_ when the full search had to run
  // *done: restored; else *unsuited: the plan does not apply to these regions or this version (files), and
  // the full search takes over without a warning.
  Status carry_out(const RestartPlan& plan, bool* done, bool* unsuited);
  Status restore_through_agents(const RestartPlan& plan, bool* done);  // service_restart = agents
  Status read_slot_into_regions(const L1Record& rec, int threads, double* seconds, std::string* how = nullptr);
  Status restart_read_threads(int* threads);
  Status read_l1_in_place(const RestartPlan& plan, bool* done, bool* unsuited);
  Status restore_l2_in_place(const RestartPlan& plan, bool* done, bool* unsuited);
  // mapped: a survivor's slot and redundancy files as the restart's exchange mapped them, taken over (and
  // unmapped on the thread, off the application's path); else they are mapped again.
  void start_reprotect(const restore::SetRebuild& set, uint32_t my_slot, std::shared_ptr<restore::SetBuffers> mapped);
  void write_back(const restore::SetRebuild& set, int slot, const uint8_t* data, const uint8_t* red, double t0);
  // The re-protection or write-back an L2 restart set up (write_back_work_) starts on its thread once
  // cairn_restart has nothing left to do, so that it does not share the application's core before then.
  void start_write_back();
  void finish_write_back();  // before anything else uses the cache
  // restart: the full search (restart_search.cpp)
  Status gather_inventory(restore::RestartInventory* inv);
  Status pass_over_versions(const restore::RestartInventory& inv);  // the index and restart_version: into rejected_
  Status l2_can_rebuild(const std::vector<int>& good, const std::vector<uint64_t>& flags, const std::string& l1_text,
                        bool* my_set_lost) const;
  Status find_restart(RestartChoice* out);
  Status start_over(const restore::RestartInventory& inv, const Status& unrecoverable);  // if_unrecoverable = start_over
  std::set<uint64_t> known_versions(const restore::RestartInventory& inv) const;  // rank 0's view
  Status reject_from_rank0(std::vector<uint64_t> over);
  Result<restore::SetRebuild> share_my_set(uint64_t v, const std::vector<int>& good);
  Status try_l1_l2(uint64_t v, const std::vector<uint64_t>& flags, RestartChoice* out, bool* handled);
  Status try_l3(uint64_t v, RestartChoice* out);
  // restart into device regions (restart_device.cpp): the restart writes host staging buffers in their
  // place, copied into the device once the version is verified
  Status stage_device_regions(std::vector<std::unique_ptr<DeviceStage>>* stages);
  Status unstage_device_regions(std::vector<std::unique_ptr<DeviceStage>>* stages, const Status& restarted);
  Status restart_all_regions();  // cairn_restart's body: device regions staged around restart_regions
  Status restart_regions();      // on host memory
  // The L1 read with device regions staged: host regions as read_slot_into_regions, device regions verified
  // piece by piece and copied into the device straight from the slot (no staging).
  Status read_slot_into_device(const L1Record& rec, double* seconds);
  // where a region's pointer lives: host or device (cairn_protect)
  Status classify_region(const char* name, void* ptr, uint64_t bytes, bool* device, void** context);
  // restoring (restart.cpp)
  Status apply_restart(const RestartChoice& c);
  void restored(uint64_t v, int level, const std::string& label, bool in_l3);
  const std::string& pending_label() const;
  // Restart from a version written by another number of ranks (redistribute/exec/reshaper.hpp).
  // Only versions in (above, at_most] are tried.
  Status find_reshaped(RestartChoice* out, std::string* why, uint64_t above, uint64_t at_most);
  // What the reshape executors see of this job.
  ReshapeJob reshape_job() const;
  Status bind_comm(MPI_Comm comm);
  void release_comms();

  Status policy_observe(int* need, int* exit);

  // identity
  MPI_Comm app_comm_ = MPI_COMM_NULL;   // app-thread collectives
  MPI_Comm bg_comm_ = MPI_COMM_NULL;    // pipeline agreements (worker thread when MPI allows)
  MPI_Comm set_comm_ = MPI_COMM_NULL;   // this rank's L2 set
  int rank_ = 0, nranks_ = 1;
  int thread_level_ = MPI_THREAD_SINGLE;
  bool mpi_in_worker_ = false;
  Config cfg_;
  Layout layout_;
  CacheStore cache_;
  JobState state_;
  PrefixLease lease_;       // rank 0's hold on the prefix
  std::string launch_id_;   // this launch of the job, the same on every rank
  FaultInjector inject_;
  redundancy::SetPlacement placement_;
  std::vector<std::string> node_of_rank_;
  l3::WriteOptions l3_base_;  // from the config and this rank's place (setup_l3_options)
  std::optional<redundancy::SetCode> code_;

  // the pipeline and its levels (start_pipeline)
  std::unique_ptr<Snapshotter> snapshot_;
  device::DeviceSnapshotter* device_snapshot_ = nullptr;  // snapshot_ itself: device regions and the host's
  const device::Driver* driver_ = nullptr;                  // loaded at the first device region
  std::vector<std::unique_ptr<DeviceStage>>* staged_ = nullptr;  // during cairn_restart with device regions
  uint64_t device_direct_version_ = 0;  // the version read_slot_into_device put into the device buffers
  std::unique_ptr<pipeline::MpiTeam> team_;
  std::unique_ptr<redundancy::SetProtector> protector_;
  std::unique_ptr<pipeline::Flusher> flusher_;  // embedded, or service mode's (core/flusher_choice)
  std::unique_ptr<pipeline::JobEvents> events_;
  std::unique_ptr<pipeline::Pipeline> pipeline_;

  // regions and versions
  ProtectedRegions regions_;
  uint64_t next_version_ = 1;
  bool in_output_ = false;
  std::string output_label_;
  std::map<std::string, std::string> routed_;  // name -> path, current output
  uint64_t versions_taken_ = 0;                // by this process since cairn_init

  // restart
  std::optional<RestartChoice> pending_;  // found by the full search, to be applied
  std::optional<RestartPlan> plan_;       // planned by cairn_restart_available, to be carried out
  BackgroundThread write_back_;           // a version rebuilt at L2 going back into this rank's cache
  std::function<void()> write_back_work_;  // its work, set up by the restart and not started yet
  bool restart_in_place_ = false;  // cairn_restart's own search: restart paths may read into the regions
  bool in_restart_ = false;
  uint64_t restored_version_ = 0;
  int restored_level_ = 0;
  std::string restored_label_;
  pipeline::Marks before_restart_;  // the pipeline's marks, restored if the restart is rejected
  Status output_failure_;  // a local failure in cairn_start_output, voted invalid at complete
  std::vector<uint64_t> rejected_;             // versions a rank declared invalid at restart
  std::map<std::string, std::string> restored_files_;

  // policy: what cairn_need_checkpoint and cairn_should_exit decide from
  policy::Observer observer_;
  // Seconds the application thread spent running pipeline stages in cairn_need_checkpoint and
  // cairn_should_exit (funneled MPI) or waiting in cairn_wait since the last version: part of its
  // checkpoint cost for interval = auto.
  double pipeline_seconds_on_app_ = 0;

};

}  // namespace cairn
