// Directory listings: a directory that holds matching files lists them after its real entries
// (opendir, readdir, readdir64, rewinddir, closedir), so a code that scans its checkpoint directory for
// the newest step finds its files. glibc's scandir, glob and nftw read directories internally and see
// only the real entries (docs/interpose.md).
#undef _FORTIFY_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <stddef.h>

#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/lexical_path.hpp"
#include "libc_real.hpp"
#include "vfs.hpp"

using cairn::interpose::vfs;
namespace real = cairn::interpose::real;

namespace {

struct Listing {
  std::vector<std::string> names;  // our files in the directory, listed after the real entries
  std::set<std::string> ours;      // a real entry of the same name is hidden
  size_t next = 0;
  struct dirent64 entry;
};

std::mutex g_mu;
std::map<DIR*, Listing>& listings() {
  static auto* m = new std::map<DIR*, Listing>();
  return *m;
}

void* next_entry(DIR* dir, bool large) {
  Listing* l = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = listings().find(dir);
    if (it != listings().end()) l = &it->second;
  }
  for (;;) {
    void* e = large ? static_cast<void*>(real::readdir64(dir)) : static_cast<void*>(real::readdir(dir));
    if (!l) return e;
    if (!e) break;
    const char* name = large ? static_cast<dirent64*>(e)->d_name : static_cast<dirent*>(e)->d_name;
    if (!l->ours.count(name)) return e;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  if (l->next >= l->names.size()) return nullptr;
  const std::string& n = l->names[l->next++];
  memset(&l->entry, 0, sizeof l->entry);
  l->entry.d_ino = 1 + std::hash<std::string>{}(n) % 0x7fffffff;
  l->entry.d_off = static_cast<off64_t>(l->next);
  l->entry.d_reclen = sizeof l->entry;
  l->entry.d_type = DT_REG;
  snprintf(l->entry.d_name, sizeof l->entry.d_name, "%s", n.c_str());
  return &l->entry;  // struct dirent and dirent64 have one layout on 64-bit Linux
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) DIR* opendir(const char* path) {
  DIR* d = real::opendir(path);
  if (d && vfs().active()) {
    auto names = vfs().names_in(cairn::paths::absolute(path));
    if (!names.empty()) {
      std::lock_guard<std::mutex> lock(g_mu);
      Listing& l = listings()[d];
      l = Listing{};
      l.ours.insert(names.begin(), names.end());
      l.names = std::move(names);
    }
  }
  return d;
}

__attribute__((visibility("default"))) struct dirent* readdir(DIR* dir) {
  return static_cast<struct dirent*>(next_entry(dir, false));
}
__attribute__((visibility("default"))) struct dirent64* readdir64(DIR* dir) {
  return static_cast<struct dirent64*>(next_entry(dir, true));
}

__attribute__((visibility("default"))) void rewinddir(DIR* dir) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = listings().find(dir);
    if (it != listings().end()) it->second.next = 0;
  }
  using F = void (*)(DIR*);
  static F real_rewind = reinterpret_cast<F>(dlsym(RTLD_NEXT, "rewinddir"));
  if (real_rewind) real_rewind(dir);
}

__attribute__((visibility("default"))) int closedir(DIR* dir) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    listings().erase(dir);
  }
  return real::closedir(dir);
}

}  // extern "C"
