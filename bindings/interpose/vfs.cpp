#include "vfs.hpp"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <set>
#include <vector>

#include "common/lexical_path.hpp"
#include "libc_real.hpp"

namespace cairn::interpose {

Vfs& vfs() {
  static Vfs* v = new Vfs();  // never destroyed: wrappers may run during exit
  return *v;
}

namespace {

mode_t g_umask = 022;

int copy_fd(int in, int out) {
  std::vector<char> buf(1 << 20);
  for (;;) {
    ssize_t r = ::read(in, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) return 0;
    for (ssize_t done = 0; done < r;) {
      ssize_t w = ::write(out, buf.data() + done, static_cast<size_t>(r - done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return -1;
      done += w;
    }
  }
}

void empty_dir(const std::string& dir) {
  if (DIR* d = real::opendir(dir.c_str())) {
    std::vector<std::string> names;
    while (struct dirent* e = real::readdir(d))
      if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
    real::closedir(d);
    for (const auto& n : names) real::unlink((dir + "/" + n).c_str());
  }
}

}  // namespace

void Vfs::start(const std::string& scratch, Pattern pattern, bool prefault, std::function<void()> on_change) {
  g_umask = ::umask(022);
  ::umask(g_umask);
  std::lock_guard<std::mutex> lock(mu_);
  scratch_ = scratch;
  empty_dir(scratch_);  // what a crashed run left
  pattern_ = std::move(pattern);
  prefault_ = prefault;
  on_change_ = std::move(on_change);
  active_ = true;
}

void Vfs::stop() {
  std::lock_guard<std::mutex> lock(mu_);
  active_ = false;
  for (auto& [slot, path] : pool_) real::unlink(path.c_str());
  pool_.clear();
}

bool Vfs::active() const { return active_.load(std::memory_order_acquire); }

std::optional<Match> Vfs::ours(const char* path, std::string* abs) const {
  if (!path || !*path || !active_) return std::nullopt;
  *abs = paths::absolute(path);
  if (paths::is_under(*abs, scratch_)) return std::nullopt;
  return pattern_->match(*abs);
}

std::string Vfs::new_backing() { return scratch_ + "/g" + std::to_string(next_backing_++); }

void Vfs::drop_backing(const std::string& path) {
  if (!path.empty()) real::unlink(path.c_str());
}

int Vfs::copy_into(const std::string& from, const std::string& to) {
  int in = real::open(from.c_str(), O_RDONLY | O_CLOEXEC, 0);
  if (in < 0) return -1;
  int out = real::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (out < 0) {
    int e = errno;
    real::close(in);
    errno = e;
    return -1;
  }
  int rc = copy_fd(in, out);
  int e = errno;
  real::close(in);
  if (real::close(out) != 0 && rc == 0) rc = -1, e = errno;
  errno = e;
  return rc;
}

void Vfs::forget(std::shared_ptr<Entry> e) {  // by value: the map may hold the last reference
  entries_.erase(e->path);
  StepState& s = steps_[e->step];
  if (!e->committed.empty()) {
    drop_backing(e->committed);
    e->committed.clear();
    --s.committed;
  }
  ++s.changes;
  if (e->writers > 0) e->orphan = true;  // its writing generation goes at the last close
}

void Vfs::note_gone(const Entry& e) {
  if (e.committed.empty()) return;
  struct stat st;
  bool sized = false;
  // For every newer step not taken yet that is written on this rank (files committed, none open): a code
  // restarted from it may remove the file again. A removal that belonged to that step's own routine (write
  // the new, then remove the old) is listed too; it is never repeated, and the ghost goes when after_take
  // finds it older than the `keep` newest steps. Listing too little would fail the code's removal after a
  // restart; listing that one more costs a ghost until then.
  for (auto it = steps_.upper_bound(e.step); it != steps_.end(); ++it) {
    if (it->second.committed == 0 || it->second.writers > 0 ||
        std::find(taken_.begin(), taken_.end(), it->first) != taken_.end())
      continue;
    if (!sized && real::stat(e.committed.c_str(), &st) != 0) return;
    sized = true;
    gone_[it->first].push_back(
        Held{e.path, "", e.step, static_cast<uint32_t>(e.mode), static_cast<uint64_t>(st.st_size)});
  }
}

StepState& Vfs::begin_step(uint64_t step) {
  auto [it, fresh] = steps_.try_emplace(step);
  if (fresh && it != steps_.begin()) {
    const StepState& before = std::prev(it)->second;
    if (before.committed > 0) it->second.shape = before.changes;
  }
  return it->second;
}

bool step_written(const StepState& st, int files, std::chrono::milliseconds quiet, std::chrono::milliseconds settle,
                  bool finishing) {
  if (st.writers != 0 || st.committed < files) return false;
  return finishing || (st.shape > 0 && st.changes >= st.shape) || quiet >= settle;
}

std::optional<int> Vfs::open(const char* path, int flags, mode_t mode) {
  std::string abs;
  bool changed = false;
  int fd = -1, err = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto m = ours(path, &abs);
    if (!m) return std::nullopt;
    auto it = entries_.find(abs);
    const bool write = (flags & O_ACCMODE) != O_RDONLY;
    if (it != entries_.end() && it->second->ghost && it->second->writing.empty() && (!write || !(flags & O_TRUNC))) {
      fprintf(stderr, "cairn-interpose: %s: the content of this older step's file was not kept (a restart "
              "restores the newest step's files only)\n", abs.c_str());
      errno = EIO;
      return -1;
    }
    if (!write) {
      if (it == entries_.end()) return std::nullopt;  // a file we do not hold: the file system answers
      fd = real::open(current(*it->second).c_str(), flags & ~(O_CREAT | O_EXCL | O_TRUNC), 0);
      return fd;
    }
    if (it != entries_.end() && (flags & O_CREAT) && (flags & O_EXCL)) {
      errno = EEXIST;
      return -1;
    }
    if (it == entries_.end()) {
      if (!(flags & O_CREAT)) return std::nullopt;
      struct stat dir;
      if (real::stat(paths::dir_name(abs).c_str(), &dir) != 0) return -1;  // errno from stat: ENOENT, ...
      if (!S_ISDIR(dir.st_mode)) {
        errno = ENOTDIR;
        return -1;
      }
      auto e = std::make_shared<Entry>();
      e->path = abs;
      e->slot = m->slot;
      e->step = m->step;
      e->mode = mode & 07777 & ~g_umask;
      it = entries_.emplace(abs, e).first;
      dropped_.erase(abs);
    }
    Entry& e = *it->second;
    int open_flags = flags & ~(O_CREAT | O_EXCL);
    if (e.writing.empty()) {  // a new generation; what a version may be taking is never written to
      std::string gen = new_backing();
      const bool empty = (flags & O_TRUNC) || e.committed.empty();
      int rc = 0;
      if (empty && prefault_ && pool_.count(e.slot)) {
        rc = real::rename(pool_[e.slot].c_str(), gen.c_str());  // space already allocated, size 0
        pool_.erase(e.slot);
      } else if (!empty) {
        rc = copy_into(e.committed, gen);
      } else {
        int c = real::open(gen.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        rc = c < 0 ? -1 : real::close(c);
      }
      if (rc != 0) {
        err = errno;
        drop_backing(gen);
        if (e.committed.empty() && e.writers == 0) entries_.erase(it);
        errno = err;
        return -1;
      }
      ::chmod(gen.c_str(), e.mode | S_IRUSR | S_IWUSR);
      e.writing = gen;
      open_flags &= ~O_TRUNC;  // empty already (a truncate would also free the prepared space)
    }
    fd = real::open(e.writing.c_str(), open_flags, 0);
    if (fd < 0) return -1;
    fds_[fd] = Fd{it->second, true};
    ++e.writers;
    ++begin_step(e.step).writers;
    changed = true;
  }
  if (changed && on_change_) on_change_();
  return fd;
}

bool Vfs::before_close(int fd) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = fds_.find(fd);
    if (it == fds_.end()) return false;
    Fd f = it->second;
    fds_.erase(it);
    if (!f.writer) return true;
    Entry& e = *f.entry;
    StepState& s = steps_[e.step];
    --s.writers;
    if (--e.writers > 0) return true;
    struct stat st;
    if (prefault_ && ::fstat(fd, &st) == 0) {  // give back prepared space beyond the end
      if (::ftruncate(fd, st.st_size + 1) == 0) (void)!::ftruncate(fd, st.st_size);
    }
    if (e.orphan) {
      drop_backing(e.writing);
    } else {
      if (e.committed.empty()) ++s.committed;
      drop_backing(e.committed);
      e.committed = e.writing;
      e.ghost = false;
      ++s.changes;
    }
    e.writing.clear();
  }
  if (on_change_) on_change_();
  return true;
}

bool Vfs::owns(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  return fds_.count(fd) > 0;
}

std::optional<std::string> Vfs::resolve(const char* path) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string abs;
  if (!ours(path, &abs)) return std::nullopt;
  auto it = entries_.find(abs);
  if (it == entries_.end()) return std::nullopt;
  return current(*it->second);
}

