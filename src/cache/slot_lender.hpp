// The L1 cache lends each slot to one version at a time: from the moment the version is taken until it
// has left the pipeline (every level it goes to is decided, and whoever moves its bytes -- the embedded
// flusher or the service's agents -- is done reading them). A slot is overwritten only when it is back.
// Thread-safe: the application thread lends and waits, the pipeline's thread gives back.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

namespace cairn {

class SlotLender {
 public:
  explicit SlotLender(int nslots = 0) { reset(nslots); }
  void reset(int nslots);

  // Blocks until `slot` is back, then lends it to version v.
  void lend(int slot, uint64_t v);
  // The version left the pipeline: the slot may be lent again.
  void give_back(int slot);
  // The version lent `slot` was discarded: the slot holds nothing worth keeping (it stays lent).
  void discard(int slot);
  // Per slot, the version it is lent to while that version still holds data there; 0 otherwise.
  std::vector<uint64_t> lent_versions() const;
  // Whether `slot` is lent now.
  bool is_lent(int slot) const;

 private:
  struct Loan {
    uint64_t version = 0;  // 0: not lent
    bool discarded = false;
  };
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Loan> lent_;
};

}  // namespace cairn
