// The shared harness of cairn-bench (bench.hpp).
#include "bench.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <sstream>

#include "base/units.hpp"

namespace cairn::bench {

const std::vector<std::string> kPhases = {"l1", "l2", "l3", "restart", "codec", "incremental"};

// One size syntax everywhere: base/units.hpp, as the knobs and the tools read sizes.
bool parse_size(const std::string& text, uint64_t* out) {
  auto bytes = cairn::units::parse_size(text);
  if (!bytes || *bytes == 0) return false;
  *out = *bytes;
  return true;
}

std::vector<std::string> split_words(const char* s) {
  std::vector<std::string> out;
  std::istringstream is(s ? s : "");
  for (std::string w; is >> w;) out.push_back(w);
  return out;
}

// ---- programs the parents start -------------------------------------------------------------------

pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    if (!log.empty()) {
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) dup2(fd, STDOUT_FILENO), dup2(fd, STDERR_FILENO);
    }
    execvp(argv[0], argv.data());
    fprintf(stderr, "cairn-bench: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string find_program(const std::string& given, const std::string& name, const std::string& build_rel) {
  if (!given.empty()) return given;
  std::error_code ec;
  stdfs::path self = stdfs::read_symlink("/proc/self/exe", ec).parent_path();
  for (const auto& p : {self / name, self / ".." / build_rel})
    if (access(p.c_str(), X_OK) == 0) return stdfs::weakly_canonical(p, ec).string();
  return name;
}

