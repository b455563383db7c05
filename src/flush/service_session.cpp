// ServiceLink: the session with the rank's agent, the slots' registrations, push writes, deadlines.
#include <unistd.h>

#include "base/log.hpp"
#include "flush/service_link_impl.hpp"

namespace cairn::flush {

using FlushState = ServiceLink::FlushState;

void ServiceLink::Impl::connect_agent() {
  auto hp = wire::parse_host_port(assigned.agent_address);
  auto fd = hp ? wire::connect_tcp(*hp, std::min(s.timeout_s, 2.0)) : Result<fs::Fd>(hp.status());
  if (!fd) {
    LOG_WARN("agent %llu at %s unreachable: %s", static_cast<unsigned long long>(assigned.agent_id),
             assigned.agent_address.c_str(), fd.status().message().c_str());
    ctl->send_message(wire::Reassign{app_id, s.key, s.rank, assigned.agent_id});
    have_assignment = false;
    return;
  }
  agent = std::make_unique<wire::Connection>(std::move(*fd), assigned.agent_address);
  welcomed = false;
  agent->send_message(wire::SessionHello{app_id, s.key, s.rank, ep->address()});
}

void ServiceLink::Impl::on_agent_frame(const wire::Frame& f) {
  double now = wire::monotonic_seconds();
  auto job_of = [&](uint64_t version) -> LinkJob* {
    for (auto& [id, j] : jobs)
      if (j.version == version && j.state == FlushState::pending && j.sent) return &j;
    return nullptr;
  };
  switch (f.type) {
    case wire::Type::session_welcome: {
      auto m = wire::decode<wire::SessionWelcome>(f.payload);
      if (!m) return agent_lost(m.status().message(), true);
      if (welcomed) return agent_lost("a second session_welcome", true);
      if (m->mode == wire::TransferMode::push) {
        if (!ep->delivery_complete()) return agent_lost("push needs writes completed at delivery (FI_DELIVERY_COMPLETE)", true);
        auto peer = ep->insert_peer(m->fabric_address);
        if (!peer) return agent_lost(peer.status().message(), true);
        agent_peer = *peer;
        have_agent_peer = true;
      }
      welcome = *m;
      welcomed = true;
      std::lock_guard<std::mutex> lock(mu);
      agent_id_pub = assigned.agent_id;
      agent_where_pub = assigned.manager + " " + assigned.agent_address;
      available = true;
      settled = true;
      cv.notify_all();
      return;
    }
    case wire::Type::progress: {
      auto m = wire::decode<wire::Progress>(f.payload);
      if (!m) return agent_lost(m.status().message(), true);
      std::lock_guard<std::mutex> lock(mu);
      if (LinkJob* j = job_of(m->version)) j->last_heard = now;
      return;
    }
    case wire::Type::credit: {
      auto m = wire::decode<wire::Credit>(f.payload);
      if (!m) return agent_lost(m.status().message(), true);
      std::lock_guard<std::mutex> lock(mu);
      if (LinkJob* j = job_of(m->version)) {
        j->last_heard = now;
        j->credits.insert(j->credits.end(), m->buffers.begin(), m->buffers.end());
      }
      return;
    }
    case wire::Type::done: {
      auto m = wire::decode<wire::Done>(f.payload);
      if (!m) return agent_lost(m.status().message(), true);
      std::lock_guard<std::mutex> lock(mu);
      LinkJob* j = job_of(m->version);
      if (!j) return;
      if (m->code == 0)
        end_job(*j, FlushState::done, Status::ok());
      else
        end_job(*j, FlushState::failed, Status(static_cast<Code>(m->code), "agent: " + m->message));
      return;
    }
    case wire::Type::restored: {
      auto m = wire::decode<wire::Restored>(f.payload);
      if (!m) return agent_lost(m.status().message(), true);
      std::lock_guard<std::mutex> lock(mu);
      on_restored(*m);
      return;
    }
    case wire::Type::error: {
      auto m = wire::decode<wire::ErrorMsg>(f.payload);
      return agent_lost("the agent refused: " + (m ? m->message : m.status().message()), true);
    }
    default:
      return agent_lost(std::string("unexpected ") + wire::type_name(uint16_t(f.type)) + " message", true);
  }
}

// The agent is gone or no use: its jobs go to the next agent (sent again from the start, under new
// keys) within their deadlines; with ask_for_another the controller is told to replace it.
void ServiceLink::Impl::agent_lost(const std::string& why, bool ask_for_another) {
  LOG_WARN("agent %llu lost: %s", static_cast<unsigned long long>(assigned.agent_id), why.c_str());
  agent.reset();
  welcomed = false;
  if (have_agent_peer) ep->remove_peer(agent_peer);
  have_agent_peer = false;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [id, j] : jobs)
      if (j.state == FlushState::pending && j.sent) {
        j.sent = false;
        j.credits.clear();
        j.next_offset = 0;
        revoke(j.slot);
      }
    agent_id_pub = 0;
    agent_suspect = false;
    if (restore && restore->sent && !restore->ended) end_restore(Status(Code::ERR_IO, "agent lost: " + why));
  }
  if (ask_for_another && ctl && registered && have_assignment) {
    ctl->send_message(wire::Reassign{app_id, s.key, s.rank, assigned.agent_id});
    have_assignment = have_offer = switch_asked = false;
  }
}

