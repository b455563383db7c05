#include "flush/service_flusher.hpp"

#include "base/log.hpp"

namespace cairn::flush {

ServiceFlusher::ServiceFlusher(ServiceSettings settings, Layout layout, std::function<l3::WriteOptions()> l3_options,
                               std::unique_ptr<Flusher> fallback)
    : settings_(std::move(settings)),
      layout_(std::move(layout)),
      l3_options_(std::move(l3_options)),
      fallback_(std::move(fallback)),
      link_(std::make_unique<ServiceLink>(settings_)) {
  bool ready = link_->wait_ready(settings_.timeout_s);
  if (settings_.rank == 0)
    LOG_INFO("service mode (%s): %s", settings_.controller.str().c_str(),
             ready ? ("agent " + std::to_string(link_->agent_id()) + " on " + link_->agent_where()).c_str()
                   : "no agent yet; the embedded flusher writes until one is ready");
}

ServiceFlusher::~ServiceFlusher() {
  for (auto& [id, t] : tickets_) {
    if (t.on_fallback) {
      fallback_->cancel(t.fallback).ignore();
    } else {
      link_->cancel(t.job).ignore();
    }
  }
  link_.reset();
}

const char* ServiceFlusher::via(FlushTicket ticket) const {
  auto it = tickets_.find(ticket);
  return it != tickets_.end() && it->second.on_fallback ? fallback_->name() : name();
}

Result<FlushTicket> ServiceFlusher::post(const FlushRequest& request) {
  if (!request.manifest || (!request.data && request.manifest->total_size > 0))
    return make_error(Code::ERR_INVALID_ARG, "ServiceFlusher::post: a request without manifest or data");
  Handed t;
  t.request = request;
  FlushTicket id = next_++;
  const l3::WriteOptions opts = l3_options_();
  Status why_not = Status::ok();
  if (opts.zstd_level > 0 && opts.files_per_node > 0) {
    // A shared file's extent is reserved on the rank's node before any byte is written, so its size must
    // be known then: the compressed size is known only after compressing, which is the agent's part.
    if (!warned_compress_ && settings_.rank == 0)
      LOG_WARN("service mode: compress with shared files (l3_files_per_node) is written by the embedded flusher");
    warned_compress_ = true;
    why_not = make_error(Code::ERR_NOT_SUPPORTED, "compression into shared files");
  } else if (!link_->available()) {
    why_not = make_error(Code::ERR_NOT_SUPPORTED, "the service is not available");
  } else {
    // Compressed: the agent compresses each checksum chunk as it lands and records the sizes.
    auto place = l3::place_rank(layout_, *request.manifest, request.manifest->total_size, &opts);
    auto job = place ? link_->post(request.version, *request.manifest, request.data, request.slot, *place,
                                   opts.zstd_level)
                     : Result<FlushTicket>(place.status());
    if (job)
      t.job = *job;
    else
      why_not = job.status();
  }
  if (!why_not.is_ok()) {
    auto fb = fallback_->post(request);
    if (!fb) return fb.status();
    t.on_fallback = true;
    t.fallback = *fb;
    if (request.via) *request.via = fallback_->name();
    LOG_DEBUG("version %llu: embedded flusher (%s)", static_cast<unsigned long long>(request.version),
              why_not.message().c_str());
  }
  tickets_.emplace(id, std::move(t));
  return id;
}

// The service gave the version up (its ticket at the link is finished): the fallback writes it, from the
// same slot.
Status ServiceFlusher::to_fallback(Handed& t, const Status& why) {
  LOG_WARN("version %llu: %s; the embedded flusher writes it", static_cast<unsigned long long>(t.request.version),
           why.message().c_str());
  CAIRN_ASSIGN_OR_RETURN(fb, fallback_->post(t.request));
  t.on_fallback = true;
  t.fallback = fb;
  if (t.request.via) *t.request.via = fallback_->name();
  return Status::ok();
}

Status ServiceFlusher::test(FlushTicket ticket, bool* done) {
  *done = false;
  auto it = tickets_.find(ticket);
  if (it == tickets_.end()) return make_error(Code::ERR_INVALID_ARG, "ServiceFlusher::test: unknown ticket %llu",
                                             static_cast<unsigned long long>(ticket));
  Handed& t = it->second;
  if (!t.on_fallback) {
    bool ended = false;
    Status outcome = link_->test(t.job, &ended);
    if (!ended) return Status::ok();
    if (outcome.is_ok()) {
      *done = true;
      tickets_.erase(it);
      return Status::ok();
    }
    Status moved = to_fallback(t, outcome);
    if (!moved.is_ok()) {
      *done = true;
      tickets_.erase(it);
      return moved;
    }
  }
  Status st = fallback_->test(t.fallback, done);
  if (*done) tickets_.erase(it);
  return st;
}

Status ServiceFlusher::wait(FlushTicket ticket) {
  auto it = tickets_.find(ticket);
  if (it == tickets_.end()) return make_error(Code::ERR_INVALID_ARG, "ServiceFlusher::wait: unknown ticket %llu",
                                             static_cast<unsigned long long>(ticket));
  Handed& t = it->second;
  if (!t.on_fallback) {
    // Never block on the service longer than its timeout: then the embedded flusher takes over.
    bool ended = false;
    Status outcome = link_->wait(t.job, settings_.timeout_s, &ended);
    if (ended && outcome.is_ok()) {
      tickets_.erase(it);
      return Status::ok();
    }
    if (!ended) {
      link_->cancel(t.job).ignore();
      outcome = make_error(Code::ERR_IO, "the service did not finish within %.1f s", settings_.timeout_s);
    }
    Status moved = to_fallback(t, outcome);
    if (!moved.is_ok()) {
      tickets_.erase(it);
      return moved;
    }
  }
  Status st = fallback_->wait(t.fallback);
  tickets_.erase(it);
  return st;
}

Status ServiceFlusher::cancel(FlushTicket ticket) {
  auto it = tickets_.find(ticket);
  if (it == tickets_.end()) return make_error(Code::ERR_INVALID_ARG, "ServiceFlusher::cancel: unknown ticket %llu",
                                             static_cast<unsigned long long>(ticket));
  Handed t = std::move(it->second);
  tickets_.erase(it);
  if (t.on_fallback) return fallback_->cancel(t.fallback);
  return link_->cancel(t.job).is_ok() ? Status::ok() : make_error(Code::ERR_CANCELLED, "cancelled");
}

}  // namespace cairn::flush
