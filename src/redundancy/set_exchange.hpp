// L2 over MPI: the members of one redundancy set (one MPI communicator, member x = rank x in it)
// compute and store their redundancy data, and rebuild lost members. Same result, byte for byte, as
// SetCode::encode_all / decode_all (tests check this). Data moves in pieces of `chunk` bytes so
// buffers stay bounded (a few chunks per member), whatever the snapshot size.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "redundancy/set_code.hpp"

namespace cairn::redundancy {

// Collective over set_comm (size == code.n()). my_data: this member's snapshot (my_len bytes);
// lens: every member's length (same on all members); my_red: code.redundancy_len(max_len) bytes,
// written. max_len = max(lens).
Status encode_set(MPI_Comm set_comm, const SetCode& code, const uint8_t* my_data, size_t my_len,
                  const std::vector<size_t>& lens, uint8_t* my_red, size_t chunk);

// Collective over set_comm. lost: same vector on every member. Survivors pass their data and
// redundancy; a lost member passes buffers to receive its data (lens[x] bytes) and its redundancy
// (redundancy_len bytes). ERR_UNRECOVERABLE (on every member) if !code.recoverable(lost).
Status rebuild_set(MPI_Comm set_comm, const SetCode& code, const std::vector<bool>& lost,
                   uint8_t* my_data, const std::vector<size_t>& lens, uint8_t* my_red, size_t chunk);

}  // namespace cairn::redundancy
