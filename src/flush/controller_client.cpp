#include "flush/controller_client.hpp"

#include <unistd.h>

#include <algorithm>

#include "base/log.hpp"

namespace cairn::flush {

void ControllerClient::job_warning(const std::string& message) const {
  if (s_.rank == 0)
    LOG_WARN("%s", message.c_str());
  else
    LOG_INFO("%s", message.c_str());
}

bool ControllerClient::dial() {
  auto fd = wire::connect_tcp(s_.controller, std::min(s_.timeout_s, 2.0));
  if (!fd) {
    if (!warned_unavailable_)
      job_warning("checkpoint service " + s_.controller.str() + " unreachable (" + fd.status().message() +
                  "): versions go through the embedded flusher; trying again");
    warned_unavailable_ = true;
    next_ = wire::monotonic_seconds() + backoff_;
    backoff_ = std::min(backoff_ * 2, 10.0);
    return false;
  }
  ctl_ = std::make_unique<wire::Connection>(std::move(*fd), s_.controller.str());
  reported_bytes_ = 0;  // a new controller knows nothing yet
  reported_interval_ = 0;
  return true;
}

std::string ControllerClient::local_ip() const { return wire::local_ip(ctl_->fd()); }

void ControllerClient::give_up() {
  ctl_.reset();
  next_ = wire::monotonic_seconds() + 3600 * 24 * 365.0;  // no point trying again
}

void ControllerClient::register_rank(const std::string& provider) {
  wire::RegisterRank r;
  r.app_name = s_.app_name;
  r.job = s_.job;
  r.key = s_.key;
  r.rank = s_.rank;
  r.nranks = s_.nranks;
  r.bytes = s_.bytes;
  r.interval_s = s_.interval_s;
  r.prefix = s_.prefix;
  r.data_roots = s_.data_roots;
  r.mode = s_.mode;
  r.agents_wanted = s_.agents_wanted;
  r.chunk_size = s_.chunk_size;
  r.pool_bytes = s_.pool_bytes;
  r.turnstile_width = s_.turnstile_width;
  r.provider = provider;
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  r.host = host;
  r.pid = static_cast<uint32_t>(getpid());
  ctl_->send_message(r);
  registered_ = false;
  have_assignment_ = have_offer_ = switch_asked_ = false;
}

void ControllerClient::unregister() {
  if (ctl_ && registered_) {
    ctl_->send_message(wire::Unregister{app_id_, s_.key, s_.rank});
    ctl_->flush_all(0.5).ignore();
  }
}

void ControllerClient::on_frame(const wire::Frame& f) {
  if (f.type == wire::Type::error) {
    auto e = wire::decode<wire::ErrorMsg>(f.payload);
    std::string why = e ? e->message : e.status().message();
    // Refused outright (a bad registration) or no room for an agent now: the embedded flusher writes
    // meanwhile; an assignment may still come on this connection when a checkpoint node frees.
    job_warning("checkpoint service: " + why + "; versions go through the embedded flusher meanwhile");
    registered_ = true;
    link_.controller_refused(why);
    return;
  }
  auto a = wire::expect<wire::Assigned>(f);
  if (!a) return lost(a.status().message());
  if (have_assignment_ && a->agent_id != assigned_.agent_id) {
    // Not an answer (we have an agent): the controller scaled the application's agents. Taken between
    // versions (offer_due), never under a version in flight.
    offer_ = *a;
    have_offer_ = true;
    offer_at_ = wire::monotonic_seconds();
    LOG_INFO("checkpoint service: agent %llu at %s offered (slot %u); taken between versions",
             static_cast<unsigned long long>(a->agent_id), a->agent_address.c_str(), a->slot);
    return;
  }
  if (have_offer_ && offer_.agent_id == a->agent_id) have_offer_ = false;
  registered_ = true;
  backoff_ = 0.5;
  warned_unavailable_ = false;
  app_id_ = a->app_id;
  bool changed = !have_assignment_ || assigned_.agent_id != a->agent_id;
  bool replaced = changed && assigned_.agent_id && assigned_.agent_id != a->agent_id;
  assigned_ = *a;
  have_assignment_ = true;
  link_.agent_assigned(changed, replaced);
  LOG_INFO("checkpoint service: application %llu, agent %llu at %s on %s", static_cast<unsigned long long>(a->app_id),
           static_cast<unsigned long long>(a->agent_id), a->agent_address.c_str(), a->manager.c_str());
}

void ControllerClient::lost(const std::string& why) {
  job_warning("checkpoint service " + s_.controller.str() + " lost (" + why +
              "): versions go through the embedded flusher until it is back");
  ctl_.reset();
  registered_ = false;
  have_assignment_ = have_offer_ = switch_asked_ = false;
  next_ = wire::monotonic_seconds() + backoff_;
  warned_unavailable_ = true;
  link_.controller_gone();
}

void ControllerClient::agent_unreachable() {
  ctl_->send_message(wire::Reassign{app_id_, s_.key, s_.rank, assigned_.agent_id});
  have_assignment_ = false;
}

void ControllerClient::replace_agent() {
  if (ctl_ && registered_ && have_assignment_) {
    ctl_->send_message(wire::Reassign{app_id_, s_.key, s_.rank, assigned_.agent_id});
    have_assignment_ = have_offer_ = switch_asked_ = false;
  }
}

void ControllerClient::take_offer() {
  LOG_INFO("checkpoint service: moving from agent %llu to agent %llu at %s between versions",
           static_cast<unsigned long long>(assigned_.agent_id), static_cast<unsigned long long>(offer_.agent_id),
           offer_.agent_address.c_str());
  assigned_ = offer_;
  have_assignment_ = true;
  have_offer_ = switch_asked_ = false;
  // Ask again without a lost agent: the controller records that we took it (and answers with it).
  if (ctl_) ctl_->send_message(wire::Reassign{app_id_, s_.key, s_.rank, 0});
}

void ControllerClient::report_usage(uint64_t bytes, double interval_s) {
  bool interval_moved = interval_s > 0 && (reported_interval_ == 0 || interval_s > reported_interval_ * 1.25 ||
                                           interval_s < reported_interval_ * 0.8);
  if (ctl_ && registered_ && (bytes != reported_bytes_ || interval_moved)) {
    ctl_->send_message(wire::RankUsage{app_id_, s_.key, s_.rank, bytes, interval_s});
    reported_bytes_ = bytes;
    if (interval_s > 0) reported_interval_ = interval_s;
  }
}

}  // namespace cairn::flush
