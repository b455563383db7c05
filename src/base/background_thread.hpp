// The threads that work for the application in the background -- the pipeline's worker (seal, L2, L3
// hand-over), the copy-on-write copier, the cache's slot preparation and an L2 restart's re-protection --
// run under SCHED_BATCH, the normal time-sharing policy minus wake-up preemption: a batch thread does not
// take the core of the thread that woke it. Without it, the worker woken at the end of cairn_checkpoint
// preempted the application on its own core, and the application waited for a core before
// cairn_checkpoint returned (the figures: docs/performance.md, "What the application loses"). Threads
// that the application waits for (the cow fault handler) keep the normal policy.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <functional>
#include <memory>

namespace cairn {

// Puts the calling thread under SCHED_BATCH; a kernel that refuses leaves it as it was.
inline void become_background_thread() {
  sched_param batch{};
  (void)sched_setscheduler(0, SCHED_BATCH, &batch);
}

// A thread that is a batch thread from its creation, so that starting it does not preempt the thread
// that starts it either (a std::thread that calls become_background_thread() first has already taken the
// core: the kernel may run a new thread at once, on its creator's core). Where the policy cannot be set
// at creation, the thread is made as std::thread would and then calls become_background_thread(). As
// std::thread: join before destruction (the destructor of a joinable one terminates).
class BackgroundThread {
 public:
  BackgroundThread() = default;
  explicit BackgroundThread(std::function<void()> fn);
  BackgroundThread(BackgroundThread&& o) noexcept : id_(o.id_), started_(o.started_) { o.started_ = false; }
  BackgroundThread& operator=(BackgroundThread&& o) noexcept;
  BackgroundThread(const BackgroundThread&) = delete;
  BackgroundThread& operator=(const BackgroundThread&) = delete;
  ~BackgroundThread();

  bool joinable() const { return started_; }
  void join();

 private:
  pthread_t id_{};
  bool started_ = false;
};

}  // namespace cairn