void ServiceLink::Impl::revoke(int slot) { slot_mr.erase(slot); }

// The version's stream is registered when it is handed to an agent and the registration closed when the
// job ends, whatever the outcome (end_job): a key is valid for one version's transfer only. Per version,
// not per slot, because the stream is not always the slot's own mapping (a file-API version is a view
// mapped for the version and unmapped after it), and a registration must never outlive its memory.
Result<fabric::MemoryRegion*> ServiceLink::Impl::registration(LinkJob& j) {
  const uint64_t size = j.manifest.total_size;
  if (size == 0) return static_cast<fabric::MemoryRegion*>(nullptr);
  auto it = slot_mr.find(j.slot);
  if (it != slot_mr.end() && it->second->base() == j.data && it->second->length() == size) return it->second.get();
  slot_mr.erase(j.slot);
  CAIRN_ASSIGN_OR_RETURN(mr, ep->register_memory(j.data, size, fabric::kRemoteRead | fabric::kLocalWrite));
  fabric::MemoryRegion* p = mr.get();
  slot_mr[j.slot] = std::move(mr);
  return p;
}

void ServiceLink::Impl::send_jobs() {
  for (auto& [id, j] : jobs) {
    if (j.state != FlushState::pending || j.sent || j.cancel_requested) continue;
    // The controller learns what we checkpoint and how often (placement weighs it): a new size, the first
    // measured interval, or one that moved by more than a quarter.
    bool interval_moved = interval_s > 0 && (reported_interval == 0 || interval_s > reported_interval * 1.25 ||
                                             interval_s < reported_interval * 0.8);
    if (ctl && registered && (j.manifest.total_size != reported_bytes || interval_moved)) {
      ctl->send_message(wire::RankUsage{app_id, s.key, s.rank, j.manifest.total_size, interval_s});
      reported_bytes = j.manifest.total_size;
      if (interval_s > 0) reported_interval = interval_s;
    }
    auto mr = registration(j);
    if (!mr) {
      end_job(j, FlushState::failed, mr.status());
      continue;
    }
    wire::Flush f;
    f.version = j.version;
    f.manifest = j.manifest_bytes;
    if (*mr) {
      f.slot_addr = (*mr)->remote_base() + static_cast<uint64_t>(j.data - (*mr)->base());
      f.slot_key = (*mr)->key();
    }
    f.placed = j.place.recorded ? (j.place.shared ? 2 : 1) : 0;
    f.zstd_level = static_cast<uint8_t>(j.zstd_level);
    if (j.place.recorded) {
      f.file = j.place.where.file;
      f.offset = j.place.where.offset;
    }
    agent->send_message(f);
    j.sent = true;
    j.sent_to = assigned.agent_id;
    ++j.generation;
    j.next_offset = 0;
    j.credits.clear();
  }
}

