#include "base/background_thread.hpp"

#include <cerrno>
#include <cstdlib>
#include <exception>
#include <system_error>
#include <utility>

namespace cairn {
namespace {

struct Start {
  std::function<void()> fn;
  bool set_policy;  // the attributes could not carry SCHED_BATCH: set it from the thread
};

void* run(void* arg) {
  std::unique_ptr<Start> start(static_cast<Start*>(arg));
  if (start->set_policy) become_background_thread();
  start->fn();
  return nullptr;
}

}  // namespace

BackgroundThread::BackgroundThread(std::function<void()> fn) {
  auto start = std::make_unique<Start>(Start{std::move(fn), false});
  pthread_attr_t attr;
  int rc = pthread_attr_init(&attr);
  if (rc != 0) throw std::system_error(rc, std::generic_category(), "pthread_attr_init");
  sched_param batch{};
  const bool batch_attr = pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED) == 0 &&
                          pthread_attr_setschedpolicy(&attr, SCHED_BATCH) == 0 &&
                          pthread_attr_setschedparam(&attr, &batch) == 0;
  start->set_policy = !batch_attr;
  rc = pthread_create(&id_, &attr, run, start.get());
  if (rc == EPERM && batch_attr) {  // a policy the caller may not choose: as std::thread, then batch
    pthread_attr_destroy(&attr);
    pthread_attr_init(&attr);
    start->set_policy = true;
    rc = pthread_create(&id_, &attr, run, start.get());
  }
  pthread_attr_destroy(&attr);
  if (rc != 0) throw std::system_error(rc, std::generic_category(), "pthread_create");
  start.release();  // the thread owns it now
  started_ = true;
}

BackgroundThread& BackgroundThread::operator=(BackgroundThread&& o) noexcept {
  if (started_) std::terminate();  // as std::thread: a joinable thread is not overwritten
  id_ = o.id_;
  started_ = std::exchange(o.started_, false);
  return *this;
}

BackgroundThread::~BackgroundThread() {
  if (started_) std::terminate();
}

void BackgroundThread::join() {
  if (!started_) return;
  pthread_join(id_, nullptr);
  started_ = false;
}

}  // namespace cairn
