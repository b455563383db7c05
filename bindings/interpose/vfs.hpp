// The interposer's view of the application's checkpoint files: every file whose path matches the
// pattern lives in this rank's node-local scratch directory (cairn_local_dir) instead of at its path,
// and the calls the application makes on that path are answered from there, as a file system would.
//
// A file has generations: the application writes a new one (copy on write: an open for writing never
// changes content that a version may be taking), and when its last writer closes it, that generation
// becomes the file's committed content. Committed content never changes afterwards, so a version can
// take it (a hard link) while the application goes on. Per step (the %d of the pattern) the view counts
// open writers, committed files and changes; the checkpoint thread (checkpoint_thread.hpp) reports these to rank 0, which decides
// when a step is complete on every rank.
//
// Thread-safe. Calls the C library through real:: (libc_real.hpp), never through the wrappers.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "pattern.hpp"

namespace cairn::interpose {

// One step as this rank sees it.
struct StepState {
  int writers = 0;     // writers open on files of the step
  int committed = 0;   // files of the step with committed content
  uint64_t changes = 0;  // commits, unlinks and renames so far
  // The changes the newest older step had when this one was first opened for writing (0: no such step,
  // or it was restored): how many this step should see once the code has written it the same way.
  uint64_t shape = 0;
};

// Whether a rank has written a step, as rank 0 judges it from the rank's report. Its files are closed and
// at least `files` of them committed, and either the step has seen as many changes as the step before it
// (the code writes its steps alike: a temporary file renamed at the end counts its rename), or nothing of it
// changed for `settle` (the first step, or a step written differently), or the code is finishing.
bool step_written(const StepState& st, int files, std::chrono::milliseconds quiet, std::chrono::milliseconds settle,
                  bool finishing);

// A file held for a version being taken: `link` is a hard link to its committed content; a file of an
// older step that is still there is listed without content (ghost: link empty, size kept).
struct Held {
  std::string path;  // the application's path
  std::string link;  // in the scratch directory ("" for a ghost)
  uint64_t step = 0;
  uint32_t mode = 0644;
  uint64_t size = 0;
};

class Vfs {
 public:
  // Start answering for paths that match `pattern`; files live in `scratch` (emptied first).
  // `on_change` is called (without the lock) after any change of a step's state.
  void start(const std::string& scratch, Pattern pattern, bool prefault, std::function<void()> on_change);
  // Stop answering: later calls pass through to the file system.
  void stop();
  bool active() const;

  // The calls. Each returns nullopt when the path is not ours, and the caller passes the call on.
  // Results follow the C library: a value, or -1 with errno set.
  std::optional<int> open(const char* path, int flags, mode_t mode);
  // Before the application's close of `fd` (which the caller then makes): true when fd was ours.
  bool before_close(int fd);
  bool owns(int fd);  // whether fd is one of our files
  // The backing file holding a path's current content, for stat, access and opens for reading.
  std::optional<std::string> resolve(const char* path);
  std::optional<int> unlink(const char* path);
  std::optional<int> rename(const char* from, const char* to);
  std::optional<int> truncate(const char* path, off_t length);
  void dup(int from, int to);  // `to` now refers to the same open file as `from`
  // The names of our files directly in directory `dir` (absolute, normalised).
  std::vector<std::string> names_in(const std::string& dir);

  // For the checkpoint thread.
  std::map<uint64_t, StepState> steps();
  // Hard links to the committed content of every file of `step`, made in `dir` (names f0, f1, ...),
  // then the committed files of older steps as ghosts: those there now, and those the code removed or
  // renamed away after it had written `step` (a step held late: the version lists what the code had when it
  // had written the step; a removal in the step's own routine, after the write, is listed as well).
  std::vector<Held> hold_step(uint64_t step, const std::string& dir);
  // Files of a restored version: `source` is linked (or copied) in as the committed content; without a
  // source the file is a ghost of `size` bytes (stat and unlink work, reading it is EIO).
  int restore(const std::string& path, uint64_t step, uint32_t mode, const std::string& source, uint64_t size = 0);
  // After step `taken` became a version: drop files (not being written) of steps before the `keep` newest
  // steps the code has (taken, or with committed files), and, with prefault, prepare space for the next
  // generation of each file of `taken`.
  void after_take(uint64_t taken, int keep);

 private:
  struct Entry {
    std::string path;
    std::string slot;  // the path with its step taken out (prefault pool key)
    uint64_t step = 0;
    mode_t mode = 0644;
    std::string committed;  // backing of the committed content ("" if none yet)
    std::string writing;    // backing of the generation being written ("" if none)
    int writers = 0;
    bool orphan = false;    // unlinked or replaced while open
    bool ghost = false;     // restored without content (an older step's file)
  };
  struct Fd {
    std::shared_ptr<Entry> entry;
    bool writer = false;
  };
  std::string new_backing();
  std::string current(const Entry& e) const { return e.writing.empty() ? e.committed : e.writing; }
  std::optional<Match> ours(const char* path, std::string* abs) const;
  void drop_backing(const std::string& path);
  void forget(std::shared_ptr<Entry> e);  // remove from the namespace (callers hold mu_)
  void note_gone(const Entry& e);          // before the code's own removal of e (callers hold mu_)
  StepState& begin_step(uint64_t step);    // steps_[step], shaped after the step before it when new
  int copy_into(const std::string& from, const std::string& to);

  mutable std::mutex mu_;
  std::atomic<bool> active_{false};  // read without the lock by every wrapped call
  bool prefault_ = false;
  std::string scratch_;
  std::optional<Pattern> pattern_;
  std::function<void()> on_change_;
  uint64_t next_backing_ = 0;
  std::map<std::string, std::shared_ptr<Entry>> entries_;  // by absolute path
  std::map<int, Fd> fds_;
  std::map<uint64_t, StepState> steps_;
  std::map<std::string, std::string> pool_;  // slot -> prepared backing (space already allocated)
  std::vector<uint64_t> taken_;              // steps taken, in order
  // Paths dropped by after_take that the code has not removed yet: its own unlink of one succeeds (the code
  // removing its old step at the same moment must not see ENOENT).
  std::set<std::string> dropped_;
  // Older files the code removed while a newer step S, not taken yet, was written on this rank (committed
  // files, no writer open), by S: S's version lists them as ghosts. Dropped when S, or a newer one, is taken.
  std::map<uint64_t, std::vector<Held>> gone_;
};

Vfs& vfs();

}  // namespace cairn::interpose
