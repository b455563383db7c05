// cow-candidates: the measurement behind the choice of the copy-on-write mechanism (docs/architecture.md,
// "Snapshots"). It holds the two ways a process can learn that it is about to write a page it asked to
// keep -- userfaultfd write-protect (UFFDIO_REGISTER_MODE_WP) and mprotect(PROT_READ) with a SIGSEGV
// handler -- against each other and against memcpy, on the same anonymous memory and the same
// destination (a pre-faulted shared-memory file, like an L1 slot):
//
//   memcpy_ms            the plain copy, the limit
//   protect_ms           the application's blocking cost: write-protect the whole state
//   copier_ms            the background copy alone: chunk by chunk, each chunk un-protected once copied
//   fault_us             one write to a protected page: fault, copy of that page, un-protect, resume
//   loop_during/without  one pass of a read-modify-write loop over the whole state right after the
//                        protection, while the copier runs (a fault copies the chunk it hits first)
//   kernel_write         read(2) into a protected page: the kernel writes on the application's behalf
//
// It is a standalone program (no cairn library), run by hand: `cow-candidates --size 256M,2G --json`.
// Figures of this machine: docs/performance.md ("Copy-on-write snapshots: the candidates").
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/units.hpp"

#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif

namespace {

constexpr uint64_t kPage = 4096;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

[[noreturn]] void die(const char* what) {
  fprintf(stderr, "cow-candidates: %s: %s\n", what, strerror(errno));
  exit(1);
}

uint64_t parse_size(const std::string& t) {
  auto bytes = cairn::units::parse_size(t);  // the one size syntax (base/units.hpp)
  if (!bytes) {
    fprintf(stderr, "cow-candidates: %s\n", bytes.status().message().c_str());
    exit(2);
  }
  return *bytes;
}

// The application's state: private anonymous memory, 2 MiB-aligned (so that it can be huge pages:
// --thp asks for them), every page written once.
uint8_t* make_state(uint64_t size, bool thp) {
  constexpr uint64_t kHuge = 2 << 20;
  void* raw = mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) die("mmap state");
  auto base = reinterpret_cast<uint64_t>(raw), aligned = (base + kHuge - 1) & ~(kHuge - 1);
  if (aligned > base) munmap(raw, aligned - base);
  if (aligned + size < base + size + kHuge) munmap(reinterpret_cast<void*>(aligned + size), base + kHuge - aligned);
  void* p = reinterpret_cast<void*>(aligned);
  if (thp) madvise(p, size, MADV_HUGEPAGE);
  auto* s = static_cast<uint64_t*>(p);
  for (uint64_t i = 0; i < size / 8; ++i) s[i] = i * 0x9E3779B97F4A7C15ull;
  return static_cast<uint8_t*>(p);
}

// The destination: a shared-memory file mapped shared and pre-faulted, as an L1 slot is.
uint8_t* make_slot(uint64_t size) {
  int fd = memfd_create("cow-candidates-slot", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) die("memfd");
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) die("mmap slot");
  return static_cast<uint8_t*>(p);
}

// The application's loop: one read-modify-write pass over the whole state.
void write_pass(uint8_t* state, uint64_t size) {
  auto* s = reinterpret_cast<volatile uint64_t*>(state);
  for (uint64_t i = 0; i < size / 8; i += 1) s[i] = s[i] * 3 + 1;
}

// ---- the shared bookkeeping: who copies which chunk ------------------------------------------------
enum : uint8_t { kPending = 0, kCopying = 1, kDone = 2 };

struct Snapshot {
  uint8_t* src = nullptr;
  uint8_t* dst = nullptr;
  uint64_t size = 0, chunk = 0, nchunks = 0;
  std::vector<std::atomic<uint8_t>> state;
  bool use_pvm = false;  // copy with process_vm_readv (survives an unmapped source) instead of memcpy
  void reset(uint8_t* s, uint8_t* d, uint64_t sz, uint64_t ch) {
    src = s, dst = d, size = sz, chunk = ch, nchunks = (sz + ch - 1) / ch;
    state = std::vector<std::atomic<uint8_t>>(nchunks);
  }
  uint64_t len(uint64_t c) const { return std::min(chunk, size - c * chunk); }
  bool claim(uint64_t c) {
    uint8_t want = kPending;
    return state[c].compare_exchange_strong(want, kCopying, std::memory_order_acq_rel);
  }
  void copy(uint64_t c) const {
    uint64_t off = c * chunk, n = len(c);
    if (!use_pvm) {
      memcpy(dst + off, src + off, n);
      return;
    }
    iovec local{dst + off, n}, remote{src + off, n};
    if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != static_cast<ssize_t>(n)) die("process_vm_readv");
  }
};

