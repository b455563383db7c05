// Called with every mapping's range right before MappedFile unmaps it (reset, reserve): the device layer
// unregisters pinned memory there (device/pinned.hpp), so that no registration outlives its pages.
// Defined in snapshot_slot.cpp.
#pragma once

#include <cstdint>

namespace cairn {

using UnmapHook = void (*)(const void* base, uint64_t len);
void set_unmap_hook(UnmapHook hook);

}  // namespace cairn
