#include "fabric/endpoint.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <sys/random.h>

#include <cstring>

namespace cairn::fabric {

static_assert(sizeof(OpContext) >= sizeof(fi_context2), "OpContext must hold a fi_context2");

namespace {

// Every libfabric call goes through here: the call, its return code and the provider's words.
Status fi_error(const char* call, long rc) {
  return make_error(rc == -FI_ENOMEM ? Code::ERR_NO_MEMORY : Code::ERR_IO, "%s: %s (%ld)", call,
                    fi_strerror(static_cast<int>(-rc)), rc);
}
#define CAIRN_FI(call)                                  \
  do {                                                  \
    long cairn_fi_rc_ = (call);                         \
    if (cairn_fi_rc_ != 0) return fi_error(#call, cairn_fi_rc_); \
  } while (0)

void close_fid(fid* f) {
  if (f) fi_close(f);
}

constexpr uint64_t kMrModes = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;

fi_info* make_hints(const EndpointOptions& o, bool delivery) {
  fi_info* h = fi_allocinfo();
  if (!h) return nullptr;
  h->ep_attr->type = FI_EP_RDM;
  h->caps = FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  h->domain_attr->mr_mode = static_cast<int>(kMrModes);
  h->domain_attr->threading = FI_THREAD_SAFE;
  h->domain_attr->resource_mgmt = FI_RM_ENABLED;
  h->domain_attr->av_type = FI_AV_TABLE;
  if (delivery) h->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
  if (!o.provider.empty()) h->fabric_attr->prov_name = strdup(o.provider.c_str());
  return h;
}

}  // namespace

struct Endpoint::Impl {
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_ep* ep = nullptr;
  uint64_t mr_mode = 0;
  size_t key_size = 8;
  ~Impl() {
    close_fid(ep ? &ep->fid : nullptr);
    close_fid(av ? &av->fid : nullptr);
    close_fid(cq ? &cq->fid : nullptr);
    close_fid(domain ? &domain->fid : nullptr);
    close_fid(fabric ? &fabric->fid : nullptr);
    if (info) fi_freeinfo(info);
  }
};

MemoryRegion::~MemoryRegion() {
  if (mr_) fi_close(&mr_->fid);
}

Endpoint::Endpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Endpoint::~Endpoint() = default;

Result<std::unique_ptr<Endpoint>> Endpoint::open(const EndpointOptions& o) {
  auto impl = std::make_unique<Impl>();
  const char* node = o.node.empty() ? nullptr : o.node.c_str();
  bool delivery = true;
  int rc = -FI_ENODATA;
  for (int attempt = 0; attempt < 2 && rc != 0; ++attempt) {
    delivery = attempt == 0;  // push needs FI_DELIVERY_COMPLETE; pull works without it
    fi_info* hints = make_hints(o, delivery);
    if (!hints) return make_error(Code::ERR_NO_MEMORY, "fi_allocinfo");
    rc = fi_getinfo(FI_VERSION(1, 9), node, node ? "0" : nullptr, node ? FI_SOURCE : 0, hints, &impl->info);
    fi_freeinfo(hints);
  }
  if (rc != 0)
    return make_error(Code::ERR_NOT_SUPPORTED,
                      "libfabric offers no reliable-datagram endpoint with RMA from provider '%s' at %s: %s",
                      o.provider.c_str(), node ? node : "(any address)", fi_strerror(-rc));
  fi_info* info = impl->info;
  if (info->domain_attr->mr_mode & FI_MR_RAW)
    return make_error(Code::ERR_NOT_SUPPORTED, "provider %s needs raw memory keys (FI_MR_RAW), which cairn does not use",
                      info->fabric_attr->prov_name);
  impl->mr_mode = static_cast<uint64_t>(info->domain_attr->mr_mode);
  impl->key_size = info->domain_attr->mr_key_size ? info->domain_attr->mr_key_size : 8;
  CAIRN_FI(fi_fabric(info->fabric_attr, &impl->fabric, nullptr));
  CAIRN_FI(fi_domain(impl->fabric, info, &impl->domain, nullptr));
  fi_av_attr av{};
  av.type = FI_AV_TABLE;
  CAIRN_FI(fi_av_open(impl->domain, &av, &impl->av, nullptr));
  fi_cq_attr cq{};
  cq.format = FI_CQ_FORMAT_CONTEXT;
  cq.size = 4096;
  cq.wait_obj = FI_WAIT_FD;
  if (fi_cq_open(impl->domain, &cq, &impl->cq, nullptr) != 0) {
    cq.wait_obj = FI_WAIT_NONE;  // a provider without wait objects: the owner polls
    CAIRN_FI(fi_cq_open(impl->domain, &cq, &impl->cq, nullptr));
  }
  CAIRN_FI(fi_endpoint(impl->domain, info, &impl->ep, nullptr));
  CAIRN_FI(fi_ep_bind(impl->ep, &impl->av->fid, 0));
  CAIRN_FI(fi_ep_bind(impl->ep, &impl->cq->fid, FI_TRANSMIT | FI_RECV));
  CAIRN_FI(fi_enable(impl->ep));
  char name[256];
  size_t len = sizeof name;
  CAIRN_FI(fi_getname(&impl->ep->fid, name, &len));
  int fd = -1;
  if (cq.wait_obj == FI_WAIT_FD && fi_control(&impl->cq->fid, FI_GETWAIT, &fd) != 0) fd = -1;
  std::unique_ptr<Endpoint> e(new Endpoint(std::move(impl)));
  e->address_.assign(name, len);
  e->provider_ = info->fabric_attr->prov_name ? info->fabric_attr->prov_name : "";
  e->domain_ = info->domain_attr->name ? info->domain_attr->name : "";
  e->wait_fd_ = fd;
  e->delivery_complete_ = delivery;
  return e;
}

void Endpoint::prepare(const std::string& provider) {
  EndpointOptions o;
  o.provider = provider;
  fi_info* hints = make_hints(o, false);
  if (!hints) return;
  fi_info* info = nullptr;
  if (fi_getinfo(FI_VERSION(1, 9), nullptr, nullptr, 0, hints, &info) == 0) fi_freeinfo(info);
  fi_freeinfo(hints);
}

std::string Endpoint::address_text(const std::string& raw) const {
  char buf[256];
  size_t len = sizeof buf;
  const char* s = fi_av_straddr(impl_->av, raw.data(), buf, &len);
  return s ? std::string(s) : std::string("(unprintable address)");
}

Result<uint64_t> Endpoint::insert_peer(const std::string& raw) {
  fi_addr_t a = FI_ADDR_NOTAVAIL;
  int n = fi_av_insert(impl_->av, raw.data(), 1, &a, 0, nullptr);
  if (n != 1) return make_error(Code::ERR_IO, "fi_av_insert %s: %s", address_text(raw).c_str(), n < 0 ? fi_strerror(-n) : "not inserted");
  return static_cast<uint64_t>(a);
}

void Endpoint::remove_peer(uint64_t peer) {
  fi_addr_t a = peer;
  fi_av_remove(impl_->av, &a, 1, 0);
}

Result<std::unique_ptr<MemoryRegion>> Endpoint::register_memory(const void* p, size_t len, uint64_t access) {
  uint64_t fi_access = 0;
  if (access & kLocalRead) fi_access |= FI_READ;
  if (access & kLocalWrite) fi_access |= FI_WRITE;
  if (access & kRemoteRead) fi_access |= FI_REMOTE_READ;
  if (access & kRemoteWrite) fi_access |= FI_REMOTE_WRITE;
  uint64_t requested = 0;
  if (!(impl_->mr_mode & FI_MR_PROV_KEY)) {
    // The provider takes our key: 64 random bits (as many as it holds), a new one for every
    // registration, so a revoked key is never valid again.
    if (getrandom(&requested, sizeof requested, 0) != static_cast<ssize_t>(sizeof requested))
      return make_error(Code::ERR_IO, "getrandom for a memory key failed");
    if (impl_->key_size < 8) requested &= (uint64_t(1) << (8 * impl_->key_size)) - 1;
  }
  std::unique_ptr<MemoryRegion> r(new MemoryRegion());
  CAIRN_FI(fi_mr_reg(impl_->domain, p, len, fi_access, 0, requested, 0, &r->mr_, nullptr));
  if (impl_->mr_mode & FI_MR_ENDPOINT) {
    CAIRN_FI(fi_mr_bind(r->mr_, &impl_->ep->fid, 0));
    CAIRN_FI(fi_mr_enable(r->mr_));
  }
  r->key_ = fi_mr_key(r->mr_);
  if (r->key_ == FI_KEY_NOTAVAIL) return make_error(Code::ERR_NOT_SUPPORTED, "fi_mr_key: the provider gives no key");
  r->desc_ = fi_mr_desc(r->mr_);
  r->base_ = static_cast<const uint8_t*>(p);
  r->length_ = len;
  r->remote_base_ = (impl_->mr_mode & FI_MR_VIRT_ADDR) ? reinterpret_cast<uint64_t>(p) : 0;
  return r;
}

Status Endpoint::read(void* dst, size_t len, void* desc, uint64_t peer, uint64_t remote_addr, uint64_t key,
                      OpContext* op, bool* posted) {
  ssize_t rc = fi_read(impl_->ep, dst, len, desc, peer, remote_addr, key, op);
  *posted = rc == 0;
  if (rc == 0 || rc == -FI_EAGAIN) return Status::ok();
  return fi_error("fi_read", rc);
}

Status Endpoint::write(const void* src, size_t len, void* desc, uint64_t peer, uint64_t remote_addr, uint64_t key,
                       OpContext* op, bool* posted) {
  iovec iov{const_cast<void*>(src), len};
  fi_rma_iov rma{remote_addr, len, key};
  fi_msg_rma msg{};
  msg.msg_iov = &iov;
  msg.desc = &desc;
  msg.iov_count = 1;
  msg.addr = peer;
  msg.rma_iov = &rma;
  msg.rma_iov_count = 1;
  msg.context = op;
  uint64_t flags = FI_COMPLETION | (delivery_complete_ ? FI_DELIVERY_COMPLETE : 0);
  ssize_t rc = fi_writemsg(impl_->ep, &msg, flags);
  *posted = rc == 0;
  if (rc == 0 || rc == -FI_EAGAIN) return Status::ok();
  return fi_error("fi_writemsg", rc);
}

Result<int> Endpoint::poll(Completion* out, int max) {
  fi_cq_entry entries[64];
  if (max > 64) max = 64;
  ssize_t n = fi_cq_read(impl_->cq, entries, static_cast<size_t>(max));
  if (n > 0) {
    for (ssize_t i = 0; i < n; ++i) out[i] = Completion{static_cast<OpContext*>(entries[i].op_context), Status::ok()};
    return static_cast<int>(n);
  }
  if (n == -FI_EAGAIN) return 0;
  if (n == -FI_EAVAIL) {
    fi_cq_err_entry err{};
    ssize_t e = fi_cq_readerr(impl_->cq, &err, 0);
    if (e < 0) return fi_error("fi_cq_readerr", e);
    char buf[256] = "";
    const char* detail = fi_cq_strerror(impl_->cq, err.prov_errno, err.err_data, buf, sizeof buf);
    out[0] = Completion{static_cast<OpContext*>(err.op_context),
                        make_error(Code::ERR_IO, "RMA operation failed: %s (%s)", fi_strerror(err.err),
                                   detail ? detail : "")};
    return 1;
  }
  return fi_error("fi_cq_read", n);
}

bool Endpoint::ready_to_block() {
  if (wait_fd_ < 0) return false;
  fid* f = &impl_->cq->fid;
  return fi_trywait(impl_->fabric, &f, 1) == FI_SUCCESS;
}

}  // namespace cairn::fabric
