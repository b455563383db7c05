// The service link's table of jobs (flush/link_job.hpp): ids, the interval between the versions handed
// over, the tickets' outcomes, and which jobs end when the link gives up on some of them.
#include <gtest/gtest.h>

#include "flush/link_job.hpp"

namespace cairn::flush {
namespace {

LinkJob job_made_at(double seconds) {
  LinkJob j;
  j.manifest.created_unix_ns = static_cast<uint64_t>(seconds * 1e9);
  return j;
}

TEST(JobTable, IdsCountUpAndTheIntervalIsWhenTheVersionsWereMade) {
  JobTable t;
  EXPECT_EQ(t.add(job_made_at(1000.0)), 1u);
  EXPECT_EQ(t.interval_s(), 0.0);  // one version says nothing about the interval
  EXPECT_EQ(t.add(job_made_at(1012.5)), 2u);
  EXPECT_NEAR(t.interval_s(), 12.5, 1e-6);
  // A version without a time leaves it as it is; so does one made "before" the last (the wall clock
  // stepped back), which the next interval then counts from, on the clock as it is now.
  EXPECT_EQ(t.add(LinkJob{}), 3u);
  EXPECT_EQ(t.add(job_made_at(1005.0)), 4u);
  EXPECT_NEAR(t.interval_s(), 12.5, 1e-6);
  EXPECT_EQ(t.add(job_made_at(1020.0)), 5u);
  EXPECT_NEAR(t.interval_s(), 15.0, 1e-6);
  ASSERT_NE(t.find(4), nullptr);
  EXPECT_EQ(t.find(4)->id, 4u);
  EXPECT_EQ(t.find(99), nullptr);
}

TEST(JobTable, ATicketFinishesOnceItsJobEnded) {
  JobTable t;
  SlotRegistry slots;
  const uint64_t id = t.add(LinkJob{});
  bool done = true;
  EXPECT_TRUE(t.finish(id, &done).is_ok());
  EXPECT_FALSE(done);  // pending: the ticket stays
  EXPECT_FALSE(t.ended(id));
  end_job(*t.find(id), FlushState::failed, make_error(Code::ERR_IO, "agent said no"), slots);
  EXPECT_TRUE(t.ended(id));
  Status st = t.finish(id, &done);
  EXPECT_TRUE(done);
  EXPECT_EQ(st.code(), Code::ERR_IO);
  EXPECT_EQ(st.message(), "agent said no");
  // Finished: the ticket is unknown now.
  EXPECT_TRUE(t.ended(id));
  EXPECT_EQ(t.finish(id, &done).code(), Code::ERR_INVALID_ARG);
  EXPECT_TRUE(done);
}

TEST(JobTable, ACancelledTicketSaysWhetherItStoppedTheJob) {
  JobTable t;
  SlotRegistry slots;
  const uint64_t pending = t.add(LinkJob{}), finished = t.add(LinkJob{});
  end_job(*t.find(finished), FlushState::done, Status::ok(), slots);
  EXPECT_EQ(t.cancelled(pending).code(), Code::ERR_CANCELLED);
  EXPECT_TRUE(t.cancelled(finished).is_ok());  // it had ended done anyway
  EXPECT_EQ(t.find(pending), nullptr);
  EXPECT_EQ(t.find(finished), nullptr);
  EXPECT_EQ(t.cancelled(pending).code(), Code::ERR_INVALID_ARG);
}

TEST(JobTable, GivingUpEndsThePendingJobsOrOnlyThoseNoAgentHas) {
  JobTable t;
  SlotRegistry slots;
  const uint64_t unsent = t.add(LinkJob{}), sent = t.add(LinkJob{}), over = t.add(LinkJob{});
  t.find(sent)->sent = true;
  end_job(*t.find(over), FlushState::done, Status::ok(), slots);
  bool has_unsent = false, in_flight = false;
  t.pending(&has_unsent, &in_flight);
  EXPECT_TRUE(has_unsent);
  EXPECT_TRUE(in_flight);

  t.end_pending(FlushState::failed, make_error(Code::ERR_NOT_SUPPORTED, "refused"), slots, /*unsent_only=*/true);
  EXPECT_EQ(t.find(unsent)->state, FlushState::failed);
  EXPECT_EQ(t.find(unsent)->outcome.code(), Code::ERR_NOT_SUPPORTED);
  EXPECT_EQ(t.find(sent)->state, FlushState::pending);
  EXPECT_EQ(t.find(over)->state, FlushState::done);
  t.pending(&has_unsent, &in_flight);
  EXPECT_FALSE(has_unsent);
  EXPECT_TRUE(in_flight);

  t.end_pending(FlushState::failed, make_error(Code::ERR_IO, "gone"), slots);
  EXPECT_EQ(t.find(sent)->state, FlushState::failed);
  EXPECT_EQ(t.find(sent)->outcome.code(), Code::ERR_IO);
  EXPECT_TRUE(t.find(over)->outcome.is_ok());  // an ended job keeps its outcome
}

TEST(JobTable, TheFabricHasWorkWhileAJobIsPendingOrItsSlotIsBeingWritten) {
  JobTable t;
  SlotRegistry slots;
  EXPECT_FALSE(t.moving());
  const uint64_t id = t.add(LinkJob{});
  EXPECT_TRUE(t.moving());
  t.find(id)->writes_in_flight = 2;
  end_job(*t.find(id), FlushState::cancelled, make_error(Code::ERR_CANCELLED, "cancelled"), slots);
  EXPECT_TRUE(t.moving());  // its pushes still write out of the slot
  t.find(id)->writes_in_flight = 0;
  EXPECT_FALSE(t.moving());
  // A job being cancelled is neither waiting to go out nor in flight for an offered agent's sake.
  const uint64_t c = t.add(LinkJob{});
  t.find(c)->cancel_requested = true;
  bool has_unsent = true, in_flight = true;
  t.pending(&has_unsent, &in_flight);
  EXPECT_FALSE(has_unsent);
  EXPECT_FALSE(in_flight);
}

}  // namespace
}  // namespace cairn::flush
