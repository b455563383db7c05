#include "service/agent/chunk_sink.hpp"

#include <cerrno>
#include <string>


namespace cairn::service {

ChunkSink::ChunkSink() = default;

ChunkSink::~ChunkSink() {
  pipe_.cancel(make_error(Code::ERR_CANCELLED, "the agent stops"));  // the thread leaves what is queued
  if (thread_.joinable()) thread_.join();
}

Status ChunkSink::start(Chain chain) {
  if (pipe_.back_fd() < 0) return posix_error("eventfd", "(chunk sink)", EMFILE);
  chain_ = std::move(chain);
  thread_ = std::thread([this] { run(); });
  return Status::ok();
}

void ChunkSink::begin(uint64_t transfer, StageVersion version) {
  Item it;
  it.kind = Item::begin;
  it.transfer = transfer;
  it.version = std::make_unique<StageVersion>(std::move(version));
  pipe_.post(std::move(it));
}

void ChunkSink::chunk(uint64_t transfer, uint64_t offset, const uint8_t* data, uint32_t len, uint32_t buffer) {
  Item it;
  it.kind = Item::chunk;
  it.transfer = transfer;
  it.offset = offset;
  it.data = data;
  it.len = len;
  it.buffer = buffer;
  pipe_.post(std::move(it));
}

void ChunkSink::end(uint64_t transfer) {
  Item it;
  it.kind = Item::end;
  it.transfer = transfer;
  pipe_.post(std::move(it));
}

void ChunkSink::cancel(uint64_t transfer) {
  // Chunks of the transfer still queued are not written: their buffers come back at once.
  for (const Item& q : pipe_.withdraw([&](const Item& q) { return q.transfer == transfer && q.kind == Item::chunk; }))
    pipe_.hand_back(Event{Event::buffer_free, transfer, q.buffer, Status::ok()});
  Item it;
  it.kind = Item::cancel;
  it.transfer = transfer;
  pipe_.post(std::move(it));
}

std::vector<ChunkSink::Event> ChunkSink::test() { return pipe_.test(); }
std::vector<ChunkSink::Event> ChunkSink::wait() { return pipe_.wait(); }

void ChunkSink::run() {
  while (auto it = pipe_.take()) handle(*it);
}

// A stage failed: every stage of the transfer gives up (write removes its partial file).
void ChunkSink::fail(const Status& why) {
  failed_ = true;
  for (auto& st : stages_) st->abort();
  stages_.clear();
  pipe_.hand_back(Event{Event::failed, current_, 0, why});
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
      pipe_.hand_back(Event{Event::buffer_free, it.transfer, it.buffer, Status::ok()});
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
      pipe_.hand_back(Event{Event::finished, current_, 0, Status::ok()});
      return;
    }
    case Item::cancel:
      if (it.transfer == current_ && !failed_) {
        failed_ = true;
        for (auto& st : stages_) st->abort();
        stages_.clear();
      }
      return;
  }
}

}  // namespace cairn::service
