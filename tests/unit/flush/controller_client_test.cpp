// The service link's controller client alone, against a fake controller on 127.0.0.1: registration,
// assignment, an offer taken between versions, usage reports only when they change, a refusal, and the
// loss of the connection with its backoff. What it tells the link is recorded (ControllerClient::Listener).
#include <gtest/gtest.h>

#include <vector>

#include "flush/controller_client.hpp"

namespace cairn::flush {
namespace {

struct Recorder : ControllerClient::Listener {
  std::vector<std::string> events;
  void controller_refused(const std::string& why) override { events.push_back("refused: " + why); }
  void agent_assigned(bool changed, bool replaced) override {
    events.push_back(std::string("assigned") + (changed ? " changed" : "") + (replaced ? " replaced" : ""));
  }
  void controller_gone() override { events.push_back("gone"); }
};

// One end of the fake controller's connection.
struct FakeController {
  fs::Fd listener;
  wire::HostPort at;
  std::unique_ptr<wire::Connection> conn;

  FakeController() {
    auto l = wire::listen_tcp(*wire::parse_host_port("127.0.0.1:0"), &at);
    EXPECT_TRUE(l.is_ok()) << l.status().message();
    if (l) listener = std::move(*l);
  }
  void accept() {
    std::string peer;
    double deadline = wire::monotonic_seconds() + 5;
    while (!conn && wire::monotonic_seconds() < deadline) {
      auto fd = wire::accept_tcp(listener.get(), &peer);
      if (fd)
        conn = std::make_unique<wire::Connection>(std::move(*fd), peer);
      else
        usleep(1000);
    }
    ASSERT_TRUE(conn) << "no connection from the client";
  }
  template <class M>
  void say(const M& m) {
    conn->send_message(m);
    ASSERT_TRUE(conn->flush_all(2).is_ok());
  }
  // The next frame from the client, of type M.
  template <class M>
  M hear() {
    auto f = wire::read_frame(*conn, 2);
    EXPECT_TRUE(f.is_ok()) << f.status().message();
    if (!f) return M{};
    auto m = wire::expect<M>(*f);
    EXPECT_TRUE(m.is_ok()) << m.status().message();
    return m ? *m : M{};
  }
  // Nothing more from the client within a tenth of a second.
  bool quiet() { return !wire::read_frame(*conn, 0.1).is_ok(); }
};

ServiceSettings settings_for(const wire::HostPort& controller) {
  ServiceSettings s;
  s.controller = controller;
  s.app_name = "controller_client_test";
  s.job = "t";
  s.prefix = "/tmp/controller_client_test";
  s.key = *wire::random_key();
  s.rank = 0;
  s.nranks = 1;
  return s;
}

// The client's side of the link's loop: flush what it queued, and hand it the controller's next frame.
void pump(ControllerClient& c) {
  ASSERT_TRUE(c.connection());
  ASSERT_TRUE(c.connection()->flush_all(2).is_ok());
  auto f = wire::read_frame(*c.connection(), 2);
  if (!f) return c.lost(f.status().message());
  c.on_frame(*f);
}

wire::Assigned assignment(uint64_t agent) {
  wire::Assigned a;
  a.app_id = 7;
  a.agent_id = agent;
  a.agent_address = "127.0.0.1:" + std::to_string(40000 + agent);
  a.manager = "m0";
  return a;
}

TEST(ControllerClient, RegistersIsAssignedAndTakesAnOfferBetweenVersions) {
  FakeController fake;
  ServiceSettings s = settings_for(fake.at);
  Recorder link;
  ControllerClient c(s, link);
  ASSERT_TRUE(c.due(wire::monotonic_seconds()));
  ASSERT_TRUE(c.dial());
  EXPECT_FALSE(c.due(wire::monotonic_seconds()));
  c.register_rank("tcp");
  ASSERT_TRUE(c.connection()->flush_all(2).is_ok());
  fake.accept();
  auto r = fake.hear<wire::RegisterRank>();
  EXPECT_EQ(r.app_name, "controller_client_test");
  EXPECT_EQ(r.provider, "tcp");
  EXPECT_EQ(r.key, s.key);
  EXPECT_FALSE(c.has_assignment());

  fake.say(assignment(3));
  pump(c);
  ASSERT_EQ(link.events, std::vector<std::string>{"assigned changed"});
  ASSERT_TRUE(c.has_assignment());
  EXPECT_EQ(c.assigned().agent_id, 3u);
  EXPECT_EQ(c.app_id(), 7u);

  // Another agent while one is assigned: an offer, not an assignment; the link is not told.
  fake.say(assignment(4));
  pump(c);
  EXPECT_EQ(link.events.size(), 1u);
  EXPECT_EQ(c.assigned().agent_id, 3u);
  ASSERT_TRUE(c.has_offer());
  const double now = wire::monotonic_seconds();
  EXPECT_FALSE(c.offer_due(false, false, now));  // nothing waits, nobody asked
  EXPECT_TRUE(c.offer_due(true, false, now));    // a version waits to go out
  EXPECT_FALSE(c.offer_due(true, true, now));    // never under a version in flight
  // Held a while with nothing handed over (a rank done checkpointing): taken then, never under a version.
  const double later = now + ControllerClient::kIdleTakeSeconds + 0.1;
  EXPECT_TRUE(c.offer_due(false, false, later));
  EXPECT_FALSE(c.offer_due(false, true, later));
  c.probe();
  EXPECT_TRUE(c.offer_due(false, false, now));
  EXPECT_FALSE(c.offer_due(false, true, now));

  c.take_offer();
  EXPECT_EQ(c.assigned().agent_id, 4u);
  EXPECT_FALSE(c.has_offer());
  EXPECT_FALSE(c.offer_due(true, false, later));
  ASSERT_TRUE(c.connection()->flush_all(2).is_ok());
  auto taken = fake.hear<wire::Reassign>();
  EXPECT_EQ(taken.app_id, 7u);
  EXPECT_EQ(taken.lost_agent, 0u);  // no agent lost: the controller records the move

  // The controller's answer names the agent taken: the same one, so nothing changed.
  fake.say(assignment(4));
  pump(c);
  EXPECT_EQ(link.events.back(), "assigned");

  // A replacement after a loss is a change a probe reports.
  c.replace_agent();
  ASSERT_TRUE(c.connection()->flush_all(2).is_ok());
  EXPECT_EQ(fake.hear<wire::Reassign>().lost_agent, 4u);
  EXPECT_FALSE(c.has_assignment());
  fake.say(assignment(5));
  pump(c);
  EXPECT_EQ(link.events.back(), "assigned changed replaced");
}

TEST(ControllerClient, ReportsUsageOnlyWhenItChanges) {
  FakeController fake;
  ServiceSettings s = settings_for(fake.at);
  Recorder link;
  ControllerClient c(s, link);
  ASSERT_TRUE(c.dial());
  c.register_rank("tcp");
  c.report_usage(1000, 0);  // not registered yet: not said
  ASSERT_TRUE(c.connection()->flush_all(2).is_ok());
  fake.accept();
  fake.hear<wire::RegisterRank>();
  EXPECT_TRUE(fake.quiet());
  fake.say(assignment(3));
  pump(c);

  c.report_usage(1000, 0);    // the size, first
  c.report_usage(1000, 0);    // the same
  c.report_usage(1000, 2.0);  // the first interval
  c.report_usage(1000, 2.4);  // within a quarter
  c.report_usage(1000, 1.5);  // below four fifths
  c.report_usage(2000, 1.5);  // a new size
  ASSERT_TRUE(c.connection()->flush_all(2).is_ok());
  std::vector<std::pair<uint64_t, double>> said;
  for (int i = 0; i < 4; ++i) {
    auto u = fake.hear<wire::RankUsage>();
    said.emplace_back(u.bytes, u.interval_s);
  }
  std::vector<std::pair<uint64_t, double>> want{{1000, 0}, {1000, 2.0}, {1000, 1.5}, {2000, 1.5}};
  EXPECT_EQ(said, want);
  EXPECT_TRUE(fake.quiet());
}

TEST(ControllerClient, ARefusalAndALostConnectionAreToldAndRetriedAfterABackoff) {
  FakeController fake;
  ServiceSettings s = settings_for(fake.at);
  Recorder link;
  ControllerClient c(s, link);
  ASSERT_TRUE(c.dial());
  c.register_rank("tcp");
  ASSERT_TRUE(c.connection()->flush_all(2).is_ok());
  fake.accept();
  fake.hear<wire::RegisterRank>();

  fake.say(wire::ErrorMsg{int32_t(Code::ERR_NOT_SUPPORTED), "no checkpoint node has room"});
  pump(c);
  ASSERT_EQ(link.events, std::vector<std::string>{"refused: no checkpoint node has room"});
  EXPECT_FALSE(c.has_assignment());
  EXPECT_TRUE(c.connection());  // an assignment may still come on this connection

  fake.conn.reset();
  pump(c);
  EXPECT_EQ(link.events.back(), "gone");
  EXPECT_FALSE(c.connection());
  double now = wire::monotonic_seconds();
  EXPECT_FALSE(c.due(now));       // the backoff (half a second after a registration never answered)
  EXPECT_TRUE(c.due(now + 0.6));
  c.replace_agent();  // nothing to ask without a connection
  c.unregister();
}

}  // namespace
}  // namespace cairn::flush
