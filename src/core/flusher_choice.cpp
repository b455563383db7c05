#include "core/flusher_choice.hpp"

#include <cerrno>
#include <cstring>

#include "base/log.hpp"
#include "mpi/mpi_util.hpp"
#include "flush/embedded_flusher.hpp"
#include "flush/service_flusher.hpp"
#include "wire/message.hpp"

namespace cairn {

Result<std::unique_ptr<pipeline::Flusher>> choose_flusher(const Config& cfg, const Layout& layout, MPI_Comm comm,
                                                          std::function<l3::WriteOptions()> l3_options) {
  auto embedded = std::make_unique<flush::EmbeddedFlusher>(layout, l3_options);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &nranks);
  // [0]: rank 0 uses the service; [1..16]: the key.
  unsigned char shared[17] = {0};
  if (rank == 0 && !cfg.service.empty()) {
    auto key = wire::random_key();
    if (key) {
      shared[0] = 1;
      memcpy(shared + 1, key->data(), 16);
    } else {
      LOG_ERROR("service mode off: %s", key.status().message().c_str());
    }
  }
  CAIRN_MPI(MPI_Bcast(shared, sizeof shared, MPI_UNSIGNED_CHAR, 0, comm));
  if (!shared[0] || cfg.service.empty()) return std::unique_ptr<pipeline::Flusher>(std::move(embedded));
  if (cfg.full_every > 1) {
    // An agent writes a version from the whole slot it pulls, and the embedded flusher that takes over
    // a version an agent was given up on must write the same file: every version is full.
    if (rank == 0)
      LOG_WARN("full_every = %d: the checkpoint service's agents write whole versions, so every L3 version "
               "is full in service mode", cfg.full_every);
    l3_options = [inner = std::move(l3_options)] {
      l3::WriteOptions o = inner();
      o.full_every = 0;
      return o;
    };
    embedded = std::make_unique<std::remove_reference_t<decltype(*embedded)>>(layout, l3_options);
  }

  flush::ServiceSettings s;
  auto hp = wire::parse_host_port(cfg.service);
  if (!hp) return hp.status();  // the knob's own check lets no such value through
  s.controller = *hp;
  s.mode = cfg.service_mode == ServiceMode::push ? wire::TransferMode::push : wire::TransferMode::pull;
  s.agents_wanted = static_cast<uint32_t>(cfg.service_agents);
  s.chunk_size = static_cast<uint32_t>(cfg.service_chunk);
  s.pool_bytes = cfg.service_buffer_pool;
  s.provider = cfg.service_provider;
  s.timeout_s = cfg.service_timeout;
  s.app_name = program_invocation_short_name;
  s.job = job_name(cfg);
  s.prefix = layout.prefix;
  auto roots = l3::parse_prefixes(cfg.data_prefixes);
  if (roots)
    for (const auto& r : *roots) s.data_roots.push_back(r.path);
  s.turnstile_width = static_cast<uint32_t>(cfg.turnstile_width);
  s.interval_s = cfg.interval_seconds;
  memcpy(s.key.data(), shared + 1, 16);
  s.rank = static_cast<uint32_t>(rank);
  s.nranks = static_cast<uint32_t>(nranks);
  return std::unique_ptr<pipeline::Flusher>(
      std::make_unique<flush::ServiceFlusher>(s, layout, l3_options, std::move(embedded)));
}

}  // namespace cairn