// ---- userfaultfd write-protect ---------------------------------------------------------------------
struct Uffd {
  int fd = -1;
  uint64_t features = 0;
  std::string how;
};

Uffd open_uffd() {
  Uffd u;
  u.fd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
  u.how = "userfaultfd(2)";
  if (u.fd < 0 && (errno == EPERM || errno == ENOSYS)) {
    int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
    if (dev >= 0) {
      u.fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
      close(dev);
      u.how = "/dev/userfaultfd";
    }
  }
  if (u.fd < 0) return u;
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_WP_UNPOPULATED;
  if (ioctl(u.fd, UFFDIO_API, &api) != 0) {
    close(u.fd);
    u.fd = -1;
    return u;
  }
  u.features = api.features;
  return u;
}

// What the kernel offers (a probe fd with no feature asked for reports every feature it has).
uint64_t uffd_kernel_features() {
  int fd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC));
  if (fd < 0) return 0;
  uffdio_api api{};
  api.api = UFFD_API;
  uint64_t f = ioctl(fd, UFFDIO_API, &api) == 0 ? api.features : 0;
  close(fd);
  return f;
}

void uffd_wp(int fd, void* p, uint64_t len, bool on) {
  uffdio_writeprotect wp{};
  wp.range.start = reinterpret_cast<uint64_t>(p);
  wp.range.len = len;
  wp.mode = on ? UFFDIO_WRITEPROTECT_MODE_WP : 0;
  if (ioctl(fd, UFFDIO_WRITEPROTECT, &wp) != 0) die("UFFDIO_WRITEPROTECT");
}

void uffd_register(int fd, void* p, uint64_t len) {
  uffdio_register reg{};
  reg.range.start = reinterpret_cast<uint64_t>(p);
  reg.range.len = len;
  reg.mode = UFFDIO_REGISTER_MODE_WP;
  if (ioctl(fd, UFFDIO_REGISTER, &reg) != 0) die("UFFDIO_REGISTER");
}

void uffd_unregister(int fd, void* p, uint64_t len) {
  uffdio_range r{reinterpret_cast<uint64_t>(p), len};
  if (ioctl(fd, UFFDIO_UNREGISTER, &r) != 0) die("UFFDIO_UNREGISTER");
}