// ---- statistics and units ---------------------------------------------------------------------------

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The q-quantile of v (linear between neighbours); 0 when empty.
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double at = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(at);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (at - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

// How far the ratio of two medians could move by the luck of which sessions and repetitions were drawn:
// the 2.5 % and 97.5 % quantiles of median(a*) / median(b*) over 2000 resamplings (a fixed seed) of
// each. The repetitions come in sessions of `per_session`, and two sessions of the same code differ by
// more than two repetitions of one, so whole sessions are drawn (with replacement), then repetitions
// within each drawn session. Where a and b are two measurements of the same code (auto that took copy,
// against copy), it is the interval the ratio falls in by the machine's noise alone.
std::pair<double, double> ratio_interval(const std::vector<double>& a, const std::vector<double>& b, size_t per_session) {
  if (a.size() < 2 || b.size() < 2 || per_session == 0) return {0, 0};
  uint64_t x = 0x2545f4914f6cdd1dull;
  auto next = [&x] { return splitmix64(&x); };
  auto resampled_median = [&](const std::vector<double>& v) {
    const size_t sessions = (v.size() + per_session - 1) / per_session;
    std::vector<double> r;
    r.reserve(v.size());
    for (size_t k = 0; k < sessions; ++k) {
      const size_t first = (next() % sessions) * per_session, n = std::min(per_session, v.size() - first);
      for (size_t i = 0; i < n; ++i) r.push_back(v[first + next() % n]);
    }
    return median(std::move(r));
  };
  std::vector<double> ratios;
  for (int i = 0; i < 2000; ++i) {
    const double den = resampled_median(b);
    if (den > 0) ratios.push_back(resampled_median(a) / den);
  }
  return {quantile(ratios, 0.025), quantile(ratios, 0.975)};
}

json gbps(uint64_t bytes, double seconds) {
  if (!(seconds > 0)) return nullptr;
  return std::round(static_cast<double>(bytes) / seconds / 1e9 * 1000.0) / 1000.0;
}

json round3(double x) { return std::round(x * 1000.0) / 1000.0; }

// ---- the machine --------------------------------------------------------------------------------------

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

long cache_page_bytes(const std::string& dir) {
  std::string path = dir + "/.cairn-bench-pagesize-XXXXXX";
  int fd = mkstemp(path.data());
  if (fd < 0) return 0;
  unlink(path.c_str());
  struct stat st {};
  // 4 MiB: huge=within_size hands out huge pages only to a file at least that large.
  long page = ftruncate(fd, 4 << 20) == 0 && fstat(fd, &st) == 0 ? static_cast<long>(st.st_blksize) : 0;
  close(fd);
  return page;
}

std::string page_size_text(long page_bytes) {
  return page_bytes > 0 ? std::to_string(page_bytes / 1024) + " KiB pages" : "page size unknown";
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

std::string first_line_of(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Whether a virtio balloon device offers free page reporting (feature bit 5): the guest then hands memory
// that has been free for about two seconds back to the host, and the next first touch of it waits for the
// host (docs/performance.md, "The cache on huge pages", free page reporting). With the
// smallest block it reports (page_reporting_order, in pages), where the kernel has the module.
json free_page_reporting() {
  json j = {{"enabled", false}};
  const std::string base = "/sys/bus/virtio/devices";
  if (DIR* d = opendir(base.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      const std::string dev = base + "/" + e->d_name;
      if (first_line_of(dev + "/device") != "0x0005") continue;
      const std::string features = first_line_of(dev + "/features");
      j["enabled"] = features.size() > 5 && features[5] == '1';
    }
    closedir(d);
  }
  const std::string order = first_line_of("/sys/module/page_reporting/parameters/page_reporting_order");
  if (!order.empty()) j["order"] = atoi(order.c_str());
  return j;
}

void describe_dirs(json& run, const std::string& cache_dir, const std::string& work_dir, const std::string& cache_job) {
  run["cache_dir"] = cache_dir;
  run["cache_fs"] = fs_type_name(cache_dir);
  run["cache_page_bytes"] = cache_page_bytes(cache_dir);
  run["prefix_fs"] = fs_type_name(work_dir);
  run["work_dir"] = work_dir;
  run["cache_job_dir"] = cache_job;
}

json machine_info(double load_start, int ranks) {
  json j;
  j["date"] = utc_now();
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  j["host"] = host;
  j["cpu"] = cpu_model();
  j["cores_online"] = sysconf(_SC_NPROCESSORS_ONLN);
  j["loadavg_1m_start"] = round3(load_start);
  j["loadavg_1m_end"] = round3(loadavg_1m());
  j["ranks"] = ranks;
  j["free_page_reporting"] = free_page_reporting();
  return j;
}

std::vector<int> set_sizes(int nranks, int set_size) {
  std::vector<int> sets;
  for (int left = nranks; left > 0; left -= set_size) sets.push_back(std::min(left, set_size));
  if (sets.size() >= 2 && sets.back() < 2) {
    sets[sets.size() - 2] += sets.back();
    sets.pop_back();
  }
  return sets;
}

SetPlan default_sets(int nranks) {
  SetPlan p;
  p.set_size = std::max(2, std::min(4, nranks));
  int smallest = nranks;
  if (nranks >= 2) {
    auto sets = set_sizes(nranks, p.set_size);
    smallest = *std::min_element(sets.begin(), sets.end());
  }
  p.rs_parity = std::max(1, std::min(2, smallest - 1));
  return p;
}

// ---- the child ----------------------------------------------------------------------------------------

int g_rank = 0, g_nranks = 1;

namespace {
int g_saved_stderr = -1;
std::string g_capture_path;
}  // namespace

void start_capture(const std::string& path) {
  fflush(stderr);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;  // no capture: the log goes to stderr
  g_saved_stderr = dup(2);
  dup2(fd, 2);
  close(fd);
  g_capture_path = path;
}

std::string end_capture() {
  if (g_saved_stderr < 0) return "";
  fflush(stderr);
  dup2(g_saved_stderr, 2);
  close(g_saved_stderr);
  g_saved_stderr = -1;
  std::ifstream in(g_capture_path);
  std::stringstream ss;
  ss << in.rdbuf();
  unlink(g_capture_path.c_str());
  return ss.str();
}

void die(const char* fmt, ...) {
  std::string captured = end_capture();
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

uint8_t* map_slot_like(const std::string& path, uint64_t size) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) die("open %s: %s", path.c_str(), strerror(errno));
  unlink(path.c_str());  // the mapping keeps it alive; nothing is left behind
  int rc = posix_fallocate(fd, 0, static_cast<off_t>(size));
  if (rc != 0) die("fallocate %s: %s", path.c_str(), strerror(rc));
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) die("mmap %s: %s", path.c_str(), strerror(errno));
  return static_cast<uint8_t*>(p);
}

void fill_random(uint8_t* p, uint64_t size, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  uint64_t words = size / 8;
  auto* w = reinterpret_cast<uint64_t*>(p);
  for (uint64_t i = 0; i < words; ++i) w[i] = splitmix64(&x);
  for (uint64_t i = words * 8; i < size; ++i) p[i] = static_cast<uint8_t>(i * 131 + seed);
}

void write_all(int fd, const uint8_t* p, uint64_t n, const std::string& path) {
  constexpr uint64_t kPiece = 64ull << 20;  // the L3 writer's piece size
  for (uint64_t off = 0; off < n;) {
    ssize_t w = ::pwrite(fd, p + off, std::min(kPiece, n - off), static_cast<off_t>(off));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) die("write %s: %s", path.c_str(), w < 0 ? strerror(errno) : "no progress");
    off += static_cast<uint64_t>(w);
  }
}

void read_all(int fd, uint8_t* p, uint64_t n, const std::string& path) {
  constexpr uint64_t kPiece = 64ull << 20;
  for (uint64_t off = 0; off < n;) {
    ssize_t r = ::pread(fd, p + off, std::min(kPiece, n - off), static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) die("read %s: %s", path.c_str(), r < 0 ? strerror(errno) : "short file");
    off += static_cast<uint64_t>(r);
  }
}

// The data was fsynced; DONTNEED drops clean pages.
void evict(const std::string& dir) {
  std::error_code ec;
  for (auto it = stdfs::recursive_directory_iterator(dir, ec); !ec && it != stdfs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    int fd = ::open(it->path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  }
}

}  // namespace cairn::bench
