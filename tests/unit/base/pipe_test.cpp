// The one bounded pipe (base/pipe.hpp) between two threads: items arrive in order and whole, the buffers
// bound what is in flight, close() ends the drainer, cancel() stops both sides with its first reason,
// withdraw() takes back what the drainer has not taken, and back_fd() says when something came back.
#include <gtest/gtest.h>

#include <poll.h>

#include <atomic>
#include <thread>
#include <vector>

#include "base/pipe.hpp"

namespace cairn {
namespace {

struct Piece {
  uint32_t buffer = 0;
  uint64_t seq = 0;
};

TEST(Pipe, ItemsArriveInOrderAndTheBuffersBoundWhatIsInFlight) {
  constexpr uint32_t kBuffers = 3;
  constexpr uint64_t kItems = 2000;
  Pipe<Piece, uint32_t> pipe;
  std::atomic<int> in_flight{0}, most{0};
  std::vector<uint64_t> seen;
  std::thread drainer([&] {
    while (auto p = pipe.take()) {
      seen.push_back(p->seq);
      in_flight.fetch_sub(1);
      pipe.hand_back(p->buffer);
    }
  });
  std::vector<uint32_t> free_buffers{0, 1, 2};
  for (uint64_t i = 0; i < kItems; ++i) {
    if (free_buffers.empty())
      for (uint32_t b : pipe.wait()) free_buffers.push_back(b);
    ASSERT_FALSE(free_buffers.empty());
    const uint32_t b = free_buffers.back();
    free_buffers.pop_back();
    most = std::max(most.load(), in_flight.fetch_add(1) + 1);
    pipe.post(Piece{b, i});
  }
  pipe.close();
  drainer.join();
  ASSERT_EQ(seen.size(), kItems);
  for (uint64_t i = 0; i < kItems; ++i) ASSERT_EQ(seen[i], i);
  EXPECT_LE(most.load(), static_cast<int>(kBuffers));
  EXPECT_LE(pipe.peak(), kBuffers);
  EXPECT_TRUE(pipe.error().is_ok());
  EXPECT_FALSE(pipe.cancelled());
}

TEST(Pipe, CancelStopsBothSidesAndKeepsTheFirstReason) {
  Pipe<Piece, uint32_t> pipe;
  std::thread drainer([&] {
    // Waits for an item that never comes until the cancel wakes it.
    EXPECT_FALSE(pipe.take().has_value());
  });
  std::thread filler([&] {
    // Waits for a buffer that never comes back until the cancel wakes it.
    EXPECT_TRUE(pipe.wait().empty());
  });
  pipe.cancel(make_error(Code::ERR_IO, "the disk is gone"));
  pipe.cancel(make_error(Code::ERR_CANCELLED, "a later reason"));
  drainer.join();
  filler.join();
  EXPECT_TRUE(pipe.cancelled());
  EXPECT_EQ(pipe.error().code(), Code::ERR_IO);
  EXPECT_EQ(pipe.error().message(), "the disk is gone");
  // Items posted after a cancel are never taken.
  pipe.post(Piece{0, 1});
  EXPECT_FALSE(pipe.take().has_value());
}

TEST(Pipe, WithdrawTakesBackOnlyWhatTheDrainerHasNotTakenAndBackFdSignals) {
  Pipe<Piece, uint32_t> pipe;
  for (uint64_t i = 0; i < 6; ++i) pipe.post(Piece{static_cast<uint32_t>(i), i});
  auto first = pipe.take();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->seq, 0u);
  auto odd = pipe.withdraw([](const Piece& p) { return p.seq % 2 == 1; });
  ASSERT_EQ(odd.size(), 3u);
  EXPECT_EQ(odd[0].seq, 1u);
  EXPECT_EQ(odd[2].seq, 5u);
  pollfd pfd{pipe.back_fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&pfd, 1, 0), 0) << "back_fd readable before anything came back";
  pipe.hand_back(first->buffer);
  EXPECT_EQ(::poll(&pfd, 1, 0), 1);
  EXPECT_EQ(pipe.test(), (std::vector<uint32_t>{0}));
  EXPECT_EQ(::poll(&pfd, 1, 0), 0) << "back_fd still readable after take_back";
  pipe.close();
  std::vector<uint64_t> rest;
  while (auto p = pipe.take()) rest.push_back(p->seq);
  EXPECT_EQ(rest, (std::vector<uint64_t>{2, 4}));
  EXPECT_FALSE(pipe.cancelled());
}

}  // namespace
}  // namespace cairn
