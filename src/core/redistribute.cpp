// Live redistribution (cairn_redistribute): move every distributed region from the layout over the
// current communicator to the layout over a new one, then make the new one cairn's communicator.
// The data moves once, straight from the ranks that hold it to the ranks that will (move_regions).
#include <algorithm>
#include <cstring>

#include "base/log.hpp"
#include "mpi/mpi_util.hpp"
#include "core/runtime.hpp"

namespace cairn {

Status Runtime::redistribute(MPI_Comm new_comm, bool* left) {
  *left = false;
  if (in_output_ || in_restart_)
    return make_error(Code::ERR_SEQUENCE, "cairn_redistribute: an output or restart is open (complete it first)");
  for (const auto& [name, context] : regions_.on_device())
      return make_error(Code::ERR_NOT_SUPPORTED, "cairn_redistribute: region '%s' is device (GPU) memory: a live "
                        "redistribution moves host memory only (a restart on the new rank count restores device "
                        "regions)", name.c_str());
  // The collective runs over whichever communicator contains the other (checked locally: does every
  // process of the current communicator appear in new_comm?).
  bool grow = false;
  int lowest = -1;  // the lowest rank in new_comm of cairn's current communicator
  if (new_comm != MPI_COMM_NULL) {
    MPI_Group cur, nxt;
    CAIRN_MPI(MPI_Comm_group(app_comm_, &cur));
    CAIRN_MPI(MPI_Comm_group(new_comm, &nxt));
    std::vector<int> in(static_cast<size_t>(nranks_)), out(static_cast<size_t>(nranks_));
    for (int r = 0; r < nranks_; ++r) in[r] = r;
    CAIRN_MPI(MPI_Group_translate_ranks(cur, nranks_, in.data(), nxt, out.data()));
    grow = std::none_of(out.begin(), out.end(), [](int r) { return r == MPI_UNDEFINED; });
    if (grow) lowest = *std::min_element(out.begin(), out.end());
    MPI_Group_free(&cur);
    MPI_Group_free(&nxt);
  }
  MPI_Comm unite = grow ? new_comm : app_comm_;
  int me = 0, size = 0;
  MPI_Comm_rank(unite, &me);
  MPI_Comm_size(unite, &size);

  // Who was whom: a process is an old member unless it joins and a new member unless it leaves.
  // Growing, the old communicator is the one that holds rank 0 of new_comm (the existing ranks merge
  // with high = 0); the processes of the other (one-rank) communicators join.
  bool joiner = grow && lowest != 0;
  int mine[3] = {joiner ? -1 : rank_, -1, joiner ? 0 : nranks_};
  if (new_comm != MPI_COMM_NULL) MPI_Comm_rank(new_comm, &mine[1]);
  std::vector<int> roles(3 * static_cast<size_t>(size));
  CAIRN_MPI(MPI_Allgather(mine, 3, MPI_INT, roles.data(), 3, MPI_INT, unite));
  int p_old = 0;
  bool same_size = true;
  std::vector<int> new_rank_of(static_cast<size_t>(size));
  for (int u = 0; u < size; ++u) {
    p_old += roles[3 * u] >= 0;
    new_rank_of[u] = roles[3 * u + 1];
  }
  for (int u = 0; u < size; ++u)
    if (roles[3 * u] >= 0 && roles[3 * u + 2] != p_old) same_size = false;
  std::vector<int> host_of_old(static_cast<size_t>(p_old), -1);
  for (int u = 0; u < size; ++u)
    if (roles[3 * u] >= 0 && roles[3 * u] < p_old) host_of_old[static_cast<size_t>(roles[3 * u])] = u;
  Status roles_ok = p_old >= 1 && same_size && std::count(host_of_old.begin(), host_of_old.end(), -1) == 0
                        ? Status::ok()
                        : make_error(Code::ERR_INVALID_ARG,
                                     "cairn_redistribute: the processes do not form one job; with a larger new_comm, "
                                     "every process of cairn's communicator must be in it, and rank 0 of new_comm must be one of them "
                                     "(merge with high = 0 on the existing ranks)");
  CAIRN_TRY(agree(unite, roles_ok));

  // Old members finish their background work (collective over the old communicator) and pack their
  // regions as a snapshot stream: move_regions reads only from that copy, so buffers can be resized.
  std::vector<HeldStream> held;
  if (!joiner) {
    CAIRN_TRY(wait_all());
    HeldStream h;
    h.old_rank = rank_;
    Manifest& m = h.manifest;
    m.rank = static_cast<uint32_t>(rank_);
    m.nranks = static_cast<uint32_t>(nranks_);
    uint64_t off = regions_.memory_entries(&m.regions);
    m.total_size = off;
    h.storage.resize(std::max<uint64_t>(off, 1));
    for (const auto& e : m.regions)
      if (e.size) memcpy(h.storage.data() + e.offset, regions_.table()[e.name].ptr, e.size);
    m.chunk_size = static_cast<uint32_t>(cfg_.chunk_size);
    m.chunk_hashes = chunk_hashes(h.storage.data(), off, m.chunk_size);
    h.data = h.storage.data();
    held.push_back(std::move(h));
  }
  CAIRN_TRY(move_regions(unite, regions_.table(), p_old, host_of_old, new_rank_of, held, /*restart=*/false));
  held.clear();

  int p_new = static_cast<int>(std::count_if(new_rank_of.begin(), new_rank_of.end(), [](int r) { return r >= 0; }));
  if (rank_ == 0 && !joiner) LOG_INFO("redistributed from %d to %d ranks", p_old, p_new);
  release_comms();
  pending_.reset();
  plan_.reset();
  rejected_.clear();
  restored_files_.clear();
  if (new_comm == MPI_COMM_NULL) {
    lease_.stop();  // the job goes on without this process: its claim stays for the new rank 0
    *left = true;
    return Status::ok();
  }
  MPI_Comm dup;
  CAIRN_MPI(MPI_Comm_dup(new_comm, &dup));
  CAIRN_TRY(bind_comm(dup));
  // The job's claim on its prefix goes with the job: the new rank 0 (a process that joined, or another
  // old member) takes it over under the job's launch id.
  char id[32] = {0};
  if (rank_ == 0) snprintf(id, sizeof id, "%s", launch_id_.c_str());
  CAIRN_MPI(MPI_Bcast(id, sizeof id, MPI_CHAR, 0, app_comm_));
  launch_id_ = id;
  if (!lease_.held()) CAIRN_TRY(agree(app_comm_, rank_ == 0 ? hold_prefix() : Status::ok()));
  else CAIRN_TRY(agree(app_comm_, Status::ok()));
  prepare_slots();
  return Status::ok();
}

}  // namespace cairn