// The fault handler: a thread reading the uffd. fault_unit = 0: copy the chunk the fault hit;
// otherwise copy just that page (the per-fault cost).
struct UffdHandler {
  int uffd = -1, stop_fd = -1;
  Snapshot* snap = nullptr;
  bool per_page = false;
  std::atomic<uint64_t> faults{0};
  std::thread t;
  void start() {
    stop_fd = eventfd(0, EFD_CLOEXEC);
    t = std::thread([this] { loop(); });
  }
  void stop() {
    uint64_t one = 1;
    if (write(stop_fd, &one, 8) != 8) die("eventfd");
    t.join();
    close(stop_fd);
  }
  void loop() {
    pollfd fds[2] = {{uffd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    uffd_msg msgs[64];
    for (;;) {
      if (poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        die("poll");
      }
      if (fds[1].revents) return;
      ssize_t n = read(uffd, msgs, sizeof msgs);
      if (n < 0) {
        if (errno == EAGAIN) continue;
        die("read uffd");
      }
      for (ssize_t i = 0; i < n / static_cast<ssize_t>(sizeof(uffd_msg)); ++i) {
        if (msgs[i].event != UFFD_EVENT_PAGEFAULT) continue;
        uint64_t addr = msgs[i].arg.pagefault.address & ~(kPage - 1);
        faults.fetch_add(1, std::memory_order_relaxed);
        uint64_t off = addr - reinterpret_cast<uint64_t>(snap->src);
        if (per_page) {
          memcpy(snap->dst + off, snap->src + off, kPage);
          uffd_wp(uffd, snap->src + off, kPage, false);
          continue;
        }
        uint64_t c = off / snap->chunk;
        if (snap->claim(c)) {
          snap->copy(c);
          uffd_wp(uffd, snap->src + c * snap->chunk, snap->len(c), false);
          snap->state[c].store(kDone, std::memory_order_release);
        } else if (snap->state[c].load(std::memory_order_acquire) == kDone) {
          uffdio_range r{addr, kPage};
          ioctl(uffd, UFFDIO_WAKE, &r);  // raced with the copier's un-protect: harmless
        }  // kCopying: the copier's un-protect wakes the writer
      }
    }
  }
};

// ---- mprotect + SIGSEGV ----------------------------------------------------------------------------
Snapshot* g_snap = nullptr;
bool g_per_page = false;
std::atomic<uint64_t> g_sig_faults{0};

void on_segv(int, siginfo_t* si, void*) {
  auto addr = reinterpret_cast<uint64_t>(si->si_addr);
  auto base = reinterpret_cast<uint64_t>(g_snap->src);
  if (addr < base || addr >= base + g_snap->size) {
    signal(SIGSEGV, SIG_DFL);  // not ours: a real crash
    return;
  }
  g_sig_faults.fetch_add(1, std::memory_order_relaxed);
  uint64_t off = (addr - base) & ~(kPage - 1);
  if (g_per_page) {
    memcpy(g_snap->dst + off, g_snap->src + off, kPage);
    mprotect(g_snap->src + off, kPage, PROT_READ | PROT_WRITE);
    return;
  }
  uint64_t c = off / g_snap->chunk;
  if (g_snap->claim(c)) {
    g_snap->copy(c);
    mprotect(g_snap->src + c * g_snap->chunk, g_snap->len(c), PROT_READ | PROT_WRITE);
    g_snap->state[c].store(kDone, std::memory_order_release);
  } else {
    while (g_snap->state[c].load(std::memory_order_acquire) != kDone) __builtin_ia32_pause();
  }
}

void install_segv() {
  struct sigaction sa {};
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, nullptr) != 0) die("sigaction");
}

// ---- the measurements ------------------------------------------------------------------------------
enum class Mech { uffd, mprot };
const char* mech_name(Mech m) { return m == Mech::uffd ? "uffd_wp" : "mprotect_sigsegv"; }

struct Env {
  Uffd uffd;
};

double protect_all(Env& env, Mech m, uint8_t* p, uint64_t size) {
  double t0 = now();
  if (m == Mech::uffd) {
    uffd_register(env.uffd.fd, p, size);
    uffd_wp(env.uffd.fd, p, size, true);
  } else if (mprotect(p, size, PROT_READ) != 0) {
    die("mprotect");
  }
  return now() - t0;
}

double unprotect_all(Env& env, Mech m, uint8_t* p, uint64_t size) {
  double t0 = now();
  if (m == Mech::uffd) {
    uffd_wp(env.uffd.fd, p, size, false);
    uffd_unregister(env.uffd.fd, p, size);
  } else if (mprotect(p, size, PROT_READ | PROT_WRITE) != 0) {
    die("mprotect");
  }
  return now() - t0;
}

// The copier: chunks in order, each un-protected once copied (one it finds claimed by the fault path
// is skipped). Returns when every chunk is done.
void copier(Env& env, Mech m, Snapshot& s) {
  for (uint64_t c = 0; c < s.nchunks; ++c) {
    if (!s.claim(c)) continue;
    s.copy(c);
    if (m == Mech::uffd)
      uffd_wp(env.uffd.fd, s.src + c * s.chunk, s.len(c), false);
    else
      mprotect(s.src + c * s.chunk, s.len(c), PROT_READ | PROT_WRITE);
    s.state[c].store(kDone, std::memory_order_release);
  }
  for (uint64_t c = 0; c < s.nchunks; ++c)
    while (s.state[c].load(std::memory_order_acquire) != kDone) std::this_thread::yield();
}

struct Figures {
  double protect_ms = 0, copier_ms = 0, unprotect_ms = 0, fault_us = 0;
  double loop_during_ms = 0, loop_after_ms = 0, complete_ms = 0;
  uint64_t faults = 0;
};

