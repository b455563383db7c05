#include "service/agent/chunk_sink.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <string>


namespace cairn::service {

ChunkSink::ChunkSink() = default;

ChunkSink::~ChunkSink() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status ChunkSink::start(Chain chain) {
  chain_ = std::move(chain);
  int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return posix_error("eventfd", "(chunk sink)", errno);
  event_ = fs::Fd(fd);
  thread_ = std::thread([this] { run(); });
  return Status::ok();
}

void ChunkSink::begin(uint64_t transfer, StageVersion version) {
  Item it;
  it.kind = Item::begin;
  it.transfer = transfer;
  it.version = std::make_unique<StageVersion>(std::move(version));
  enqueue(std::move(it));
}

void ChunkSink::chunk(uint64_t transfer, uint64_t offset, const uint8_t* data, uint32_t len, uint32_t buffer) {
  Item it;
  it.kind = Item::chunk;
  it.transfer = transfer;
  it.offset = offset;
  it.data = data;
  it.len = len;
  it.buffer = buffer;
  enqueue(std::move(it));
}

void ChunkSink::end(uint64_t transfer) {
  Item it;
  it.kind = Item::end;
  it.transfer = transfer;
  enqueue(std::move(it));
}

void ChunkSink::enqueue(Item it) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back(std::move(it));
  cv_.notify_all();
}

void ChunkSink::abort(uint64_t transfer) {
  Item it;
  it.kind = Item::abort;
  it.transfer = transfer;
  std::lock_guard<std::mutex> lock(mu_);
  // Chunks of the transfer still queued are not written: their buffers go back at once.
  for (auto& q : queue_)
    if (q.transfer == transfer && q.kind == Item::chunk) {
      events_.push_back(Event{Event::buffer_free, transfer, q.buffer, Status::ok()});
      q.kind = Item::abort;
    }
  queue_.push_back(std::move(it));
  cv_.notify_all();
  uint64_t one = 1;
  (void)!write(event_.get(), &one, sizeof one);
}

std::vector<ChunkSink::Event> ChunkSink::take_events() {
  uint64_t n = 0;
  (void)!read(event_.get(), &n, sizeof n);
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Event> out;
  out.swap(events_);
  return out;
}

void ChunkSink::emit(Event e) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(e));
  }
  uint64_t one = 1;
  (void)!write(event_.get(), &one, sizeof one);
}

void ChunkSink::run() {
  for (;;) {
    Item it;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      it = std::move(queue_.front());
      queue_.pop_front();
    }
    handle(it);
  }
}

// A stage failed: every stage of the transfer gives up (write removes its partial file).
void ChunkSink::fail(const Status& why) {
  failed_ = true;
  for (auto& st : stages_) st->abort();
  stages_.clear();
  emit(Event{Event::failed, current_, 0, why});
}

void ChunkSink::handle(Item& it) {
  switch (it.kind) {
    case Item::begin: {
      current_ = it.transfer;
      failed_ = false;
      version_ = std::move(it.version);
      stages_ = chain_.instantiate();
      for (size_t i = 0; i < stages_.size(); ++i) {
        Status st = stages_[i]->begin(*version_);
        if (!st.is_ok()) {
          std::string name = stages_[i]->name();
          stages_.resize(i);  // the ones begun are aborted
          return fail(st.prefixed(name));
        }
      }
      return;
    }
    case Item::chunk: {
      if (it.transfer == current_ && !failed_)
        for (auto& stage : stages_) {
          Status st = stage->data(it.offset, it.data, it.len);
          if (!st.is_ok()) {
            fail(st);
            break;
          }
        }
      emit(Event{Event::buffer_free, it.transfer, it.buffer, Status::ok()});
      return;
    }
    case Item::end: {
      if (it.transfer != current_ || failed_ || stages_.empty()) return;
      // In chain order: verify first (every byte arrived), then write (the manifest last), then plugins.
      for (size_t i = 0; i < stages_.size(); ++i) {
        Status st = stages_[i]->finish();
        if (!st.is_ok()) {
          stages_.erase(stages_.begin(), stages_.begin() + static_cast<long>(i) + 1);  // finished or failed
          return fail(st);
        }
      }
      stages_.clear();
      emit(Event{Event::finished, current_, 0, Status::ok()});
      return;
    }
    case Item::abort:
      if (it.transfer == current_ && !failed_) {
        failed_ = true;
        for (auto& st : stages_) st->abort();
        stages_.clear();
      }
      return;
  }
}

}  // namespace cairn::service
