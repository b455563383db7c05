// Which L1 slot a new version overwrites: a pure decision, so that it can be tested on its own.
#pragma once

#include <cstdint>
#include <vector>

namespace cairn {

// occupant[s]: the newest version that slot s holds (its L1 record, or a version in flight that was lent
// the slot and still holds data there); 0 for an empty slot. keep: the version that must survive -- the
// newest protected one, or without L2 the newest one known whole -- 0 when there is none.
//
// Never the slot of `keep` while another slot exists; among the others, first a stale slot (it holds a
// version newer than `keep`: one that never completed), then an empty slot or the one with the oldest
// version. With one slot, slot 0.
int choose_slot(const std::vector<uint64_t>& occupant, uint64_t keep);

}  // namespace cairn
