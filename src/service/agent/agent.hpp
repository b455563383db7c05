// An agent: one process under a manager, serving one application. It listens for the application's
// ranks (TCP sessions, each opened with the application's key), and moves the versions they hand over
// from their L1 slots to the prefix through its buffer pool, one transfer at a time, in arrival order:
//
//   pull  fi_read each chunk of the rank's registered slot into a free buffer
//   push  credit free buffers to the rank, which fi_writes chunks into them and says so
//
// then the chunk sink verifies and writes each chunk in stream order and finishes the rank's files; the
// rank hears `done`. Every half second the agent tells its ranks it is alive (progress) and its manager
// its load (agent_stats, on stdout). Its assignment (start_agent) arrives on stdin; stdin closing means
// the manager is gone, and the agent stops, as on SIGTERM.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "base/layout.hpp"
#include "base/manifest.hpp"
#include "fabric/buffer_pool.hpp"
#include "fabric/endpoint.hpp"
#include "fabric/pull_stream.hpp"
#include "fabric/rma_queue.hpp"
#include "l3/l3_store.hpp"
#include "service/agent/chunk_sink.hpp"
#include "service/agent/rate_limit.hpp"
#include "wire/session_messages.hpp"
#include "wire/socket.hpp"

namespace cairn::service {

struct AgentOptions {
  std::string listen_host = "127.0.0.1";  // where ranks connect (the manager's --listen)
  std::string work_dir;                   // turnstiles of this checkpoint node
  double bandwidth_mbs = 0;               // at most this many MB/s moved (0: no limit)
  double stall_timeout_s = 60;            // a transfer without any completion this long fails
};

// Runs the agent until SIGTERM or stdin closes; the exit status.
int run_agent(const AgentOptions& o);

class Agent {
 public:
  explicit Agent(AgentOptions o) : opts_(std::move(o)) {}
  int run();

 private:
  struct Session {
    uint64_t id = 0;
    std::unique_ptr<wire::Connection> conn;
    bool welcomed = false;
    uint32_t rank = 0;
    uint64_t peer = 0;  // fi_addr of the rank's endpoint
    bool has_peer = false;
  };
  struct Request {
    uint64_t session = 0;
    wire::Flush flush;
    Manifest manifest;
  };
  struct Transfer {
    uint64_t id = 0;
    Request req;
    double started = 0, last_completion = 0;
    uint64_t issued = 0;     // pull: bytes asked for; push: bytes credited
    uint64_t delivered = 0;  // bytes handed to the sink, in order
    uint64_t written = 0;    // bytes whose buffers came back written
    std::map<uint64_t, std::pair<uint32_t, uint32_t>> landed;  // offset -> (buffer, len), not yet delivered
    std::set<uint32_t> credited;   // push: buffers the rank may write into
    std::set<uint64_t> received;   // push: offsets announced
    std::map<uint32_t, uint32_t> out;  // buffers taken for this transfer -> their chunk's length (0: credited)
    bool ended = false, finished = false, aborting = false;
    Status outcome;
  };

  Status setup();
  void loop();
  // sessions
  void accept_sessions();
  void on_session_input(Session& s);
  void on_frame(Session& s, const wire::Frame& f);
  template <class M>
  void handle(Session& s, const wire::Frame& f, void (Agent::*handler)(Session&, const M&));
  void on_hello(Session& s, const wire::SessionHello& m);
  void on_flush(Session& s, const wire::Flush& m);
  void on_cancel(Session& s, const wire::Cancel& m);
  void on_pushed(Session& s, const wire::Pushed& m);
  void on_list(Session& s, const wire::ListVersions& m);
  void on_restore(Session& s, const wire::Restore& m);  // agent_restore.cpp
  void refuse(Session& s, const Status& why);
  void close_session(uint64_t id, const std::string& why);
  // transfers (agent_transfer.cpp)
  void start_next();
  void drive();
  void issue_reads();
  void grant_credits();
  void deliver();
  void on_sink_events();
  void on_read_done(const fabric::PullStream::Piece& p, const Status& st);
  void progress_rma();  // the endpoint's completions: the reads of the transfer
  void fail_transfer(const Status& why);
  void finish_transfer();
  void release_buffer(uint32_t buffer);
  void end_if_quiet();
  Status check_placement(const wire::Flush& f) const;
  bool throttle_allows(uint64_t bytes);
  // reports
  void tick();
  void send_stats();

  AgentOptions opts_;
  wire::StartAgent job_;
  Layout layout_;
  l3::WriteOptions write_opts_;
  fs::Fd listen_, signals_;
  std::string address_;
  std::unique_ptr<fabric::Endpoint> ep_;
  std::unique_ptr<fabric::RmaQueue> rma_;  // every one-sided transfer of ep_: the pull, a restore's writes
  std::unique_ptr<fabric::BufferPool> pool_;
  std::unique_ptr<fabric::PullStream> pull_;  // pull mode: the active transfer's slot into the pool
  ChunkSink sink_;
  std::unique_ptr<wire::Connection> manager_;  // stdin (start_agent, then EOF) / stdout (agent_up, agent_stats)
  std::map<uint64_t, Session> sessions_;
  uint64_t next_session_ = 1, next_transfer_ = 1;
  std::deque<Request> queue_;
  std::unique_ptr<Transfer> active_;
  std::vector<std::pair<double, uint32_t>> quarantine_;  // push: buffers of an aborted transfer, freed later
  bool stop_ = false;
  double last_tick_ = 0;
  std::optional<RateLimit> limit_;  // --bandwidth
  double throttled_until_ = 0;      // a transfer waits for the limit until then (0: it does not)
  // counters for agent_stats
  uint64_t bytes_drained_ = 0, transfers_done_ = 0, transfers_failed_ = 0;
  double busy_s_ = 0;  // time with a transfer active, counted per transfer
};

}  // namespace cairn::service
