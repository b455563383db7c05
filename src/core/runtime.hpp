// The per-process runtime behind the C API: protected regions, the API calls, restart. Each version is
// handed to the pipeline (src/pipeline), which moves it through L1 -> L2 -> L3 in the background. One
// instance between cairn_init and cairn_finalize. Threading model in docs/architecture.md ("Background
// progress and MPI threads").
#pragma once

#include <mpi.h>

#include "cairn/cairn.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/cache_store.hpp"
#include "base/config.hpp"
#include "base/job_state.hpp"
#include "base/layout.hpp"
#include "base/clock.hpp"
#include "base/manifest.hpp"
#include "base/status.hpp"
#include "cache/snapshot.hpp"
#include "pfs/l3_placement.hpp"
#include "pipeline/embedded_flusher.hpp"
#include "pipeline/job_events.hpp"
#include "pipeline/mpi/set_protector.hpp"
#include "pipeline/mpi/team_mpi.hpp"
#include "pipeline/pipeline.hpp"
#include "policy/interval.hpp"
#include "redundancy/placement.hpp"
#include "redundancy/set_code.hpp"

namespace cairn {

struct Region {
  std::string name;
  void* ptr = nullptr;
  size_t count = 0;
  int type = 0;
  uint32_t elem_size = 1;
  uint32_t dist_kind = 0;               // cairn_dist_kind; 0 = private
  std::vector<uint64_t> dist_params;    // redist::Distribution::to_params()
  cairn_resize_fn resize = nullptr;
  void* resize_user = nullptr;
  uint64_t bytes() const { return static_cast<uint64_t>(count) * elem_size; }
};

// A version's snapshot stream of one old rank, as held by this process during a reshaping restart or
// a live redistribution.
struct HeldStream {
  int old_rank = 0;
  Manifest manifest;
  const uint8_t* data = nullptr;
  std::vector<uint8_t> storage;  // when the bytes live here (live packing, L2 rebuild)
  std::shared_ptr<MappedFile> map;  // when they live in a rank's L1 slot on this node, or staging memory (L3)
  std::string red_path;             // that slot's redundancy data (L2 rebuild across rank counts)
  bool self_placed = false;         // its pieces for the hosting process are already in the regions
};

struct ReshapeWant;  // core/reshape_fit.hpp

struct RestartChoice {
  uint64_t version = 0;
  int level = 0;  // enum cairn_level
  int p_old = 0;  // ranks that wrote the version, when not this job's count (a reshaping restart)
  std::vector<int> host_of_old;
  std::vector<struct HeldStream> held;
  Manifest manifest;
  const uint8_t* data = nullptr;       // verified snapshot stream (slot or staging buffer)
  std::shared_ptr<MappedFile> staging; // holds L3 data (anonymous memory)
  bool in_place = false;               // the bytes are already in the regions, verified (read in place, or
                                       // streamed from the L1 hosts)
  bool in_l3 = false;                  // the version is also committed in L3
};

class Runtime {
 public:
  static Runtime* instance();
  static Status create(MPI_Comm comm, const char* config_path);
  static Status destroy();
  // After a process left the job in cairn_redistribute: stop without any collective.
  static void abandon();

  // Memory API
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
  Status restart_available(int* available, int* version);
  Status restart();
  void restart_level(int* version, int* level) const;

  // File API
  Status route_file(const char* name, char* out, size_t len);
  Status start_output(const char* label, int flags);
  Status complete_output(int valid);
  Status have_restart(int* available, char* label, size_t len);
  Status start_restart(char* label, size_t len);
  Status complete_restart(int valid);

  // Policy
  Status need_checkpoint(int* flag);
  Status should_exit(int* flag);

  int rank() const { return rank_; }

 private:
  Runtime() = default;
  Status init(MPI_Comm comm, const char* config_path);
  Status choose_snapshot();
  Status finalize();

  // setup
  Status compute_placement();
  Status agree_next_version();
  Status setup_l3_options();
  // The pipeline and its levels for the current communicator (bind_comm); torn down by release_comms.
  void start_pipeline();
  void stop_pipeline();

  // checkpoint path (app thread)
  uint64_t memory_region_entries(std::vector<RegionEntry>* out) const;
  Status take_version(const std::string& label, bool have_files, const Status& failed_before = Status::ok());
  // complete_output's body; vote = false for cairn_checkpoint, where every rank passes valid = 1.
  Status finish_output(int valid, bool vote);
  // Run the pipeline's collective stages that wait for this thread (funneled MPI), timed as checkpoint
  // cost for interval = auto.
  void drive_pipeline();

