#include "flush/agent_session.hpp"

#include <algorithm>

#include "base/log.hpp"

namespace cairn::flush {

Status AgentSession::open_endpoint(const std::string& node) {
  fabric::EndpointOptions eo;
  eo.provider = s_.provider;
  eo.node = node;
  CAIRN_ASSIGN_OR_RETURN(e, fabric::Endpoint::open(eo));
  ep_ = std::move(e);
  rma_ = std::make_unique<fabric::RmaQueue>(*ep_);
  return Status::ok();
}

void AgentSession::close_endpoint() {
  slots_.clear();
  rma_.reset();
  pushes_.clear();
  ep_.reset();
}

bool AgentSession::connect(const wire::Assigned& a, uint64_t app_id) {
  auto hp = wire::parse_host_port(a.agent_address);
  auto fd = hp ? wire::connect_tcp(*hp, std::min(s_.timeout_s, 2.0)) : Result<fs::Fd>(hp.status());
  if (!fd) {
    LOG_WARN("agent %llu at %s unreachable: %s", static_cast<unsigned long long>(a.agent_id), a.agent_address.c_str(),
             fd.status().message().c_str());
    return false;
  }
  conn_ = std::make_unique<wire::Connection>(std::move(*fd), a.agent_address);
  agent_ = a;
  welcomed_ = false;
  conn_->send_message(wire::SessionHello{app_id, s_.key, s_.rank, ep_->address()});
  return true;
}

void AgentSession::close() {
  conn_.reset();
  welcomed_ = false;
  if (have_agent_peer_) ep_->remove_peer(agent_peer_);
  have_agent_peer_ = false;
}

AgentSession::Heard AgentSession::on_frame(const wire::Frame& f, LinkJobs& jobs) {
  double now = wire::monotonic_seconds();
  auto lost = [](std::string why) {
    Heard h;
    h.kind = Heard::Kind::lost;
    h.why = std::move(why);
    return h;
  };
  auto job_of = [&](uint64_t version) -> LinkJob* {
    for (auto& [id, j] : jobs)
      if (j.version == version && j.state == FlushState::pending && j.sent) return &j;
    return nullptr;
  };
  switch (f.type) {
    case wire::Type::session_welcome: {
      auto m = wire::decode<wire::SessionWelcome>(f.payload);
      if (!m) return lost(m.status().message());
      if (welcomed_) return lost("a second session_welcome");
      if (m->mode == wire::TransferMode::push) {
        if (!ep_->delivery_complete()) return lost("push needs writes completed at delivery (FI_DELIVERY_COMPLETE)");
        auto peer = ep_->insert_peer(m->fabric_address);
        if (!peer) return lost(peer.status().message());
        agent_peer_ = *peer;
        have_agent_peer_ = true;
      }
      welcome_ = *m;
      welcomed_ = true;
      Heard h;
      h.kind = Heard::Kind::welcomed;
      return h;
    }
    case wire::Type::progress: {
      auto m = wire::decode<wire::Progress>(f.payload);
      if (!m) return lost(m.status().message());
      if (LinkJob* j = job_of(m->version)) j->last_heard = now;
      return {};
    }
    case wire::Type::credit: {
      auto m = wire::decode<wire::Credit>(f.payload);
      if (!m) return lost(m.status().message());
      if (LinkJob* j = job_of(m->version)) {
        j->last_heard = now;
        j->credits.insert(j->credits.end(), m->buffers.begin(), m->buffers.end());
      }
      return {};
    }
    case wire::Type::done: {
      auto m = wire::decode<wire::Done>(f.payload);
      if (!m) return lost(m.status().message());
      LinkJob* j = job_of(m->version);
      if (!j) return {};
      if (m->code == 0)
        end_job(*j, FlushState::done, Status::ok(), slots_);
      else
        end_job(*j, FlushState::failed, Status(static_cast<Code>(m->code), "agent: " + m->message), slots_);
      Heard h;
      h.ended = true;
      return h;
    }
    case wire::Type::restored: {
      auto m = wire::decode<wire::Restored>(f.payload);
      if (!m) return lost(m.status().message());
      Heard h;
      h.kind = Heard::Kind::restored;
      h.restored = std::move(*m);
      return h;
    }
    case wire::Type::error: {
      auto m = wire::decode<wire::ErrorMsg>(f.payload);
      return lost("the agent refused: " + (m ? m->message : m.status().message()));
    }
    default:
      return lost(std::string("unexpected ") + wire::type_name(uint16_t(f.type)) + " message");
  }
}

void AgentSession::unsend(LinkJobs& jobs) {
  drop_pushes(jobs, [](const Push&) { return true; });  // all were for the agent lost (never to its old address)
  for (auto& [id, j] : jobs)
    if (j.state == FlushState::pending && j.sent) {
      j.sent = false;
      j.credits.clear();
      j.next_offset = 0;
      slots_.revoke(j.slot);
    }
  suspect_ = false;
}

void AgentSession::send_jobs(LinkJobs& jobs, const std::function<void(const LinkJob&)>& before_send) {
  for (auto& [id, j] : jobs) {
    if (j.state != FlushState::pending || j.sent || j.cancel_requested) continue;
    before_send(j);
    auto mr = slots_.acquire(*ep_, j.slot, j.data, j.manifest.total_size);
    if (!mr) {
      end_job(j, FlushState::failed, mr.status(), slots_);
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
    conn_->send_message(f);
    j.sent = true;
    ++j.generation;
    j.next_offset = 0;
    j.credits.clear();
  }
}

// Each credit takes one chunk, queued as a transfer of its own; the queue posts them as the provider
// takes them. A post that fails is reported by the next poll as that write's failure.
void AgentSession::push_chunks(LinkJobs& jobs) {
  for (auto& [id, j] : jobs) {
    if (j.state != FlushState::pending || !j.sent || j.cancel_requested) continue;
    fabric::MemoryRegion* mr = slots_.find(j.slot);
    const uint64_t size = j.manifest.total_size;
    while (!j.credits.empty() && j.next_offset < size && mr) {
      const uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(welcome_.chunk_size, size - j.next_offset));
      const uint64_t tag = next_push_++;
      pushes_[tag] = Push{id, j.generation, j.next_offset, j.credits.front(), len};
      fabric::RmaQueue::Transfer t;
      t.kind = fabric::RmaQueue::Kind::write;
      t.local = const_cast<uint8_t*>(j.data + j.next_offset);  // a write only reads it
      t.len = len;
      t.desc = mr->desc();
      t.peer = agent_peer_;
      t.remote_addr = j.credits.front();
      t.key = welcome_.pool_key;
      t.tag = tag;
      rma_->add(t);
      j.credits.pop_front();
      j.next_offset += len;
      ++j.writes_in_flight;
    }
  }
  if (rma_) (void)rma_->post();  // a failed post comes back from poll as its write's failure
}

int AgentSession::poll(std::vector<fabric::RmaQueue::Done>* done) {
  if (!rma_) return 0;
  auto n = rma_->poll(done);
  return n ? *n : 0;
}

std::optional<std::string> AgentSession::completed(const std::vector<fabric::RmaQueue::Done>& done, LinkJobs& jobs) {
  std::optional<std::string> failed;
  for (const auto& d : done) {
    auto p = pushes_.find(d.tag);
    if (p == pushes_.end()) continue;
    const Push push = p->second;
    pushes_.erase(p);
    auto it = jobs.find(push.job);
    if (it == jobs.end()) continue;
    LinkJob& j = it->second;
    if (--j.writes_in_flight == 0 && j.cancel_requested && j.state != FlushState::pending) j.cancel_requested = false;
    const bool current = j.generation == push.generation && j.sent && j.state == FlushState::pending;
    if (current && d.status.is_ok() && conn_) {
      conn_->send_message(wire::Pushed{j.version, push.offset, push.len, push.buffer});
    } else if (current && !d.status.is_ok()) {
      failed = d.status.prefixed("pushing to the agent").message();
    }
  }
  return failed;
}

void AgentSession::drop_pushes(LinkJobs& jobs, const std::function<bool(const Push&)>& which) {
  if (!rma_) return;
  std::vector<uint64_t> dropped;
  rma_->drop_unposted(&dropped, [&](uint64_t tag) {
    auto p = pushes_.find(tag);
    return p != pushes_.end() && which(p->second);
  });
  for (uint64_t tag : dropped) {
    auto p = pushes_.find(tag);
    if (p == pushes_.end()) continue;
    auto it = jobs.find(p->second.job);
    if (it != jobs.end()) --it->second.writes_in_flight;
    pushes_.erase(p);
  }
}

void AgentSession::check_deadlines(LinkJobs& jobs) {
  double now = wire::monotonic_seconds();
  for (auto& [id, j] : jobs) {
    if (j.state != FlushState::pending || now - j.last_heard <= s_.timeout_s) continue;
    if (j.sent) suspect_ = true;
    end_job(j, FlushState::failed,
            make_error(Code::ERR_IO, "no word from the checkpoint service about version %llu for %.1f s",
                       static_cast<unsigned long long>(j.version), s_.timeout_s),
            slots_);
  }
}

void AgentSession::handle_cancels(LinkJobs& jobs) {
  for (auto& [id, j] : jobs) {
    if (!j.cancel_requested) continue;
    if (j.state == FlushState::pending) {
      if (j.sent && conn_) conn_->send_message(wire::Cancel{j.version});
      end_job(j, FlushState::cancelled, make_error(Code::ERR_CANCELLED, "cancelled"), slots_);
    }
    const uint64_t job = id;
    if (j.writes_in_flight > 0) drop_pushes(jobs, [job](const Push& p) { return p.job == job; });
    if (j.writes_in_flight == 0) j.cancel_requested = false;
  }
}

}  // namespace cairn::flush
