// The knob table (knob_table.hpp): every knob declared once, and its values' parsing, checks and text.
#include "base/knob_table.hpp"

#include <cctype>
#include <charconv>
#include <cmath>

#include "base/signal_names.hpp"
#include "base/units.hpp"

namespace cairn::knob {

const std::vector<Knob>& knobs() {
  static const std::vector<Knob> table = {
      {.name = "prefix", .kind = Kind::string, .member = &Config::prefix,
       .default_text = "cairn-checkpoints", .rule = Rule::not_empty,
       .description = "Directory of the level-3 checkpoints (the parallel file system) and of the job's "
                      "state files; every rank must see the same directory. A relative path is taken "
                      "from the working directory. Point it at a scratch file system, not at $HOME."},
      {.name = "cache_dir", .kind = Kind::string, .member = &Config::cache_dir,
       .default_text = "/dev/shm", .rule = Rule::not_empty,
       .description = "Base directory of the node-local level-1 cache (a subdirectory per job and "
                      "node). It must be local to the node and fast. /dev/shm is memory and counts "
                      "against the job's memory; use a node-local SSD (e.g. /tmp or $TMPDIR) when "
                      "memory is tight. A tmpfs mounted with huge=within_size (2 MiB pages) is faster "
                      "than /dev/shm's 4 KiB pages for the checkpoint, the restart and copy-on-write "
                      "(docs/performance.md, \"The cache on huge pages\")."},
      {.name = "cache_versions", .kind = Kind::integer, .member = &Config::cache_versions,
       .default_text = "2", .min = 1, .max = 64,
       .description = "Checkpoint versions kept in each node's level-1 cache. Each costs one copy of "
                      "the protected memory (plus redundancy data) in cache_dir. 2 keeps the last "
                      "good version while the next is written; use 1 only when memory is short."},
      {.name = "snapshot", .kind = Kind::choice, .member = &Config::snapshot,
       .default_text = "auto", .choices = {"copy", "cow", "auto"},
       .description = "How a checkpoint's bytes reach the level-1 cache. copy: cairn_checkpoint copies "
                      "the protected memory (the application waits for one memcpy). cow: copy-on-write: "
                      "cairn_checkpoint only write-protects the memory (userfaultfd, Linux 6.4) and a "
                      "thread copies it in the background; a write to a block not yet copied waits for "
                      "that block's copy. Memory that cannot be write-protected (shared, file-backed, "
                      "hugetlb) is copied; between checkpoints the protected memory is gathered into "
                      "transparent huge pages, which makes protecting it cheap. auto: cow where it can "
                      "save the application time, else copy: copy when the kernel or permissions forbid "
                      "cow, when the node has RDMA devices (a NIC writing protected memory by DMA is not "
                      "seen), when the rank has no core to spare for the copier (its CPU affinity is one "
                      "CPU, or, not bound, its node has fewer than two CPUs per rank), and, to the end of the run, "
                      "where copying measured cheaper: once three cow snapshots in a row show the "
                      "application rewriting its state right after the checkpoint (its writes reached a "
                      "quarter of the protected memory before the copier, each waiting for its copy) or "
                      "rewriting half of it or more between two checkpoints (each block then waits for its "
                      "copy or its un-protection), the next two checkpoints copy, and the run keeps copy if "
                      "the faster of those copies blocked no longer than the application waited in a cow snapshot "
                      "(the median of the three: the protection, the copies its writes waited for, its first "
                      "writes un-protected), else cow. The checkpoint service (service) does not change the "
                      "choice: it reads the level-1 slots, never the protected memory, and only once a "
                      "snapshot is complete. cairn_init logs the choice and why, and auto's trial copies and their outcome, "
                      "with both figures, are logged once, at info level (docs/performance.md)."},
      {.name = "l1_incremental", .kind = Kind::choice, .member = &Config::l1_incremental,
       .default_text = "auto", .choices = {"auto", "on", "off"},
       .description = "Whether a snapshot copies only what changed. With copy-on-write (snapshot = cow, or "
                      "auto when it takes cow) the memory stays write-protected between snapshots, the first "
                      "write to each chunk is noted (in whole 2 MiB blocks where memory is in huge pages), "
                      "and a version copies, seals and encodes at level 2 only the chunks written since its "
                      "slot's version; auto and on do that, off keeps nothing protected between snapshots. "
                      "It is off on a node with RDMA devices (a DMA write would not be seen). "
                      "With a copy (snapshot = copy, or auto when it copies), on: cairn_checkpoint hashes each chunk of the protected memory and copies "
                      "only the chunks whose hash differs from the one the level-1 slot's previous version "
                      "recorded (the slot already holds the others); the hashes become the version's, so "
                      "the seal hashes nothing, and level 2 then moves and encodes only the changed chunks "
                      "(their spans of its pieces), when every member of the redundancy set had the same protected version "
                      "in its slot (its redundancy data is then updated in place); under xor and rs where a stripe has more "
                      "than one data member, and under partner, each member sends only its own changes since the version in the "
                      "other slot, and its redundancy data is that version's plus the changes. off: every byte is copied "
                      "(a plain copy of 16 MiB or more still hashes each chunk as it copies it, on a CPU with "
                      "AVX2, so the seal hashes nothing and level 2 moves only the changed chunks after it "
                      "too). auto: on for a checkpoint when "
                      "it should block less than a plain copy, from the rank's own figures: the share of "
                      "chunks the last version found unchanged in its slot, times what a plain copy cost "
                      "per byte, exceeds what hashing cost per byte (both measured on plain versions of 1 "
                      "MiB or more; hashing alone once, where the plain copy hashes as it copies); a state rewritten whole is copied at once, without hashing first. Only "
                      "what this process sealed into a slot is trusted: a slot whose content it does not "
                      "know (the first checkpoints after a launch, a version that failed in it, a rebuild "
                      "into it, another size or chunk_size, file-API versions, device memory) is copied "
                      "whole, and so is every version after copy-on-write's memory was unprotected, freed, "
                      "discarded or moved. The version's summary line says how much was left in place "
                      "(docs/architecture.md, Snapshots)."},
      {.name = "cuda_driver", .kind = Kind::string, .member = &Config::cuda_driver,
       .default_text = "libcuda.so.1",
       .description = "The CUDA driver library cairn loads (dlopen) at the first cairn_protect, to tell device "
                      "(GPU) memory from host memory and to copy it; cairn needs no CUDA at build time. A "
                      "path, a library name, or off: no device memory support (a device pointer is then "
                      "refused with CAIRN_ERR_NOT_SUPPORTED). docs/gpu.md."},
      {.name = "device_copy", .kind = Kind::choice, .member = &Config::device_copy,
       .default_text = "wait", .choices = {"wait", "return"},
       .description = "What cairn_checkpoint waits for of the copy of device (GPU) regions into the "
                      "level-1 cache. wait: the copy (at the bus's speed into pinned memory); the "
                      "application may then write its device buffers. return: nothing; the copies run "
                      "on cairn's stream and the application orders its next write of a protected "
                      "device buffer after them with cairn_device_wait_copied (docs/gpu.md)."},
      {.name = "device_piece", .kind = Kind::size, .member = &Config::device_piece,
       .default_text = "64M", .min = MiB, .max = 4 * GiB,
       .description = "Bytes per piece of a device region's copy (rounded to whole chunk_size chunks; larger "
                      "when a version's device regions would make more than 16 pieces): each piece is hashed "
                      "on the host as soon as it lands, while the next is copied; accepts K, M and G suffixes."},
      {.name = "device_hash_threads", .kind = Kind::integer, .member = &Config::device_hash_threads,
       .default_text = "8", .min = 1, .max = 64,
       .description = "Threads per rank that hash device pieces as they land (and verify them at a "
                      "restart into device memory). One thread hashes 10-20 GB/s out of memory; a PCIe 5 "
                      "link moves 50. They wait on the copies' events, idle otherwise."},
      {.name = "redundancy", .kind = Kind::choice, .member = &Config::redundancy,
       .default_text = "xor", .choices = {"single", "partner", "xor", "rs"},
       .description = "Level-2 protection against lost nodes. single: none (a lost node means a "
                      "restart from level 3). partner: a full copy on another node of the set "
                      "(doubles cache memory). xor: parity across set_size nodes, survives one lost "
                      "node per set for 1/(set_size-1) extra memory. rs: Reed-Solomon, survives "
                      "rs_parity lost nodes per set."},
      {.name = "set_size", .kind = Kind::integer, .member = &Config::set_size,
       .default_text = "4", .min = 2, .max = 255,
       .description = "Failure groups (nodes) per redundancy set for partner, xor and rs. Larger sets "
                      "cost less extra memory for xor and rs, but the same number of losses is then "
                      "tolerated among more nodes and rebuilding reads more data. 4 to 8 is typical."},
      {.name = "rs_parity", .kind = Kind::integer, .member = &Config::rs_parity,
       .default_text = "2", .min = 1, .max = 254,
       .description = "Parity shards per set for redundancy = rs: how many nodes of one set may be "
                      "lost together and still be rebuilt from level 2. Costs rs_parity/(set_size - "
                      "rs_parity) extra memory. Must be less than set_size when redundancy = rs."},
      {.name = "l2_every", .kind = Kind::integer, .member = &Config::l2_every,
       .default_text = "1", .min = 0, .max = 1000000,
       .description = "Protect every N-th checkpoint version at level 2 (redundancy across nodes); the "
                      "others stay in level 1 only, and a node lost before the next protected one "
                      "restarts from an older protected version or from level 3. 0: never (level 1 and "
                      "3 only). FTI's per-level intervals: with flush_every, how often each level is "
                      "written; `cairn interval --levels` computes both (docs/intervals.md)."},
      {.name = "flush_every", .kind = Kind::integer, .member = &Config::flush_every,
       .default_text = "10", .min = 0, .max = 1000000,
       .description = "Copy every N-th checkpoint version to level 3 in the background. 0: only at "
                      "finalize (see flush_on_finalize). Lower it when whole-job failures (power, "
                      "network) are likely; raise it when the parallel file system is slow or busy."},
      {.name = "keep_flushed", .kind = Kind::integer, .member = &Config::keep_flushed,
       .default_text = "2", .min = 1, .max = 1000,
       .description = "Flushed versions kept in prefix; older ones are deleted once a newer flush is "
                      "complete. Keep at least 2 if you also want a fallback when the newest one "
                      "turns out to be damaged."},
      {.name = "recycle_flushed", .kind = Kind::boolean, .member = &Config::recycle_flushed,
       .default_text = "true",
       .description = "The data files of a flushed version deleted by keep_flushed go to "
                      "prefix/.cairn/recycle (one per rank), and the next flush of that rank "
                      "overwrites its file instead of creating one: where freeing and allocating "
                      "blocks costs the device work (ext4 with discard, thin-provisioned volumes), "
                      "a flush no longer pays for the deletion of the version before. Holds one "
                      "version's data files more between flushes; emptied at finalize. false: "
                      "deleted at once (a pool an earlier job left is still used up)."},
      {.name = "full_every", .kind = Kind::integer, .member = &Config::full_every,
       .default_text = "0", .min = 0, .max = 1000,
       .description = "Incremental level-3 versions: with N > 1, a flushed version writes only the chunks "
                      "(chunk_size pieces) whose checksums differ from the newest committed version of "
                      "the same rank, and a record naming the version that holds each other chunk; a full "
                      "version is written at least every N versions, so that a restart reads at most N "
                      "versions' files. 0 or 1: every version is full. Pruning keeps every version a kept "
                      "one names. Needs the file-per-rank layout, uncompressed (files_per_node = 0, "
                      "data_prefixes empty, compress = none); in service mode every version is full "
                      "(docs/format.md, L3)."},
      {.name = "files_per_node", .kind = Kind::integer, .member = &Config::files_per_node,
       .default_text = "0", .min = 0, .max = 4096,
       .description = "Level-3 files per node and version: 0 writes a file per rank; N > 0 lets the "
                      "ranks of a node share N files (rank i of the node writes into file i mod N), "
                      "which spares the file system's metadata server at scale (Pliris' N-to-M)."},
      {.name = "turnstile_width", .kind = Kind::integer, .member = &Config::turnstile_width,
       .default_text = "0", .min = 0, .max = 4096,
       .description = "Ranks of a node that write to level 3 at the same time (the others wait their "
                      "turn). 0: no limit. 1 or 2 often flushes faster on file systems that suffer "
                      "from many concurrent writers per client."},
      {.name = "data_prefixes", .kind = Kind::string, .member = &Config::data_prefixes,
       .default_text = "", .default_doc = "the prefix only",
       .description = "Spread level-3 data files over several file systems: PATH[:WEIGHT],... "
                      "(absolute paths, weights > 0, default 1); a file goes to a path with "
                      "probability proportional to its weight. Manifests and COMMIT stay in prefix. "
                      "Every path must be visible to every rank and at restart."},
      {.name = "compress", .kind = Kind::string, .member = &Config::compress,
       .default_text = "none",
       .description = "Compression of level-3 data: none, zstd or zstd:LEVEL (1..19, default 3), "
                      "chunk by chunk so restart can verify and decompress in pieces. Pays off on "
                      "compressible states and slow file systems; costs CPU in the background."},
      {.name = "flush_on_finalize", .kind = Kind::boolean, .member = &Config::flush_on_finalize,
       .default_text = "true",
       .description = "Flush the newest checkpoint to level 3 at finalize, so that a later job, on "
                      "any nodes, can restart from it. Turn off for throw-away runs and benchmarks."},
      {.name = "interval", .kind = Kind::choice, .member = &Config::interval,
       .default_text = "fixed", .choices = {"fixed", "auto"},
       .description = "How cairn_need_checkpoint() times checkpoints. fixed: every interval_seconds "
                      "of computation. auto: at Daly's optimum interval for mtbf_seconds and the "
                      "measured cost of this run's checkpoints (the mean time the last 8 blocked "
                      "the application), recomputed after each checkpoint; see docs/intervals.md. "
                      "Halts, signals and the end time ask for checkpoints in both modes."},
      {.name = "interval_seconds", .kind = Kind::duration, .member = &Config::interval_seconds,
       .default_text = "0", .min = 0,
       .description = "Seconds of computation after which cairn_need_checkpoint() says a checkpoint "
                      "is due (interval = fixed). 0 turns the timer off: checkpoints are then taken "
                      "when the application decides, or before a halt. `cairn interval` computes a "
                      "good value. With interval = auto: the interval until a checkpoint has been "
                      "measured (0: mtbf_seconds / 10)."},
      {.name = "mtbf_seconds", .kind = Kind::duration, .member = &Config::mtbf_seconds,
       .default_text = "0", .min = 0,
       .description = "Mean time between failures of the whole job (a node's MTBF divided by the "
                      "number of nodes), in seconds. Needed (> 0) by interval = auto; 0: unknown. "
                      "Count the failures the job restarts from: lost nodes and interrupts."},
      {.name = "l3_mtbf_seconds", .kind = Kind::duration, .member = &Config::l3_mtbf_seconds,
       .default_text = "0", .min = 0,
       .description = "Mean time between the failures of mtbf_seconds that only level 3 recovers (the "
                      "whole job lost: power, the network, the file system's clients; more nodes of one "
                      "set than level 2 tolerates; every lost node when redundancy = single), in "
                      "seconds; not less than mtbf_seconds. 0: none. interval = auto then plans for them "
                      "too: such a failure goes back to the last level-3 version, flush_every checkpoints "
                      "apart, and the interval shortens so that both kinds lose least together "
                      "(docs/intervals.md)."},
      {.name = "halt_seconds", .kind = Kind::duration, .member = &Config::halt_seconds,
       .default_text = "0", .min = 0,
       .description = "Seconds before end_time at which the application is told to take a last "
                      "checkpoint and exit (cairn_should_exit()). Give it more than a checkpoint and "
                      "its flush take. Also the margin of a halt file's before= condition "
                      "(docs/halt.md); otherwise no effect while end_time is 0."},
      {.name = "end_time", .kind = Kind::integer, .member = &Config::end_time,
       .default_text = "0", .min = 0,
       .description = "When the job's allocation ends, in Unix seconds (e.g. from the scheduler's "
                      "time limit: $(date -d '+2 hours' +%s)). 0: inside a Slurm job, the job's end "
                      "time as Slurm reports it at cairn_init; elsewhere no known end. Used with "
                      "halt_seconds to save the run before it is killed."},
      {.name = "exit_signal", .kind = Kind::string, .member = &Config::exit_signal,
       .default_text = "USR1", .rule = Rule::signal_name,
       .description = "The signal that asks the job to checkpoint and exit (Slurm: sbatch "
                      "--signal=USR1@300 or scancel --signal=USR1): cairn_need_checkpoint() then "
                      "says a checkpoint is due, and cairn_should_exit() says exit after it. SIGTERM "
                      "is caught as well. A signal the application handles itself is left alone. "
                      "See docs/halt.md."},
      {.name = "node", .kind = Kind::string, .member = &Config::node, .default_text = "",
       .rule = Rule::path_component, .default_doc = "the hostname",
       .description = "Failure group of this rank: ranks with the same node lose their level-1 cache "
                      "together, and redundancy sets span different nodes. Empty means the hostname. "
                      "Set it per rank only to simulate several nodes on one machine, or when "
                      "several hostnames fail together. Names a cache subdirectory."},
      {.name = "log", .kind = Kind::level, .member = &Config::log_level, .default_text = "warn",
       .choices = {"error", "warn", "info", "debug"},
       .description = "Messages written to stderr. info adds one summary line per checkpoint on rank "
                      "0 (bytes, time and bandwidth per level); debug is verbose, for bug reports."},
      {.name = "chunk_size", .kind = Kind::size, .member = &Config::chunk_size,
       .default_text = "1M", .min = 4 * KiB, .max = GiB, .rule = Rule::multiple_of_64,
       .description = "Bytes per checksum (xxh3) and per verification unit at restart; accepts K, M "
                      "and G suffixes. Smaller chunks pinpoint damage but enlarge the manifest; "
                      "larger ones suit states of many gigabytes per rank."},
      {.name = "exchange_chunk", .kind = Kind::size, .member = &Config::exchange_chunk,
       .default_text = "4M", .min = 64 * KiB, .max = GiB,
       .description = "Bytes per message of the level-2 exchange between nodes; accepts K, M and G "
                      "suffixes. Up to eight are in flight per rank (as many as fit 32 MiB, at least "
                      "two; with xor and rs a step holds one from each of the k members it combines): "
                      "larger values can raise bandwidth on fast networks and cost memory; lower it "
                      "when memory is tight. A restart that "
                      "rebuilds a lost rank's data sends it in messages of at most 2M, so that each is "
                      "still in the CPU cache when it is copied into place."},
      {.name = "restart_threads", .kind = Kind::integer, .member = &Config::restart_threads,
       .default_text = "0", .min = 0, .max = 64,
       .description = "Threads per rank that read a version back from the level-1 cache or a rebuilt "
                      "stream into the regions at a restart, each a run of whole chunks, hashed as they "
                      "land. 0: the cores of this host's affinity masks divided by the job's ranks on "
                      "it, at most 4 (1 where ranks outnumber cores, so no rank takes another's core). "
                      "On another rank count (the streamed path), a rank that reads old ranks' slots or "
                      "copies reads that many units at once (at most half its ring of unit buffers); 0 "
                      "there divides the cores by the number of ranks on the host that read (those that "
                      "only receive are not counted), at most 4 and at most the rank's own cores."},
      {.name = "job", .kind = Kind::string, .member = &Config::job, .default_text = "",
       .rule = Rule::path_component, .default_doc = "derived from prefix",
       .description = "Name of the job in the cache path (cache_dir/cairn-JOB). Empty derives it "
                      "from the absolute prefix, so a relaunch finds its level-1 cache again. Set it "
                      "when the same job reaches its prefix by different paths."},
      {.name = "app_name", .kind = Kind::string, .member = &Config::app_name, .default_text = "",
       .default_doc = "the executable's name",
       .description = "The application's name in the prefix's identity: the first launch on a prefix "
                      "records the job and this name, and a later job of another identity is refused "
                      "there (see adopt), so that no job restarts from, or prunes, another's checkpoints."},
      {.name = "adopt", .kind = Kind::boolean, .member = &Config::adopt, .default_text = "false",
       .description = "Take over a prefix whose checkpoints were written under another identity (a new "
                      "build of the same code, a renamed job): its versions become this job's, to "
                      "restart from and to prune; likewise a cache that outlived its removed prefix, "
                      "otherwise refused (cairn clean --cache removes it). Leave it off otherwise."},
      {.name = "restart_version", .kind = Kind::integer, .member = &Config::restart_version,
       .default_text = "0", .min = 0, .max = 99999999,
       .description = "Restart from this version, or from the newest older one that can be rebuilt; "
                      "newer versions stay where they are and are passed over. 0: the newest (the "
                      "default). For a one-off restart from a chosen version; `cairn index --current` "
                      "records the same choice in the prefix for every later launch (docs/tools.md)."},
      {.name = "if_unrecoverable", .kind = Kind::choice, .member = &Config::if_unrecoverable,
       .default_text = "stop", .choices = {"stop", "start_over"},
       .description = "What a restart does when checkpoints exist but none can be rebuilt and verified "
                      "(more failures than the levels tolerate). stop: cairn_restart_available and "
                      "cairn_restart fail with CAIRN_ERR_UNRECOVERABLE, the state file's phase becomes "
                      "unrecoverable, and cairn run does not relaunch the job. start_over: every version "
                      "there is joins the skip list of the version index (their files stay; `cairn index "
                      "--add V` verifies one and takes it back), the state file says so (started_over), "
                      "and the job starts afresh as if it had no checkpoint: for campaigns and throw-away "
                      "runs, where losing the run's progress is better than stopping."},
      {.name = "lease_seconds", .kind = Kind::duration, .member = &Config::lease_seconds,
       .default_text = "60", .min = 5,
       .description = "How long the job's hold on its prefix lasts without renewal (rank 0 renews it "
                      "every third of this). A second job on the prefix is refused while the lease "
                      "runs; a holder that is gone is taken over at once where its process can be "
                      "checked (same host), else once its lease ran out."},
      {.name = "service", .kind = Kind::string, .member = &Config::service, .default_text = "",
       .rule = Rule::host_port, .default_doc = "none (the embedded flusher)",
       .description = "The checkpoint service's controller, HOST:PORT (cairnd controller --listen; "
                      "docs/service.md). Set, each version's level-3 copy is made by the service's agents "
                      "on checkpoint nodes over libfabric while the job computes; empty, by a thread of "
                      "each rank. The service only accelerates: when it is away, failing or slower than "
                      "service_timeout, the rank's own flusher writes the version."},
      {.name = "service_mode", .kind = Kind::choice, .member = &Config::service_mode,
       .default_text = "pull", .choices = {"pull", "push"},
       .description = "How a version reaches the agents. pull: each agent fi_reads its ranks' level-1 "
                      "slots (one-sided: on RDMA networks the ranks' CPUs do nothing). push: each rank "
                      "fi_writes its slot into its agent's buffers from a thread of its own; for providers "
                      "whose reads are slow."},
      {.name = "service_agents", .kind = Kind::integer, .member = &Config::service_agents,
       .default_text = "1", .min = 1, .max = 4096,
       .description = "Agents the service gives this job (at most one per rank; the controller may cap "
                      "it). Each moves the versions of a block of consecutive ranks; more agents drain a "
                      "version faster when the checkpoint nodes and the file system have bandwidth to spare."},
      {.name = "service_chunk", .kind = Kind::size, .member = &Config::service_chunk,
       .default_text = "128K", .min = 4 * KiB, .max = 64 * MiB, .rule = Rule::multiple_of_64,
       .description = "Bytes per RMA transfer between a rank and its agent; reading, moving and writing "
                      "overlap chunk by chunk (128 KiB as in pipelined process migration over RDMA). Larger chunks suit "
                      "high-latency networks."},
      {.name = "service_buffer_pool", .kind = Kind::size, .member = &Config::service_buffer_pool,
       .default_text = "8M", .min = 64 * KiB, .max = 16 * GiB,
       .description = "Each agent's buffer pool: how many bytes of a version may be between the rank's "
                      "slot and the file system at once (8 MiB, the same design's). At least service_chunk; "
                      "costs that much memory on the checkpoint node per agent."},
      {.name = "service_provider", .kind = Kind::string, .member = &Config::service_provider,
       .default_text = "tcp;ofi_rxm", .rule = Rule::not_empty_text,
       .description = "The libfabric provider for the transfers: tcp;ofi_rxm everywhere (and on one "
                      "machine), verbs;ofi_rxm on InfiniBand, efa on AWS, cxi on Slingshot (fi_info -l "
                      "lists a node's). Ranks and agents use the same one."},
      {.name = "service_timeout", .kind = Kind::duration, .member = &Config::service_timeout,
       .default_text = "30", .min = 1,
       .description = "Seconds the job waits on the service at most: for an agent at cairn_init, for a "
                      "version to be written once the pipeline waits for it, and for any sign of "
                      "progress from the agents. Past it, the rank's own flusher writes the version. Give "
                      "it more than one version's drain time."},
      {.name = "service_restart", .kind = Kind::choice, .member = &Config::service_restart,
       .default_text = "application", .choices = {"application", "agents"},
       .description = "Who reads a restart from level 3 when the service is up. application: each rank "
                      "reads its files itself. agents: the rank's agent reads and verifies them and "
                      "fi_writes the bytes into the rank's regions, which the rank verifies again; when "
                      "the service is away or anything fails, the rank reads them itself."},
      {.name = "migrate_transport", .kind = Kind::choice, .member = &Config::migrate_transport,
       .default_text = "auto", .choices = {"auto", "local", "fabric"},
       .description = "How cairn migrate's move of a node's snapshots to a spare travels (read by cairn "
                      "run). local: cairn run copies between the two caches itself (both on its machine: "
                      "simulated nodes). fabric: a reader on the node and a writer on the spare (cairnd "
                      "migrate-source and migrate-sink) move it over libfabric RMA with service_provider, "
                      "as between real hosts. auto: fabric when service is set, else local."},
      {.name = "migrate_listen", .kind = Kind::string, .member = &Config::migrate_listen,
       .default_text = "127.0.0.1", .rule = Rule::not_empty_text,
       .description = "With migrate_transport = fabric: where the reader on the node being emptied opens "
                      "its endpoint and control port, an address of that node that the spare reaches, or "
                      "iface:NAME for the address of its interface NAME (iface:ib0)."},
  };
  return table;
}

const std::vector<const char*>& non_knob_variables() {
  static const std::vector<const char*> names = {
    "CAIRN_CONFIG",    "CAIRN_INJECT",       "CAIRN_INJECT_DIR",  "CAIRN_MPIRUN",
    "CAIRN_RUN_ID",  // set by `cairn run` for its ranks: a relaunch takes over the prefix from its earlier attempt
    "CAIRN_MPIRUN_ARGS", "CAIRN_LAUNCHER", "CAIRN_SRUN", "CAIRN_SRUN_ARGS", "CAIRN_BENCH_CHILD",
    // read by `cairn run` for a migration over the fabric (docs/migration.md)
    "CAIRN_MIGRATE_EXEC", "CAIRN_CAIRND",
    "CAIRN_TEST_NO_SRUN",  // read at configure time by cmake/CairnMpiTest.cmake
    // read by scripts/slurm-cluster.sh (the one-host test cluster)
    "CAIRN_SLURM_CPUS", "CAIRN_SLURM_TIMEOUT", "CAIRN_SLURM_PORTS",
    // ... and its cluster of hosts (--hosts N)
    "CAIRN_SLURM_DOWN_AFTER", "CAIRN_SLURM_SHARE", "CAIRN_SLURM_LOGIN_NETNS",
    // read by `cairn run` in a multi-host allocation (docs/launcher.md, "On a cluster")
    "CAIRN_KILL_HOST_EXEC", "CAIRN_SLURM_COMMAND_TIMEOUT",
    // set by `cairn run` for its --between-attempts hook
    "CAIRN_ATTEMPT",   "CAIRN_CACHE_JOB",    "CAIRN_KILLED_NODES",
    // read by the LD_PRELOAD interposer (docs/interpose.md) and by cairn-bench --interpose
    "CAIRN_INTERPOSE_PATTERN", "CAIRN_INTERPOSE_FILES", "CAIRN_INTERPOSE_KEEP", "CAIRN_INTERPOSE_PREFAULT",
    "CAIRN_INTERPOSE_LIB",
};
  return names;
}

std::string env_name(const Knob& k) {
  std::string s = std::string("CAIRN_") + k.name;
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

const char* type_name(Kind kind) {
  switch (kind) {
    case Kind::integer: return "int";
    case Kind::floating: return "float";
    case Kind::boolean: return "bool";
    case Kind::string: return "string";
    case Kind::choice: return "enum";
    case Kind::level: return "level";
    case Kind::size: return "size";
    case Kind::duration: return "duration";
  }
  return "?";
}

// ---- values -------------------------------------------------------------------------------------

std::string format_size(int64_t bytes) { return units::format_size(static_cast<uint64_t>(bytes)); }

// Shortest text that reads back to the same double; a TOML float literal when `toml` ("0.0").
std::string format_float(double v, bool toml) {
  char buf[64];
  auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  std::string s(buf, end);
  if (toml && s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The value as a TOML literal: what `cairn config --list` and the sample config show.
std::string format_toml(const Knob& k, const Value& v) {
  switch (k.kind) {
    case Kind::integer: return std::to_string(std::get<int64_t>(v));
    case Kind::floating:
    case Kind::duration: return format_float(std::get<double>(v), true);  // seconds: a number is a duration
    case Kind::boolean: return std::get<bool>(v) ? "true" : "false";
    case Kind::string: return quoted(std::get<std::string>(v));
    case Kind::choice:
    case Kind::level: return quoted(k.choices[std::get<int64_t>(v)]);
    case Kind::size: return quoted(format_size(std::get<int64_t>(v)));
  }
  return "";
}

void store(Config& c, const Knob& k, const Value& v) {
  std::visit(
      [&](auto member) {
        using T = std::remove_cvref_t<decltype(c.*member)>;
        if constexpr (std::is_same_v<T, double> || std::is_same_v<T, bool> ||
                      std::is_same_v<T, std::string>)
          c.*member = std::get<T>(v);
        else
          c.*member = static_cast<T>(std::get<int64_t>(v));  // ints, sizes, choice indexes
      },
      k.member);
}

Value load(const Config& c, const Knob& k) {
  return std::visit(
      [&](auto member) -> Value {
        using T = std::remove_cvref_t<decltype(c.*member)>;
        if constexpr (std::is_same_v<T, double> || std::is_same_v<T, bool> ||
                      std::is_same_v<T, std::string>)
          return c.*member;
        else
          return static_cast<int64_t>(c.*member);
      },
      k.member);
}

// ---- parsing and validation ---------------------------------------------------------------------

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// What a knob accepts, for error messages and the docs' "accepted" column.
std::string accepted(const Knob& k, bool markdown) {
  auto bound = [&](int64_t v) { return k.kind == Kind::size ? format_size(v) : std::to_string(v); };
  switch (k.kind) {
    case Kind::integer:
    case Kind::size: {
      std::string s = k.max == kNoMax ? ">= " + bound(k.min) : bound(k.min) + ".." + bound(k.max);
      if (k.rule == Rule::multiple_of_64) s += ", a multiple of 64";
      return s;
    }
    case Kind::floating: return ">= " + std::to_string(k.min);
    case Kind::duration:
      return markdown ? ">= " + std::to_string(k.min) + " s; `90s`, `15m`, `2h`"
                      : ">= " + std::to_string(k.min) + " seconds (or 90s, 15m, 2h)";
    case Kind::boolean: return "true, false";
    case Kind::choice:
    case Kind::level: {
      std::string s;
      for (const char* c : k.choices) s += std::string(s.empty() ? "" : markdown ? ", " : "|") + c;
      return s;
    }
    case Kind::string:
      if (k.rule == Rule::path_component)
        return markdown ? "letters, digits, `.` `_` `-`; not `.` or `..`"
                        : "letters, digits, '.', '_', '-' (not \".\" or \"..\"), or empty";
      if (k.rule == Rule::not_empty) return markdown ? "a path" : "a non-empty path";
      if (k.rule == Rule::not_empty_text) return markdown ? "a name" : "a non-empty name";
      if (k.rule == Rule::signal_name) return exit_signal_choices();
      if (k.rule == Rule::host_port) return markdown ? "`HOST:PORT` or empty" : "HOST:PORT, or empty";
      return "";
  }
  return "";
}

// "" when the value is acceptable, else the reason.
std::string check(const Knob& k, const Value& v) {
  if (k.kind == Kind::integer || k.kind == Kind::size) {
    int64_t i = std::get<int64_t>(v);
    if (i < k.min || i > k.max) return "out of range";
    if (k.rule == Rule::multiple_of_64 && i % 64 != 0) return "not a multiple of 64";
  } else if (k.kind == Kind::floating || k.kind == Kind::duration) {
    double d = std::get<double>(v);
    if (!std::isfinite(d)) return "not a finite number";
    if (d < static_cast<double>(k.min)) return "out of range";
  } else if (k.kind == Kind::string) {
    const std::string& s = std::get<std::string>(v);
    if ((k.rule == Rule::not_empty || k.rule == Rule::not_empty_text) && s.empty()) return "empty";
    if (k.rule == Rule::host_port && !s.empty()) {
      size_t colon = s.rfind(':');
      std::string port = colon == std::string::npos ? "" : s.substr(colon + 1);
      if (colon == std::string::npos || colon == 0 || port.empty() || port.size() > 5 ||
          port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) < 1 || std::stoi(port) > 65535)
        return "not HOST:PORT (a port 1..65535)";
    }
    if (k.rule == Rule::signal_name && parse_exit_signal(s) == 0)
      return "not a signal that can ask for an exit";
    if (k.rule == Rule::path_component && !s.empty()) {
      if (s == "." || s == "..") return "not a usable directory name";
      for (char c : s)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
          return "contains a character that is not safe in a directory name";
    }
  }
  return "";
}

std::optional<int64_t> parse_int(const std::string& text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

std::optional<int64_t> parse_size(const std::string& text) {
  auto bytes = units::parse_size(text);
  if (!bytes) {
    // Well formed but past 64 bits: saturate, so that the bounds say "out of range".
    if (bytes.status().message().find("too large") != std::string::npos) return kNoMax;
    return std::nullopt;
  }
  return *bytes > static_cast<uint64_t>(kNoMax) ? kNoMax : static_cast<int64_t>(*bytes);
}

std::optional<int64_t> parse_choice(const Knob& k, const std::string& text) {
  std::string t = lower(text);
  for (size_t i = 0; i < k.choices.size(); ++i)
    if (t == k.choices[i]) return static_cast<int64_t>(i);
  return std::nullopt;
}

// An environment value (or a table default) to a Value; a reason when malformed.
std::variant<Value, std::string> from_text(const Knob& k, const std::string& raw) {
  std::string text = k.kind == Kind::string ? raw : trim(raw);
  switch (k.kind) {
    case Kind::integer:
      if (auto i = parse_int(text)) return Value(*i);
      return std::string("not an integer");
    case Kind::floating: {
      double d = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), d);
      if (ec == std::errc() && end == text.data() + text.size() && !text.empty()) return Value(d);
      return std::string("not a number");
    }
    case Kind::boolean: {
      std::string t = lower(text);
      if (t == "1" || t == "true" || t == "yes" || t == "on") return Value(true);
      if (t == "0" || t == "false" || t == "no" || t == "off") return Value(false);
      return std::string("not a boolean");
    }
    case Kind::string: return Value(text);
    case Kind::choice:
    case Kind::level:
      if (auto i = parse_choice(k, text)) return Value(*i);
      return std::string("unknown value");
    case Kind::size:
      if (auto i = parse_size(text)) return Value(*i);
      return std::string("not a size");
    case Kind::duration:
      if (auto d = units::parse_duration(text)) return Value(*d);
      return std::string("not a duration");
  }
  return std::string("unsupported");
}

}  // namespace cairn::knob