std::optional<int> Vfs::unlink(const char* path) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::string abs;
    if (!ours(path, &abs)) return std::nullopt;
    auto it = entries_.find(abs);
    if (it == entries_.end()) {
      if (dropped_.erase(abs) == 0) return std::nullopt;
      return 0;  // dropped as an old step's file a moment ago: the code's removal of it succeeds
    }
    note_gone(*it->second);
    forget(it->second);
  }
  if (on_change_) on_change_();
  return 0;
}

std::optional<int> Vfs::rename(const char* from, const char* to) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::string af, at;
    auto fm = ours(from, &af);
    auto tm = ours(to, &at);
    auto fe = fm ? entries_.find(af) : entries_.end();
    if (fe == entries_.end() && !tm) return std::nullopt;
    if (fe != entries_.end() && af == at) return 0;
    std::shared_ptr<Entry> moved;
    if (fe != entries_.end()) {
      moved = fe->second;
      note_gone(*moved);  // its path goes
      if (!tm) {  // out of the pattern: the content becomes a real file there
        if (copy_into(current(*moved), paths::absolute(to)) != 0) return -1;
        forget(moved);
        moved.reset();
      }
    } else {  // a real file moved into the pattern: its content comes in
      std::string gen = new_backing();
      if (copy_into(paths::absolute(from), gen) != 0) {
        int e = errno;
        drop_backing(gen);
        errno = e;
        return -1;
      }
      if (real::unlink(from) != 0) {
        int e = errno;
        drop_backing(gen);
        errno = e;
        return -1;
      }
      moved = std::make_shared<Entry>();
      moved->committed = gen;
      struct stat st;
      moved->mode = real::stat(gen.c_str(), &st) == 0 ? st.st_mode & 07777 : 0644;
    }
    if (moved) {
      if (auto te = entries_.find(at); te != entries_.end()) {
        note_gone(*te->second);
        forget(te->second);
      }
      if (!moved->path.empty()) {  // leaves its old place (and step)
        entries_.erase(moved->path);
        StepState& s = steps_[moved->step];
        s.writers -= moved->writers;
        if (!moved->committed.empty()) --s.committed;
        ++s.changes;
      }
      moved->path = at;
      moved->step = tm->step;
      moved->slot = tm->slot;
      StepState& s = begin_step(moved->step);
      s.writers += moved->writers;
      if (!moved->committed.empty()) ++s.committed;
      ++s.changes;
      entries_[at] = moved;
      dropped_.erase(at);
    }
  }
  if (on_change_) on_change_();
  return 0;
}