void ServiceLink::Impl::push_chunks() {
  for (auto& [id, j] : jobs) {
    if (j.state != FlushState::pending || !j.sent || j.cancel_requested) continue;
    auto mr = slot_mr.find(j.slot);
    const uint64_t size = j.manifest.total_size;
    while (!j.credits.empty() && j.next_offset < size && mr != slot_mr.end()) {
      uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(welcome.chunk_size, size - j.next_offset));
      std::unique_ptr<PushOp> op;
      if (free_ops.empty()) {
        op = std::make_unique<PushOp>();
      } else {
        op = std::move(free_ops.back());
        free_ops.pop_back();
      }
      op->job = id;
      op->generation = j.generation;
      op->offset = j.next_offset;
      op->len = len;
      op->buffer = j.credits.front();
      bool posted = false;
      Status st = ep->write(j.data + j.next_offset, len, mr->second->desc(), agent_peer, op->buffer, welcome.pool_key,
                            op.get(), &posted);
      if (!st.is_ok()) {
        free_ops.push_back(std::move(op));
        end_job(j, FlushState::failed, st.prefixed("pushing to the agent"));
        break;
      }
      if (!posted) {
        free_ops.push_back(std::move(op));
        break;  // the queue is full: completions first
      }
      j.credits.pop_front();
      j.next_offset += len;
      ++j.writes_in_flight;
      op.release();  // the provider holds it until its completion
    }
  }
}

void ServiceLink::Impl::progress_fabric() {
  for (int round = 0; round < 16; ++round) {
    fabric::Completion c[64];
    auto n = ep->poll(c, 64);
    if (!n || *n == 0) return;
    bool lost = false;
    std::string why;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (int i = 0; i < *n; ++i) {
        std::unique_ptr<PushOp> op(static_cast<PushOp*>(c[i].op));
        auto it = jobs.find(op->job);
        if (it != jobs.end()) {
          LinkJob& j = it->second;
          if (--j.writes_in_flight == 0 && j.cancel_requested && j.state != FlushState::pending) j.cancel_requested = false;
          bool current = j.generation == op->generation && j.sent && j.state == FlushState::pending;
          if (current && c[i].status.is_ok() && agent) {
            agent->send_message(wire::Pushed{j.version, op->offset, op->len, op->buffer});
          } else if (current && !c[i].status.is_ok()) {
            lost = true;
            why = c[i].status.message();
          }
        }
        free_ops.push_back(std::move(op));
      }
      cv.notify_all();
    }
    if (lost) agent_lost("a push failed: " + why, true);
    if (*n < 64) return;
  }
}

void ServiceLink::Impl::check_deadlines() {
  double now = wire::monotonic_seconds();
  for (auto& [id, j] : jobs) {
    if (j.state != FlushState::pending || now - j.last_heard <= s.timeout_s) continue;
    if (j.sent) agent_suspect = true;
    end_job(j, FlushState::failed,
            make_error(Code::ERR_IO, "no word from the checkpoint service about version %llu for %.1f s",
                       static_cast<unsigned long long>(j.version), s.timeout_s));
  }
}

void ServiceLink::Impl::handle_cancels() {
  for (auto& [id, j] : jobs) {
    if (!j.cancel_requested) continue;
    if (j.state == FlushState::pending) {
      if (j.sent && agent) agent->send_message(wire::Cancel{j.version});
      end_job(j, FlushState::cancelled, make_error(Code::ERR_CANCELLED, "cancelled"));
    }
    if (j.writes_in_flight == 0) j.cancel_requested = false;
  }
  cv.notify_all();
}

void ServiceLink::Impl::end_job(LinkJob& j, FlushState st, const Status& why) {
  j.state = st;
  j.outcome = st == FlushState::done ? Status::ok() : why;
  revoke(j.slot);  // whoever had the key, it is dead now (a job that is resent registers anew)
  cv.notify_all();
}

bool ServiceLink::Impl::fabric_busy() const {
  for (const auto& [id, j] : jobs)
    if (j.state == FlushState::pending || j.writes_in_flight > 0) return true;
  return restore && restore->sent && !restore->ended;  // the agent writes into our memory
}

}  // namespace cairn::flush
