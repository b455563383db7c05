#include "cache/slot_choice.hpp"

#include <cstddef>

namespace cairn {

int choose_slot(const std::vector<uint64_t>& occupant, uint64_t keep) {
  using std::size_t;
  if (occupant.size() <= 1) return 0;
  int best = -1;
  for (size_t i = 0; i < occupant.size(); ++i) {
    if (keep != 0 && occupant[i] == keep) continue;
    if (occupant[i] > keep) return static_cast<int>(i);  // stale: newer than anything whole
    if (best < 0 || occupant[i] < occupant[static_cast<size_t>(best)]) best = static_cast<int>(i);
  }
  return best < 0 ? 0 : best;
}

}  // namespace cairn