std::optional<int> Vfs::truncate(const char* path, off_t length) {
  if (!resolve(path)) return std::nullopt;
  auto fd = open(path, O_WRONLY | O_CLOEXEC, 0);
  if (!fd || *fd < 0) return fd;
  int rc = ::ftruncate(*fd, length);
  int e = errno;
  before_close(*fd);
  real::close(*fd);
  errno = e;
  return rc;
}

void Vfs::dup(int from, int to) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = fds_.find(from);
  if (it == fds_.end() || from == to) return;
  Fd f = it->second;
  fds_[to] = f;
  if (f.writer) {
    ++f.entry->writers;
    ++steps_[f.entry->step].writers;
  }
}

std::vector<std::string> Vfs::names_in(const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  if (!active_) return out;
  for (const auto& [path, e] : entries_)
    if (paths::dir_name(path) == dir) out.push_back(paths::base_name(path));
  return out;
}

std::map<uint64_t, StepState> Vfs::steps() {
  std::lock_guard<std::mutex> lock(mu_);
  return steps_;
}

std::vector<Held> Vfs::hold_step(uint64_t step, const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Held> out;
  for (const auto& [path, e] : entries_) {
    if (e->step != step || e->committed.empty() || e->ghost) continue;
    Held h{path, dir + "/f" + std::to_string(out.size()), step, static_cast<uint32_t>(e->mode), 0};
    if (::link(e->committed.c_str(), h.link.c_str()) != 0 && copy_into(e->committed, h.link) != 0) continue;
    out.push_back(std::move(h));
  }
  for (const auto& [path, e] : entries_) {
    struct stat st;
    if (e->step < step && !e->committed.empty() && real::stat(e->committed.c_str(), &st) == 0)
      out.push_back(Held{path, "", e->step, static_cast<uint32_t>(e->mode), static_cast<uint64_t>(st.st_size)});
  }
  if (auto g = gone_.find(step); g != gone_.end()) {
    std::set<std::string> listed;
    for (auto h = g->second.rbegin(); h != g->second.rend(); ++h)  // a path's newest removal: its last form
      if (!entries_.count(h->path) && listed.insert(h->path).second) out.push_back(*h);
  }
  return out;
}

