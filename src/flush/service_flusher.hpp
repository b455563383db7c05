// The service flusher: L3 through the checkpoint service's agents (docs/service.md), behind the same
// Flusher contract as the embedded one (pipeline/flusher.hpp). The service is an accelerator, never a
// dependency: a version goes to the fallback flusher (the embedded one) when the service is not
// available when it is posted, when the agents fail it or fall silent for `timeout_s`, or when the
// pipeline waits on it longer than `timeout_s`. The rank's files end up the same either way; who wrote
// them is in the job history (`via`).
//
// A version's bytes go where l3::place_rank puts them, decided here on the rank's node (so that shared
// files' extents are reserved where the embedded flusher reserves them). With compress set, the agents
// compress (their chain's compress stage) into the rank's own file; only compress with shared files
// takes the fallback (the extent would have to be reserved before the compressed size is known).
#pragma once

#include <functional>
#include <map>
#include <memory>

#include "base/layout.hpp"
#include "pipeline/flusher.hpp"
#include "flush/service_link.hpp"

namespace cairn::flush {

class ServiceFlusher : public Flusher {
 public:
  // Registers with the controller and waits at most settings.timeout_s for an agent (cairn_init's part).
  // `l3_options` says how this rank writes L3 now (the pipeline's l3_options()).
  ServiceFlusher(ServiceSettings settings, Layout layout, std::function<l3::WriteOptions()> l3_options,
                 std::unique_ptr<Flusher> fallback);
  ~ServiceFlusher() override;

  const char* name() const override { return "service"; }
  Result<FlushTicket> post(const FlushRequest& request) override;
  Status test(FlushTicket ticket, bool* done) override;
  Status wait(FlushTicket ticket) override;
  Status cancel(FlushTicket ticket) override;

  // Who moved (or is moving) the ticket's version: "service", or the fallback's name once it took over.
  const char* via(FlushTicket ticket) const;
  // Restart from L3 through the agent (ServiceLink::restore), waiting at most service_timeout.
  Status restore(uint64_t version, const std::vector<RestoreTarget>& targets) override {
    return link_->restore(version, targets, settings_.timeout_s);
  }
  // cairn_probe_agents: take an agent the controller offered now (ServiceLink::probe).
  Status probe_agents(bool* changed) override { return link_->probe(changed); }
  // The agent serving this rank now (0: none) and where, for logs, the bench and tests.
  uint64_t agent_id() const { return link_->agent_id(); }

 private:
  struct Handed {  // a version handed over: to the link (its ticket), or to the fallback
    FlushRequest request;
    uint64_t job = 0;
    FlushTicket fallback = 0;
    bool on_fallback = false;
  };
  Status to_fallback(Handed& t, const Status& why);

  ServiceSettings settings_;
  Layout layout_;
  std::function<l3::WriteOptions()> l3_options_;
  std::unique_ptr<Flusher> fallback_;
  std::unique_ptr<ServiceLink> link_;
  std::map<FlushTicket, Handed> tickets_;
  FlushTicket next_ = 1;
  bool warned_compress_ = false;
};

}  // namespace cairn::flush