Figures measure(Env& env, Mech m, uint8_t* state, uint8_t* slot, uint64_t size, uint64_t chunk, bool pvm) {
  Figures f;
  Snapshot s;
  s.use_pvm = pvm;
  UffdHandler h;
  h.uffd = env.uffd.fd;
  h.snap = &s;
  g_snap = &s;
  if (m == Mech::uffd) h.start();

  // copier alone
  s.reset(state, slot, size, chunk);
  f.protect_ms = protect_all(env, m, state, size) * 1e3;
  double t0 = now();
  copier(env, m, s);
  f.copier_ms = (now() - t0) * 1e3;
  f.unprotect_ms = unprotect_all(env, m, state, size) * 1e3;
  if (memcmp(slot, state, size) != 0) {
    fprintf(stderr, "cow-candidates: %s: the slot differs from the state\n", mech_name(m));
    exit(1);
  }

  // per-fault cost: 2000 writes to distinct random protected pages, each fault copies one page
  {
    h.per_page = g_per_page = true;
    s.reset(state, slot, size, chunk);
    protect_all(env, m, state, size);
    std::mt19937_64 rng(7);
    std::vector<uint64_t> pages(size / kPage);
    for (uint64_t i = 0; i < pages.size(); ++i) pages[i] = i;
    std::shuffle(pages.begin(), pages.end(), rng);
    int n = static_cast<int>(std::min<uint64_t>(2000, pages.size()));
    t0 = now();
    for (int i = 0; i < n; ++i) state[pages[i] * kPage] ^= 1;
    f.fault_us = (now() - t0) / n * 1e6;
    unprotect_all(env, m, state, size);
    h.per_page = g_per_page = false;
  }

  // the application's loop while the copier runs, against the same loop with no snapshot
  {
    double t_base = now();
    write_pass(state, size);
    t_base = now() - t_base;
    std::vector<uint8_t> before(state, state + size);
    s.reset(state, slot, size, chunk);
    uint64_t faults0 = m == Mech::uffd ? h.faults.load() : g_sig_faults.load();
    t0 = now();
    protect_all(env, m, state, size);
    double t_done = 0;
    std::thread cp([&] {
      copier(env, m, s);
      t_done = now();
    });
    double l0 = now();
    write_pass(state, size);
    f.loop_during_ms = (now() - l0) * 1e3;
    cp.join();
    f.complete_ms = (t_done - t0) * 1e3;
    f.faults = (m == Mech::uffd ? h.faults.load() : g_sig_faults.load()) - faults0;
    unprotect_all(env, m, state, size);
    l0 = now();
    write_pass(state, size);
    f.loop_after_ms = (now() - l0) * 1e3;
    f.loop_during_ms /= t_base * 1e3;  // as a ratio
    f.loop_after_ms /= t_base * 1e3;
    if (memcmp(slot, before.data(), size) != 0) {
      fprintf(stderr, "cow-candidates: %s: the snapshot taken under writes is not exact\n", mech_name(m));
      exit(1);
    }
  }
  if (m == Mech::uffd) h.stop();
  return f;
}

