// Memory planner: offsets respect alignment, blocks live at the same time never overlap, dead
// blocks are reused, and the result is deterministic.
#include "compiler/plan/MemoryPlanner.h"

#include <gtest/gtest.h>

#include <random>

namespace dtc::plan {
namespace {

constexpr int64_t kForever = MemoryRequest::kForever;

/// Every pair of requests whose live ranges intersect occupies disjoint bytes.
void expectNoConflicts(const std::vector<MemoryRequest> &rs, const MemoryPlan &p, uint64_t align) {
  ASSERT_EQ(p.offsets.size(), rs.size());
  for (size_t i = 0; i < rs.size(); ++i) {
    EXPECT_EQ(p.offsets[i] % align, 0u) << i;
    EXPECT_LE(p.offsets[i] + rs[i].size, p.arenaBytes) << i;
    for (size_t j = i + 1; j < rs.size(); ++j) {
      if (!rs[i].size || !rs[j].size || !liveRangesOverlap(rs[i], rs[j]))
        continue;
      bool disjoint =
          p.offsets[i] + rs[i].size <= p.offsets[j] || p.offsets[j] + rs[j].size <= p.offsets[i];
      EXPECT_TRUE(disjoint) << "requests " << i << " and " << j;
    }
  }
}

TEST(MemoryPlanner, ChainReusesDeadBuffers) {
  // a -> b -> c -> d: each value is read only by the next instruction, so two slots suffice.
  std::vector<MemoryRequest> rs = {{1000, -1, 0}, {1000, 0, 1}, {1000, 1, 2}, {1000, 2, kForever}};
  MemoryPlan p = planMemory(rs, 64);
  expectNoConflicts(rs, p, 64);
  EXPECT_EQ(p.noReuseBytes, 4u * 1024);
  EXPECT_EQ(p.arenaBytes, 2u * 1024);
  EXPECT_EQ(p.offsets[0], p.offsets[2]);
  EXPECT_EQ(p.offsets[1], p.offsets[3]);
}

TEST(MemoryPlanner, WeightsNeverShareWithActivations) {
  std::vector<MemoryRequest> rs = {{4096, -1, kForever}, {64, 0, 0}, {64, 1, 1}};
  MemoryPlan p = planMemory(rs, 64);
  expectNoConflicts(rs, p, 64);
  EXPECT_EQ(p.offsets[0], 0u); // largest first
  EXPECT_EQ(p.offsets[1], 4096u);
  EXPECT_EQ(p.offsets[2], 4096u); // 1 and 2 do not live at the same time
  EXPECT_EQ(p.arenaBytes, 4096u + 64);
}

TEST(MemoryPlanner, AlignmentRoundsSizesUp) {
  std::vector<MemoryRequest> rs = {{1, 0, 5}, {1, 0, 5}, {100, 0, 5}};
  MemoryPlan p = planMemory(rs, 64);
  expectNoConflicts(rs, p, 64);
  EXPECT_EQ(p.arenaBytes, 128u + 64 + 64);
  EXPECT_EQ(p.noReuseBytes, 256u);
}

TEST(MemoryPlanner, ZeroSizeRequestsTakeNoSpace) {
  std::vector<MemoryRequest> rs = {{0, 0, 3}, {64, 0, 3}};
  MemoryPlan p = planMemory(rs, 64);
  EXPECT_EQ(p.arenaBytes, 64u);
  EXPECT_EQ(p.offsets[0], 0u);
}

TEST(MemoryPlanner, FillsAGapBetweenLiveBlocks) {
  // Two long-lived 256-byte blocks with a hole of 128 bytes between them (made by a short-lived
  // block placed first); a later small block fits the hole.
  std::vector<MemoryRequest> rs = {
      {512, 0, 1}, // big, dies early
      {256, 2, 9}, // placed at 0
      {128, 0, 9}, // overlaps the big one in time -> above it
      {128, 3, 4}, // fits at 256 (the big one is dead by then)
  };
  MemoryPlan p = planMemory(rs, 64);
  expectNoConflicts(rs, p, 64);
  EXPECT_EQ(p.offsets[0], 0u);
  EXPECT_EQ(p.offsets[1], 0u);
  EXPECT_EQ(p.offsets[2], 512u);
  EXPECT_EQ(p.offsets[3], 256u);
  EXPECT_EQ(p.arenaBytes, 640u);
}

TEST(MemoryPlanner, RandomProblemsHaveNoConflictsAndAreDeterministic) {
  std::mt19937_64 rng(1234);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<MemoryRequest> rs;
    int n = 1 + static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i) {
      int64_t first = static_cast<int64_t>(rng() % 40) - 1;
      int64_t last = rng() % 10 == 0 ? kForever : first + static_cast<int64_t>(rng() % 15);
      rs.push_back({rng() % 5000, first, last});
    }
    MemoryPlan p = planMemory(rs, 64);
    expectNoConflicts(rs, p, 64);
    EXPECT_LE(p.arenaBytes, p.noReuseBytes);
    MemoryPlan again = planMemory(rs, 64);
    EXPECT_EQ(p.offsets, again.offsets);
  }
}

} // namespace
} // namespace dtc::plan
