// The executors of a restart on another number of ranks. A version written by p_old ranks is read by
// "hosts" among the current ranks: from L1 where every old rank's slot survives on some node (a rank of
// that node reads it, verifies it and hosts it); else from L2, where a lost old rank's data is read from
// the copy a survivor of its set keeps (partner, xor of two, ...) or the old redundancy sets rebuild their
// lost members onto hosts that hold no other member of the set; else from L3 (old rank k's file is read
// once, by rank k mod P). The hosts then send each new rank exactly the pieces its distributed regions
// need (move_regions, also used by live redistribution). Reads are parallel, nothing is read twice, every
// byte is verified before it moves.
//
// cairn_restart_available only probes (the records and commits say which version; no data is read), and
// the search runs in cairn_restart. There (in_place: the application's regions may be written while
// searching), when every rank's regions already have the size the new layout gives them, it goes further: from L3 every rank reads
// its own pieces straight from the old files into its regions (from_l3_direct: no hosts, no move); from
// L1 a host reads the pieces it keeps for itself straight into its regions and sends the rest chunk by
// chunk as each is verified, so that the move overlaps the read (reshape_stream.cpp), or, when the plan
// has too many small pieces for one message each, moves the rest afterwards.
#pragma once

#include <mpi.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/layout.hpp"
#include "redistribute/exec/region_table.hpp"

namespace cairn {

// What the executors need of the job, and nothing more.
struct ReshapeJob {
  MPI_Comm comm = MPI_COMM_NULL;             // the job's communicator (application thread)
  std::vector<std::string> node_of_rank;     // failure group of every current rank
  std::string node;                          // this rank's
  Layout layout;
  int cache_versions = 2;
  uint64_t exchange_chunk = 4 << 20;         // L2 exchange unit
  int restart_threads = 0;                   // threads of a host reading its streams (0: its host's share)
};

// A version of another rank count that can be restored, as the search found it.
struct ReshapedVersion {
  uint64_t version = 0;
  int level = 0;                  // enum cairn_level
  int p_old = 0;                  // ranks that wrote it
  std::vector<int> host_of_old;   // current rank hosting each old rank's stream
  std::vector<HeldStream> held;   // the streams this rank hosts
  bool in_place = false;          // the regions already hold it, verified (nothing left to move)
};

// A lost old rank's stream, read from the copy a survivor of its set keeps in its redundancy data
// (restore::plan_l2_copies).
struct CopiedStream {
  std::string path;     // the holder's redundancy file
  uint64_t offset = 0;  // of the copy in it
  Manifest manifest;    // the lost rank's, from the set record
};

// A version of another rank count as the nodes' records and the L3 commits list it (no data read).
struct ReshapeCandidate {
  uint64_t version = 0;
  int p_old = 0;
  std::vector<std::vector<uint64_t>> holders;  // per old rank: the current ranks whose node holds its L1 copy
  std::vector<bool> prot;                       // per old rank: that copy was protected at L2
  bool in_l3 = false;
  bool whole_in_l1() const;        // every old rank's copy is on some node
  bool rebuildable_at_l2() const;  // some copy is there and some was protected: the sets may rebuild the rest
};

// What the records say a restart of another rank count would restore (Reshaper::probe).
struct ReshapeProbe {
  uint64_t version = 0;  // 0: none
  int p_old = 0;
  int level = 0;  // the first level the records allow (enum cairn_level); find() may end at another
  std::string label;
};

class Reshaper {
 public:
  // `regions` is the application's table (borrowed); in_place: cairn_restart's own search may write it.
  // `rejected`: versions the application declared invalid (never offered again).
  Reshaper(const ReshapeJob& job, RegionTable& regions, bool in_place, const std::vector<uint64_t>& rejected);

