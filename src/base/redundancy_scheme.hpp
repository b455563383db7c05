// The L2 redundancy schemes: a knob of the configuration and the kind of a set code and a set record.
#pragma once

namespace cairn {

enum class Redundancy { single, partner, xor_set, rs };
// "single", "partner", "xor", "rs".
const char* redundancy_name(Redundancy r);

}  // namespace cairn
