#include "service/chunk_sink.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "base/xxh.hpp"

namespace cairn::service {

struct ChunkSink::HashState {
  XXH3_state_t* state = XXH3_createState();
  ~HashState() { XXH3_freeState(state); }
};

ChunkSink::ChunkSink() = default;

ChunkSink::~ChunkSink() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status ChunkSink::start() {
  int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return posix_error("eventfd", "(chunk sink)", errno);
  event_ = fs::Fd(fd);
  hash_ = std::make_unique<HashState>();
  thread_ = std::thread([this] { run(); });
  return Status::ok();
}

void ChunkSink::begin(uint64_t transfer, const Layout& layout, const Manifest& m, const l3::RankPlacement& place,
                      const l3::WriteOptions& opts) {
  Item it;
  it.kind = Item::begin;
  it.transfer = transfer;
  it.layout = layout;
  it.manifest = m;
  it.place = place;
  it.opts = opts;
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

void ChunkSink::handle(Item& it) {
  switch (it.kind) {
    case Item::begin: {
      current_ = it.transfer;
      failed_ = false;
      manifest_ = it.manifest;
      hashed_ = 0;
      XXH3_64bits_reset(hash_->state);
      writer_ = std::make_unique<l3::RankWriter>();
      Status st = writer_->open(it.layout, it.manifest, it.place, &it.opts);
      if (!st.is_ok()) {
        failed_ = true;
        writer_.reset();
        emit(Event{Event::failed, current_, 0, st});
      }
      return;
    }
    case Item::chunk: {
      if (it.transfer == current_ && !failed_) {
        Status st = verify_and_write(it);
        if (!st.is_ok()) {
          failed_ = true;
          writer_.reset();  // removes the partial file
          emit(Event{Event::failed, current_, 0, st});
        }
      }
      emit(Event{Event::buffer_free, it.transfer, it.buffer, Status::ok()});
      return;
    }
    case Item::end: {
      if (it.transfer != current_ || failed_ || !writer_) return;
      Status st = hashed_ == manifest_.total_size
                      ? writer_->finish()
                      : make_error(Code::ERR_INTERNAL, "version %llu rank %u: %llu of %llu bytes arrived",
                                   static_cast<unsigned long long>(manifest_.version), manifest_.rank,
                                   static_cast<unsigned long long>(hashed_),
                                   static_cast<unsigned long long>(manifest_.total_size));
      writer_.reset();
      emit(Event{st.is_ok() ? Event::finished : Event::failed, current_, 0, st});
      return;
    }
    case Item::abort:
      if (it.transfer == current_) {
        failed_ = true;
        writer_.reset();
      }
      return;
  }
}

// Hash the chunk's bytes into the running checksum chunk(s) and compare each one that completes, then
// write. Chunks come in stream order, so one running state suffices.
Status ChunkSink::verify_and_write(const Item& it) {
  if (it.offset != hashed_)
    return make_error(Code::ERR_INTERNAL, "chunk at byte %llu arrived out of order (expected byte %llu)",
                      static_cast<unsigned long long>(it.offset), static_cast<unsigned long long>(hashed_));
  const uint64_t csize = manifest_.chunk_size;
  uint64_t pos = 0;
  while (pos < it.len) {
    uint64_t in_chunk = hashed_ % csize;
    uint64_t take = std::min<uint64_t>(it.len - pos, csize - in_chunk);
    XXH3_64bits_update(hash_->state, it.data + pos, take);
    pos += take;
    hashed_ += take;
    if (hashed_ % csize == 0 || hashed_ == manifest_.total_size) {
      uint64_t idx = (hashed_ - 1) / csize;
      uint64_t got = XXH3_64bits_digest(hash_->state);
      XXH3_64bits_reset(hash_->state);
      if (got != manifest_.chunk_hashes[idx])
        return make_error(Code::ERR_CORRUPT,
                          "version %llu rank %u: chunk %llu (bytes %llu..%llu) arrived with xxh3 %016llx, the "
                          "manifest says %016llx",
                          static_cast<unsigned long long>(manifest_.version), manifest_.rank,
                          static_cast<unsigned long long>(idx), static_cast<unsigned long long>(idx * csize),
                          static_cast<unsigned long long>(hashed_), static_cast<unsigned long long>(got),
                          static_cast<unsigned long long>(manifest_.chunk_hashes[idx]));
    }
  }
  return writer_->write(it.offset, it.data, it.len);
}

}  // namespace cairn::service