  // Versions of another rank count in (above, at_most], newest first, each tried from L1, L2, L3.
  // ERR_NO_CHECKPOINT when none can be restored; *why says per version what was found. Collective.
  Status find(ReshapedVersion* out, std::string* why, uint64_t above, uint64_t at_most);
  // The newest version in (above, at_most] that the records say can be restored (whole in L1, protected
  // at L2 somewhere, or committed in L3), with its label; reads no data, so that cairn_restart_available
  // can name it and cairn_restart read it in place. out->version 0: none. Collective.
  Status probe(uint64_t above, uint64_t at_most, ReshapeProbe* out);

 private:
  // Every version of another rank count in (above, at_most], newest first (rejected ones left out).
  Status candidates(std::vector<ReshapeCandidate>* out, uint64_t above, uint64_t at_most);
  // *streamed: the regions were filled here (from_l1_streamed), nothing is held to move.
  Status from_l1(uint64_t v, int p_old, const std::vector<std::vector<uint64_t>>& holders,
                 std::vector<HeldStream>* held, bool* streamed);
  // When every rank's regions already have their new size and the plan has few enough pieces
  // (streamable): the hosts read the old slots chunk by chunk and send each verified chunk's pieces to
  // their new owners while they read on (reshape_stream.cpp). `copies`: old ranks this rank reads from
  // a copy instead of their slot (from_l2_copies), `level` says so in the log.
  Status from_l1_streamed(uint64_t v, int p_old, const std::vector<int>& host_of_old,
                          const std::vector<ReshapeWant>& wants, const std::map<int, CopiedStream>& copies = {},
                          const char* level = "L1");
  Status from_l3(uint64_t v, int p_old, std::vector<HeldStream>* held);
  // Each rank reads its own pieces straight from the old ranks' files into its regions. *done: it did.
  Status from_l3_direct(uint64_t v, int p_old, bool* done);
  Status from_l2(uint64_t v, int p_old, const std::vector<std::vector<uint64_t>>& holders, const std::vector<bool>& prot,
                 std::vector<HeldStream>* held, std::vector<int>* host_of_old);
  // From L2 where every lost old rank's stream lies whole in a survivor's redundancy data (partner, xor
  // of two, ...), the regions have their new size and the plan is streamable: those copies and the
  // survivors' slots are streamed as from_l1_streamed streams slots; *host_of_old: the rank that read
  // each old rank's slot or copy. *streamed false with OK: the version does not qualify (from_l2 then
  // rebuilds). Collective.
  Status from_l2_copies(uint64_t v, int p_old, const std::vector<std::vector<uint64_t>>& holders,
                        const std::vector<bool>& prot, bool* streamed, std::vector<int>* host_of_old);

  // The version's region table, `bytes` as `root` read it (empty there: none), shared with every rank
  // (*table), and whether every rank's regions already have their new size (*wants: this rank's regions,
  // pointing into *table): 0 no (or no table), 1 yes, 2 yes and `streams` said so on every rank.
  // Collective.
  Result<int> share_table_and_fit(std::string bytes, int root, Manifest* table, std::vector<ReshapeWant>* wants,
                                  const std::function<int()>& streams = {});

  // The current rank hosting each old rank's stream: a rank of the first node that reported it, spread
  // over that node's ranks; -1 where no node did.
  std::vector<int> hosts(const std::vector<std::vector<uint64_t>>& holders) const;
  // The rank of `rank`'s node that reads old rank k's stream there: its ranks taken in turn by k.
  int spread_on_node(int rank, int k) const;

  const ReshapeJob& job_;
  MPI_Comm app_comm_;
  int rank_ = 0, nranks_ = 1;
  const std::vector<std::string>& node_of_rank_;
  const Layout& layout_;
  RegionTable& regions_;
  bool restart_in_place_;
  const std::vector<uint64_t>& rejected_;
};

// Move every distributed region from a p_old layout (streams held by processes of `comm`) to the layout
// of the processes with new_rank_of[comm rank] >= 0, resizing regions through their callbacks. restart:
// every protected region must be in the version. Collective over comm.
Status move_regions(MPI_Comm comm, RegionTable& regions, int p_old, const std::vector<int>& host_of_old,
                    const std::vector<int>& new_rank_of, const std::vector<HeldStream>& held, bool restart);

}  // namespace cairn
