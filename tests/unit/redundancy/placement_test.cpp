// L2 set placement (redundancy/placement) and the choice of an L1 slot (cache/slot_choice): pure rules.
#include <gtest/gtest.h>

#include "cache/slot_choice.hpp"
#include "redundancy/placement.hpp"

namespace cairn {
namespace {

std::vector<std::string> nodes(std::initializer_list<const char*> names) { return {names.begin(), names.end()}; }

TEST(SetPlacement, RanksOfOneNodeNeverShareASet) {
  // 8 ranks on 4 nodes, two per node (block placement): local index 0 and 1 form one set each.
  auto where = nodes({"a", "a", "b", "b", "c", "c", "d", "d"});
  std::vector<std::string> warnings;
  auto p = redundancy::place_sets(where, Redundancy::xor_set, 4, 2, 3, &warnings);
  EXPECT_TRUE(warnings.empty());
  ASSERT_TRUE(p.enabled);
  EXPECT_EQ(p.members, (std::vector<std::vector<int>>{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(p.set_of_rank, (std::vector<int>{0, 1, 0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(p.my_set, 1);
  EXPECT_EQ(p.my_member, 1);
  EXPECT_EQ(p.m, 1);
}

TEST(SetPlacement, SetsOfSetSizeNodesAndAShortTailJoinsThePrevious) {
  auto where = nodes({"n0", "n1", "n2", "n3", "n4"});
  std::vector<std::string> warnings;
  auto p = redundancy::place_sets(where, Redundancy::xor_set, 2, 1, 0, &warnings);
  ASSERT_TRUE(p.enabled);
  EXPECT_EQ(p.members, (std::vector<std::vector<int>>{{0, 1}, {2, 3, 4}}));
}

TEST(SetPlacement, OffWithOneNodeUnequalNodesOrSingle) {
  std::vector<std::string> warnings;
  auto one = redundancy::place_sets(nodes({"a", "a", "a"}), Redundancy::xor_set, 4, 1, 0, &warnings);
  EXPECT_FALSE(one.enabled);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("at least 2 failure groups"), std::string::npos) << warnings[0];
  warnings.clear();
  auto uneven = redundancy::place_sets(nodes({"a", "a", "b"}), Redundancy::partner, 4, 1, 0, &warnings);
  EXPECT_FALSE(uneven.enabled);
  EXPECT_TRUE(uneven.members.empty());
  EXPECT_EQ(uneven.set_of_rank, (std::vector<int>{-1, -1, -1}));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("unequal ranks per node"), std::string::npos) << warnings[0];
  warnings.clear();
  auto single = redundancy::place_sets(nodes({"a", "b"}), Redundancy::single, 4, 1, 0, &warnings);
  EXPECT_FALSE(single.enabled);
  EXPECT_TRUE(warnings.empty()) << "single asks for no L2: nothing to warn about";
}

TEST(SetPlacement, RsParityIsCappedBelowTheSmallestSet) {
  std::vector<std::string> warnings;
  auto p = redundancy::place_sets(nodes({"a", "b", "c"}), Redundancy::rs, 4, 3, 0, &warnings);
  ASSERT_TRUE(p.enabled);
  EXPECT_EQ(p.m, 2);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("rs_parity 3"), std::string::npos) << warnings[0];
}

TEST(SlotChoice, EmptyOldestAndNeverTheOneToKeep) {
  EXPECT_EQ(choose_slot({0, 0}, 0), 0);
  EXPECT_EQ(choose_slot({5, 0}, 5), 1) << "an empty slot before the one to keep";
  EXPECT_EQ(choose_slot({5, 6}, 6), 0) << "the oldest";
  EXPECT_EQ(choose_slot({5, 6}, 5), 1) << "never the one to keep, even when it is older";
  EXPECT_EQ(choose_slot({3, 4, 5}, 5), 0);
  EXPECT_EQ(choose_slot({7}, 7), 0) << "one slot: no choice";
}

TEST(SlotChoice, AStaleVersionNewerThanAnythingWholeGoesFirst) {
  // Slot 1 holds version 9, which never completed (the newest whole one is 8 in slot 0... or 4 in 2).
  EXPECT_EQ(choose_slot({4, 9, 8}, 8), 1);
  EXPECT_EQ(choose_slot({4, 9, 8}, 0), 0) << "nothing to keep: the oldest";
}

}  // namespace
}  // namespace cairn
