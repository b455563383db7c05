#include "bench_util.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

namespace cairn::bench {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

json gbps(uint64_t bytes, double seconds) {
  if (!(seconds > 0)) return nullptr;
  return std::round(static_cast<double>(bytes) / seconds / 1e9 * 1000.0) / 1000.0;
}
json round3(double x) { return std::round(x * 1000.0) / 1000.0; }

int g_rank = 0, g_nranks = 1;

StderrCapture g_capture;

void StderrCapture::start(const std::string& path) {
  fflush(stderr);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;  // no capture: the log goes to stderr and its figures are not parsed
  saved_ = dup(2);
  dup2(fd, 2);
  close(fd);
  path_ = path;
}

std::string StderrCapture::stop() {
  if (saved_ < 0) return "";
  fflush(stderr);
  dup2(saved_, 2);
  close(saved_);
  saved_ = -1;
  std::ifstream in(path_);
  std::stringstream ss;
  ss << in.rdbuf();
  unlink(path_.c_str());
  return ss.str();
}

void die(const char* fmt, ...) {
  std::string captured = g_capture.active() ? g_capture.stop() : "";
  if (!captured.empty()) fputs(captured.c_str(), stderr);
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "cairn-bench: rank %d: %s\n", g_rank, msg);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  _exit(1);
}

uint8_t* map_slot_like(const std::string& path, uint64_t size) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) die("open %s: %s", path.c_str(), strerror(errno));
  unlink(path.c_str());  // the mapping keeps it alive
  int rc = posix_fallocate(fd, 0, static_cast<off_t>(size));
  if (rc != 0) die("fallocate %s: %s", path.c_str(), strerror(rc));
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) die("mmap %s: %s", path.c_str(), strerror(errno));
  return static_cast<uint8_t*>(p);
}

double max_over_ranks(double x) {
  double m = 0;
  CHECK_MPI(MPI_Allreduce(&x, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return m;
}
void barrier() { CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD)); }

uint8_t* alloc_faulted(uint64_t size) {
  uint64_t rounded = (size + 4095) / 4096 * 4096;
  void* p = aligned_alloc(4096, rounded);
  if (!p) die("cannot allocate %llu bytes", static_cast<unsigned long long>(size));
  memset(p, 0x5a, rounded);
  return static_cast<uint8_t*>(p);
}

void fill_random(uint8_t* p, uint64_t size, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  uint64_t words = size / 8;
  auto* w = reinterpret_cast<uint64_t*>(p);
  for (uint64_t i = 0; i < words; ++i) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    w[i] = z ^ (z >> 31);
  }
  for (uint64_t i = words * 8; i < size; ++i) p[i] = static_cast<uint8_t>(i * 131 + seed);
}


const char* fs_type_name(const std::string& path) {
  struct statfs s {};
  if (statfs(path.c_str(), &s) != 0) return "unknown";
  switch (static_cast<unsigned long>(s.f_type)) {
    case 0x01021994: return "tmpfs";
    case 0xEF53: return "ext4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x6969: return "nfs";
    case 0x0BD00BD0: return "lustre";
    case 0x47504653: return "gpfs";
    case 0x794c7630: return "overlayfs";
    case 0x2FC12FC1: return "zfs";
  }
  return "other";
}

std::string utc_now() {
  time_t t = time(nullptr);
  struct tm tm {};
  gmtime_r(&t, &tm);
  char b[64];
  strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

double loadavg_1m() {
  double l = -1;
  if (FILE* f = fopen("/proc/loadavg", "r")) {
    if (fscanf(f, "%lf", &l) != 1) l = -1;
    fclose(f);
  }
  return l;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      auto c = line.find(':');
      if (c != std::string::npos) return line.substr(c + 2);
    }
  return "unknown";
}

json machine_info(double load_start) {
  json j;
  j["date"] = utc_now();
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  j["host"] = host;
  j["cpu"] = cpu_model();
  j["cores_online"] = sysconf(_SC_NPROCESSORS_ONLN);
  j["loadavg_1m_start"] = round3(load_start);
  j["loadavg_1m_end"] = round3(loadavg_1m());
  j["ranks"] = g_nranks;
  return j;
}

bool number_after(const std::string& line, const std::string& key, double* out) {
  auto at = line.find(key);
  if (at == std::string::npos) return false;
  const char* s = line.c_str() + at + key.size();
  char* end = nullptr;
  double v = strtod(s, &end);
  if (end == s) return false;
  *out = v;
  return true;
}

}  // namespace cairn::bench
