#include "cache/slot_lender.hpp"

namespace cairn {

void SlotLender::reset(int nslots) {
  std::lock_guard<std::mutex> lock(mu_);
  lent_.assign(static_cast<size_t>(nslots < 0 ? 0 : nslots), Loan{});
}

void SlotLender::lend(int slot, uint64_t v) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return lent_[static_cast<size_t>(slot)].version == 0; });
  lent_[static_cast<size_t>(slot)] = Loan{v, false};
}

void SlotLender::give_back(int slot) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    lent_[static_cast<size_t>(slot)] = Loan{};
  }
  cv_.notify_all();
}

void SlotLender::discard(int slot) {
  std::lock_guard<std::mutex> lock(mu_);
  lent_[static_cast<size_t>(slot)].discarded = true;
}

std::vector<uint64_t> SlotLender::lent_versions() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint64_t> out(lent_.size(), 0);
  for (size_t i = 0; i < lent_.size(); ++i)
    if (!lent_[i].discarded) out[i] = lent_[i].version;
  return out;
}

bool SlotLender::is_lent(int slot) const {
  std::lock_guard<std::mutex> lock(mu_);
  return slot >= 0 && static_cast<size_t>(slot) < lent_.size() && lent_[static_cast<size_t>(slot)].version != 0;
}

}  // namespace cairn
