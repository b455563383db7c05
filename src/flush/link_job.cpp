#include "flush/link_job.hpp"

namespace cairn::flush {

namespace {
Status unknown(uint64_t id) { return make_error(Code::ERR_INVALID_ARG, "no service job %llu", static_cast<unsigned long long>(id)); }
}  // namespace

uint64_t JobTable::add(LinkJob j) {
  const uint64_t id = j.id = next_id_++;
  if (j.manifest.created_unix_ns > 0) {
    const double made = static_cast<double>(j.manifest.created_unix_ns) / 1e9;
    if (last_made_ > 0 && made > last_made_) interval_s_ = made - last_made_;
    last_made_ = made;
  }
  jobs_.emplace(id, std::move(j));
  return id;
}

LinkJob* JobTable::find(uint64_t id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

bool JobTable::ended(uint64_t id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() || it->second.state != FlushState::pending;
}

Status JobTable::finish(uint64_t id, bool* done) {
  auto it = jobs_.find(id);
  *done = true;
  if (it == jobs_.end()) return unknown(id);
  if (it->second.state == FlushState::pending) {
    *done = false;
    return Status::ok();
  }
  Status outcome = it->second.outcome;
  jobs_.erase(it);
  return outcome;
}

Status JobTable::request_cancel(uint64_t id) {
  LinkJob* j = find(id);
  if (!j) return unknown(id);
  j->cancel_requested = true;
  return Status::ok();
}

Status JobTable::cancelled(uint64_t id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return unknown(id);
  Status outcome = it->second.state == FlushState::pending ? make_error(Code::ERR_CANCELLED, "cancelled") : it->second.outcome;
  jobs_.erase(it);
  return outcome;
}

void JobTable::end_pending(FlushState st, const Status& why, SlotRegistry& slots, bool unsent_only) {
  for (auto& [id, j] : jobs_)
    if (j.state == FlushState::pending && !(unsent_only && j.sent)) end_job(j, st, why, slots);
}

void JobTable::pending(bool* unsent, bool* in_flight) const {
  *unsent = *in_flight = false;
  for (const auto& [id, j] : jobs_)
    if (j.state == FlushState::pending && !j.cancel_requested) (j.sent ? *in_flight : *unsent) = true;
}

bool JobTable::moving() const {
  for (const auto& [id, j] : jobs_)
    if (j.state == FlushState::pending || j.writes_in_flight > 0) return true;
  return false;
}

}  // namespace cairn::flush
