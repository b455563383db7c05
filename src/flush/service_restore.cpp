// ServiceLink::restore: restart from L3 through the rank's agent (docs/service.md, "Restart through the
// agents"). The caller hands over where its regions are; the link's thread registers them for remote
// writes, asks the agent (restore), keeps the provider progressing while the agent fi_writes into them
// (tcp has manual data progress), and revokes the registrations when the agent answers (restored), when
// the agent is lost, or when the caller gives up: once restore() returns no write of the agent can land.
#include "base/log.hpp"
#include "flush/service_link_impl.hpp"

namespace cairn::flush {

Status ServiceLink::restore(uint64_t version, const std::vector<RestoreTarget>& targets, double timeout_s) {
  Impl& i = *impl_;
  std::unique_lock<std::mutex> lock(i.mu);
  if (!i.agent.available || i.agent.id == 0)
    return make_error(Code::ERR_NOT_SUPPORTED, "restore through the service: no agent serves this rank");
  if (i.restore) return make_error(Code::ERR_SEQUENCE, "restore through the service: one is already under way");
  i.restore = std::make_unique<LinkRestore>();
  i.restore->version = version;
  i.restore->targets = targets;
  i.notify();
  auto ended = [&] { return i.restore->ended; };
  if (!i.cv.wait_for(lock, std::chrono::duration<double>(timeout_s), ended)) {
    i.restore->abandon = true;  // the thread revokes the registrations on its next round
    i.notify();
    if (!i.cv.wait_for(lock, std::chrono::seconds(10), ended)) i.restore->regions.clear();
    if (i.restore->outcome.is_ok())
      i.restore->outcome = make_error(Code::ERR_IO, "the agent did not restore version %llu within %.0f s",
                                      static_cast<unsigned long long>(version), timeout_s);
  }
  Status out = i.restore->outcome;
  i.restore.reset();
  return out;
}

void ServiceLink::Impl::drive_restore() {
  if (!restore || restore->ended) return;
  if (restore->abandon) return end_restore(make_error(Code::ERR_IO, "given up"));
  if (restore->sent || !session.welcomed()) return;
  wire::Restore msg;
  msg.version = restore->version;
  for (const auto& t : restore->targets) {
    auto mr = session.endpoint()->register_memory(t.ptr, std::max<uint64_t>(t.size, 1), fabric::kRemoteWrite);
    if (!mr) return end_restore(mr.status().prefixed("registering region '" + t.name + "'"));
    msg.regions.push_back({t.name, t.size, (*mr)->remote_base(), (*mr)->key()});
    restore->regions.push_back(std::move(*mr));
  }
  session.connection()->send_message(msg);
  restore->sent = true;
}

void ServiceLink::Impl::on_restored(const wire::Restored& m) {
  if (!restore || !restore->sent || restore->ended || m.version != restore->version) return;
  if (m.code == 0)
    end_restore(Status::ok());
  else
    end_restore(Status(static_cast<Code>(m.code), "agent: " + m.message));
}

void ServiceLink::Impl::end_restore(const Status& why) {
  restore->regions.clear();  // the keys die: no later write of the agent lands
  restore->ended = true;
  restore->outcome = why;
  cv.notify_all();
}

}  // namespace cairn::flush