  // restart
  Status find_restart(RestartChoice* out);
  Status try_l1_l2(uint64_t v, const std::vector<uint64_t>& flags, RestartChoice* out, bool* handled);
  Status try_l3(uint64_t v, RestartChoice* out);
  Status apply_restart(const RestartChoice& c);
  Status fast_restart_l1(bool* done);
  // Restart from a version written by another number of ranks (reshape.cpp).
  // Only versions in (above, at_most] are tried.
  Status find_reshaped(RestartChoice* out, std::string* why, uint64_t above, uint64_t at_most);
  // *streamed: the regions were filled here (reshaped_from_l1_streamed), nothing is held to move.
  Status reshaped_from_l1(uint64_t v, int p_old, const std::vector<std::vector<uint64_t>>& holders,
                          std::vector<HeldStream>* held, bool* streamed);
  // cairn_restart alone, when every rank's regions already have their new size and the plan has few
  // enough pieces (streamable): the hosts read the old slots chunk by chunk and send each verified
  // chunk's pieces to their new owners while they read on (reshape_stream.cpp).
  Status reshaped_from_l1_streamed(uint64_t v, int p_old, const std::vector<int>& host_of_old,
                                   const std::vector<ReshapeWant>& wants);
  Status reshaped_from_l3(uint64_t v, int p_old, std::vector<HeldStream>* held);
  // cairn_restart alone, when every rank's regions already have their new size: each rank reads its own
  // pieces straight from the old ranks' files into its regions (no hosts, no move). *done: it did.
  Status reshaped_from_l3_direct(uint64_t v, int p_old, bool* done);
  Status reshaped_from_l2(uint64_t v, int p_old, const std::vector<std::vector<uint64_t>>& holders,
                          const std::vector<bool>& prot, std::vector<HeldStream>* held, std::vector<int>* host_of_old);
  // Move every distributed region from a p_old layout (streams held by processes of `comm`) to the
  // layout of the processes with new_rank_of[comm rank] >= 0. Collective over comm.
  Status move_regions(MPI_Comm comm, int p_old, const std::vector<int>& host_of_old,
                      const std::vector<int>& new_rank_of, const std::vector<HeldStream>& held, bool restart);
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
  FaultInjector inject_;
  redundancy::SetPlacement placement_;
  std::vector<std::string> node_of_rank_;
  l3::WriteOptions l3_base_;  // from the config and this rank's place (setup_l3_options)
  std::optional<redundancy::SetCode> code_;

  // the pipeline and its levels (start_pipeline)
  std::unique_ptr<Snapshotter> snapshot_;
  std::unique_ptr<pipeline::MpiTeam> team_;
  std::unique_ptr<pipeline::SetProtector> protector_;
  std::unique_ptr<pipeline::EmbeddedFlusher> flusher_;
  std::unique_ptr<pipeline::JobEvents> events_;
  std::unique_ptr<pipeline::Pipeline> pipeline_;

  // regions and versions
  std::map<std::string, Region> regions_;
  uint64_t next_version_ = 1;
  bool in_output_ = false;
  std::string output_label_;
  std::map<std::string, std::string> routed_;  // name -> path, current output
  uint64_t versions_taken_ = 0;                // by this process since cairn_init

  // restart
  std::optional<RestartChoice> pending_;
  bool restart_in_place_ = false;  // cairn_restart's own search: restart paths may read into the regions
  bool in_restart_ = false;
  uint64_t restored_version_ = 0;
  int restored_level_ = 0;
  std::string restored_label_;
  pipeline::Marks before_restart_;  // the pipeline's marks, restored if the restart is rejected
  Status output_failure_;  // a local failure in cairn_start_output, voted invalid at complete
  std::vector<uint64_t> rejected_;             // versions a rank declared invalid at restart
  std::map<std::string, std::string> restored_files_;

  // policy
  double last_checkpoint_time_ = 0;
  // interval = auto: what checkpoints cost the application thread: take_version from entry to return,
  // plus the time since the previous one spent running pipeline stages in cairn_need_checkpoint and
  // cairn_should_exit (funneled MPI) or waiting in cairn_wait.
  policy::CheckpointCostAverage checkpoint_cost_;
  double pipeline_seconds_on_app_ = 0;
  uint64_t auto_interval_logged_ = 0;  // cost samples when the interval was last logged
  bool exit_requested_ = false;
  bool checkpoint_since_request_ = false;
  bool exit_for_migration_ = false;  // the exit request came from `cairn migrate` alone

};

}  // namespace cairn
