// The registrations of this rank's L1 slots with the link's fabric endpoint, which give an agent the keys
// to read a version (pull) and this rank the descriptors to write it (push). One per slot, made when a
// version is handed to an agent and revoked when its job ends, whatever the outcome: a key is valid for
// one version's transfer only. Per version, not per slot, because the stream is not always the slot's own
// mapping (a file-API version is a view mapped for the version and unmapped after it), and a registration
// must never outlive its memory. All of them are dropped before the endpoint closes.
//
// Owned by the service link and used on its thread only (no lock of its own).
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include "base/status.hpp"
#include "fabric/endpoint.hpp"

namespace cairn::flush {

class SlotRegistry {
 public:
  // The registration of `size` bytes at `data` as slot `slot`, for remote reads: the one held if it covers
  // exactly these bytes, else a new one (the slot's previous one is revoked first). size 0: nullptr.
  Result<fabric::MemoryRegion*> acquire(fabric::Endpoint& ep, int slot, const uint8_t* data, uint64_t size);
  // The slot's registration, or nullptr when it has none.
  fabric::MemoryRegion* find(int slot) const;
  // The slot's key dies (nothing if it has none).
  void revoke(int slot) { regions_.erase(slot); }
  // Every key dies: before the endpoint closes.
  void clear() { regions_.clear(); }

 private:
  std::map<int, std::unique_ptr<fabric::MemoryRegion>> regions_;
};

}  // namespace cairn::flush