// read(2) into a protected page: does the kernel's own write wait for the handler, or fail?
std::string kernel_write(Env& env, Mech m) {
  uint8_t* p = make_state(16 * kPage, false);
  uint8_t* slot = make_slot(16 * kPage);
  Snapshot s;
  s.reset(p, slot, 16 * kPage, kPage);
  g_snap = &s;
  UffdHandler h;
  h.uffd = env.uffd.fd;
  h.snap = &s;
  if (m == Mech::uffd) h.start();
  protect_all(env, m, p, 16 * kPage);
  int fds[2];
  if (pipe(fds) != 0) die("pipe");
  if (write(fds[1], "abcdefgh", 8) != 8) die("write pipe");
  ssize_t n = read(fds[0], p + 5 * kPage, 8);
  std::string out = n == 8 ? "ok: the write waited for the page's copy" : std::string("read(2) failed: ") + strerror(errno);
  close(fds[0]);
  close(fds[1]);
  unprotect_all(env, m, p, 16 * kPage);
  if (m == Mech::uffd) h.stop();
  munmap(p, 16 * kPage);
  munmap(slot, 16 * kPage);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<uint64_t> sizes{256ull << 20};
  std::vector<uint64_t> chunks{64 << 10, 256 << 10, 2 << 20};
  bool thp = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--size" && i + 1 < argc) {
      sizes.clear();
      std::string list = argv[++i];
      for (size_t pos = 0; pos <= list.size();) {
        size_t comma = list.find(',', pos);
        if (comma == std::string::npos) comma = list.size();
        sizes.push_back(parse_size(list.substr(pos, comma - pos)));
        pos = comma + 1;
      }
    } else if (a == "--thp") {
      thp = true;
    } else {
      fprintf(stderr, "usage: cow-candidates [--size 256M,2G] [--thp]\n");
      return 2;
    }
  }
  Env env;
  env.uffd = open_uffd();
  uint64_t kf = uffd_kernel_features();
  printf("{\"load_1m\": ");
  {
    FILE* la = fopen("/proc/loadavg", "r");
    double l = 0;
    if (la && fscanf(la, "%lf", &l) == 1) printf("%.2f", l);
    else printf("null");
    if (la) fclose(la);
  }
  printf(", \"cores\": %ld, \"thp\": %s,\n", sysconf(_SC_NPROCESSORS_ONLN), thp ? "true" : "false");
  printf(" \"uffd\": {\"open\": \"%s\", \"wp\": %s, \"wp_unpopulated\": %s, \"wp_async\": %s},\n",
         env.uffd.fd >= 0 ? env.uffd.how.c_str() : strerror(errno),
         kf & UFFD_FEATURE_PAGEFAULT_FLAG_WP ? "true" : "false", kf & UFFD_FEATURE_WP_UNPOPULATED ? "true" : "false",
         kf & UFFD_FEATURE_WP_ASYNC ? "true" : "false");
  install_segv();
  printf(" \"kernel_write\": {\"uffd_wp\": \"%s\", \"mprotect_sigsegv\": \"%s\"},\n",
         env.uffd.fd >= 0 ? kernel_write(env, Mech::uffd).c_str() : "n/a", kernel_write(env, Mech::mprot).c_str());
  printf(" \"runs\": [\n");
  bool first = true;
  for (uint64_t size : sizes) {
    uint8_t* state = make_state(size, thp);
    uint8_t* slot = make_slot(size);
    memcpy(slot, state, size);  // warm: the first copy into the slot is not the one timed
    double t0 = now();
    memcpy(slot, state, size);
    double memcpy_ms = (now() - t0) * 1e3;
    t0 = now();
    {
      iovec local{slot, size}, remote{state, size};
      for (uint64_t done = 0; done < size;) {
        uint64_t n = std::min<uint64_t>(size - done, 1 << 30);
        local = {slot + done, n};
        remote = {state + done, n};
        if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != static_cast<ssize_t>(n)) die("process_vm_readv");
        done += n;
      }
    }
    double pvm_ms = (now() - t0) * 1e3;
    for (Mech m : {Mech::uffd, Mech::mprot}) {
      if (m == Mech::uffd && env.uffd.fd < 0) continue;
      for (uint64_t chunk : chunks)
        for (bool pvm : {false, true}) {
          if (pvm && chunk != (2u << 20)) continue;
          // a fresh state each time: huge pages split by an earlier measurement would skew this one
          munmap(state, size);
          state = make_state(size, thp);
          Figures f = measure(env, m, state, slot, size, chunk, pvm);
          printf("%s  {\"size_mib\": %llu, \"mech\": \"%s\", \"chunk_kib\": %llu, \"copy\": \"%s\", \"memcpy_ms\": %.2f, "
                 "\"process_vm_readv_ms\": %.2f, \"protect_ms\": %.3f, \"copier_ms\": %.2f, \"unprotect_ms\": %.3f, "
                 "\"fault_us\": %.2f, \"complete_ms\": %.2f, \"loop_during_x\": %.2f, \"loop_after_x\": %.2f, "
                 "\"faults_in_loop\": %llu}",
                 first ? "" : ",\n", static_cast<unsigned long long>(size >> 20), mech_name(m),
                 static_cast<unsigned long long>(chunk >> 10), pvm ? "process_vm_readv" : "memcpy", memcpy_ms, pvm_ms,
                 f.protect_ms, f.copier_ms, f.unprotect_ms, f.fault_us, f.complete_ms, f.loop_during_ms,
                 f.loop_after_ms, static_cast<unsigned long long>(f.faults));
          fflush(stdout);
          first = false;
        }
    }
    munmap(state, size);
    munmap(slot, size);
  }
  printf("\n ]}\n");
  return 0;
}
