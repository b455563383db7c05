#include "flush/slot_registry.hpp"

namespace cairn::flush {

Result<fabric::MemoryRegion*> SlotRegistry::acquire(fabric::Endpoint& ep, int slot, const uint8_t* data, uint64_t size) {
  if (size == 0) return static_cast<fabric::MemoryRegion*>(nullptr);
  auto it = regions_.find(slot);
  if (it != regions_.end() && it->second->base() == data && it->second->length() == size) return it->second.get();
  regions_.erase(slot);
  CAIRN_ASSIGN_OR_RETURN(mr, ep.register_memory(data, size, fabric::kRemoteRead | fabric::kLocalWrite));
  fabric::MemoryRegion* p = mr.get();
  regions_[slot] = std::move(mr);
  return p;
}

fabric::MemoryRegion* SlotRegistry::find(int slot) const {
  auto it = regions_.find(slot);
  return it == regions_.end() ? nullptr : it->second.get();
}

}  // namespace cairn::flush