int Vfs::restore(const std::string& path, uint64_t step, uint32_t mode, const std::string& source, uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string gen = new_backing();
  if (source.empty()) {  // a ghost: a sparse file of its size, no content
    int fd = real::open(gen.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(size)) != 0) {
      if (fd >= 0) real::close(fd);
      return -1;
    }
    real::close(fd);
  } else if (::link(source.c_str(), gen.c_str()) != 0 && copy_into(source, gen) != 0) {
    return -1;
  }
  ::chmod(gen.c_str(), (mode & 07777) | S_IRUSR | S_IWUSR);
  auto e = std::make_shared<Entry>();
  e->path = path;
  e->step = step;
  e->mode = mode & 07777;
  e->committed = gen;
  e->ghost = source.empty();
  if (auto m = pattern_->match(path)) e->slot = m->slot;
  if (auto old = entries_.find(path); old != entries_.end()) forget(old->second);
  entries_[path] = e;
  dropped_.erase(path);
  ++steps_[step].committed;
  if (!e->ghost && std::find(taken_.begin(), taken_.end(), step) == taken_.end()) taken_.push_back(step);
  return 0;
}

void Vfs::after_take(uint64_t taken, int keep) {
  std::vector<std::pair<std::string, off_t>> wanted;  // slots to prepare, and their sizes
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (std::find(taken_.begin(), taken_.end(), taken) == taken_.end()) taken_.push_back(taken);
    gone_.erase(gone_.begin(), gone_.upper_bound(taken));
    // The steps the code sees: those taken and those with committed files (a step passed over for a newer
    // one, or not settled yet, is still the code's to read or remove).
    std::set<uint64_t> newest(taken_.begin(), taken_.end());
    for (const auto& [step, st] : steps_)
      if (st.committed > 0) newest.insert(step);
    while (static_cast<int>(newest.size()) > std::max(keep, 1)) newest.erase(newest.begin());
    const uint64_t cutoff = *newest.begin();
    std::vector<std::shared_ptr<Entry>> old;
    for (const auto& [path, e] : entries_)
      if (e->step < cutoff && e->writers == 0) old.push_back(e);
    for (const auto& e : old) {
      dropped_.insert(e->path);
      forget(e);
    }
    if (prefault_)
      for (const auto& [path, e] : entries_) {
        struct stat st;
        if (e->step == taken && !e->committed.empty() && !pool_.count(e->slot) &&
            real::stat(e->committed.c_str(), &st) == 0 && st.st_size > 0)
          wanted.emplace_back(e->slot, st.st_size);
      }
  }
  // Allocating the space (zeroed pages on tmpfs) is the slow part: outside the lock.
  for (const auto& [slot, size] : wanted) {
    std::string path;
    {
      std::lock_guard<std::mutex> lock(mu_);
      path = scratch_ + "/p" + std::to_string(next_backing_++);
    }
    int fd = real::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) continue;
    bool ok = ::fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, size) == 0;
    real::close(fd);
    std::lock_guard<std::mutex> lock(mu_);
    if (ok && active_ && !pool_.count(slot)) pool_[slot] = path;
    else real::unlink(path.c_str());
  }
}

}  // namespace cairn::interpose
