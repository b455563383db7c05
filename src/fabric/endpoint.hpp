// libfabric for the service's bulk data: one reliable-datagram (FI_EP_RDM) endpoint with a completion
// queue, memory registration and one-sided RMA (fi_read, fi_write). Both sides use it: a rank exposes
// its L1 slots (pull) or writes into an agent's buffers (push); an agent reads slots into its buffer pool.
// What the provider asks of the application (docs/architecture.md, "Endpoints and progress") is handled
// here once: registered local buffers (FI_MR_LOCAL), virtual or offset addressing (FI_MR_VIRT_ADDR),
// provider-chosen keys (FI_MR_PROV_KEY, else 64 random bits per registration), regions bound to the
// endpoint (FI_MR_ENDPOINT). The `tcp;ofi_rxm` provider on 127.0.0.1 in tests; verbs, efa or cxi on
// clusters, with no change here.
//
// Threading: an Endpoint and its regions are used from one thread at a time (the owner's progress
// thread); the domain is opened FI_THREAD_SAFE all the same.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.hpp"

struct fid_mr;

namespace cairn::fabric {

struct EndpointOptions {
  std::string provider = "tcp;ofi_rxm";  // fi_info's provider name ("verbs;ofi_rxm", "efa", "cxi"); empty: any
  std::string node;  // the local address to open on (the interface the peers reach); empty: the provider's choice
};

// Space the provider may use for one operation in flight (fi_context2). Derive the object that tracks
// an operation from it; completions hand the same pointer back.
struct OpContext {
  alignas(8) unsigned char provider_space[64];
};

struct Completion {
  OpContext* op = nullptr;
  Status status;  // ok, or why the operation failed (the peer's key revoked, the peer gone, ...)
};

// Access rights of a registration.
enum Access : uint64_t {
  kLocalRead = 1,    // we fi_read into it
  kLocalWrite = 2,   // we fi_write from it
  kRemoteRead = 4,   // peers fi_read from it
  kRemoteWrite = 8,  // peers fi_write into it
};

// A registered memory region. Destroying it revokes its key: a peer's later access fails.
class MemoryRegion {
 public:
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;
  ~MemoryRegion();
  uint64_t key() const { return key_; }
  void* desc() const { return desc_; }
  // The remote address a peer names for byte 0 of the region.
  uint64_t remote_base() const { return remote_base_; }
  const uint8_t* base() const { return base_; }
  size_t length() const { return length_; }

 private:
  friend class Endpoint;
  MemoryRegion() = default;
  fid_mr* mr_ = nullptr;
  uint64_t key_ = 0, remote_base_ = 0;
  void* desc_ = nullptr;
  const uint8_t* base_ = nullptr;
  size_t length_ = 0;
};

class Endpoint {
 public:
  // Open fabric, domain, address vector, completion queue and endpoint. ERR_NOT_SUPPORTED when the
  // provider offers no RDM endpoint with RMA at `node` (the message lists what was asked).
  static Result<std::unique_ptr<Endpoint>> open(const EndpointOptions& o);
  // Initialise libfabric and the provider without opening anything (the first fi_getinfo of a process
  // costs a tenth of a second or more: the providers probe the node), so that a later open() is quick.
  static void prepare(const std::string& provider);
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;
  ~Endpoint();

  const std::string& address() const { return address_; }  // fi_getname: what peers insert
  std::string address_text(const std::string& raw) const;   // for logs
  const std::string& provider() const { return provider_; }
  const std::string& domain() const { return domain_; }
  // Writes complete only once the data is visible at the target (FI_DELIVERY_COMPLETE): push needs it.
  bool delivery_complete() const { return delivery_complete_; }

  Result<uint64_t> insert_peer(const std::string& raw_address);
  void remove_peer(uint64_t peer);

  Result<std::unique_ptr<MemoryRegion>> register_memory(const void* p, size_t len, uint64_t access);

  // Post one RMA operation. *posted = false: the queue is full; poll completions and post again.
  Status read(void* dst, size_t len, void* desc, uint64_t peer, uint64_t remote_addr, uint64_t key, OpContext* op,
              bool* posted);
  Status write(const void* src, size_t len, void* desc, uint64_t peer, uint64_t remote_addr, uint64_t key,
               OpContext* op, bool* posted);

  // Up to `max` completions. Also makes progress: with manual data progress (tcp), a peer's reads of
  // this side's memory are served only while someone polls here.
  Result<int> poll(Completion* out, int max);
  // A file descriptor to wait on with poll(2) when ready_to_block() is true; -1 when the provider has none
  // (then poll again after a short sleep).
  int wait_fd() const { return wait_fd_; }
  bool ready_to_block();

 private:
  struct Impl;
  explicit Endpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::string address_, provider_, domain_;
  int wait_fd_ = -1;
  bool delivery_complete_ = false;
};

}  // namespace cairn::fabric
