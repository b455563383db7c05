// Which flusher writes this rank's L3 copies: with the `service` knob, service mode's flusher (the rank
// registers with cairnd's controller; the embedded flusher is its fallback), else the embedded flusher.
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>

#include "base/config.hpp"
#include "base/layout.hpp"
#include "l3/l3_placement.hpp"
#include "pipeline/flusher.hpp"

namespace cairn {

// Collective over `comm` whatever the knobs say: rank 0 draws the application's key for the service
// and every rank receives it (ranks use the service when rank 0's configuration and their own name one).
// Never fails for the service's sake: a service that cannot be used leaves the embedded flusher working.
Result<std::unique_ptr<pipeline::Flusher>> choose_flusher(const Config& cfg, const Layout& layout, MPI_Comm comm,
                                                          std::function<l3::WriteOptions()> l3_options);

}  // namespace cairn
