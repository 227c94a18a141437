// Memory planner: offsets respect alignment, blocks live at the same time never overlap, dead
// blocks are reused, and the result is deterministic.
#include "compiler/plan/MemoryPlanner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <queue>
#include <random>
#include <set>

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

/// The planner before the interval tree: the same greedy-by-size order, with the conflicts of
/// each request found by a pairwise scan of all placed requests, O(n^2). The reference the
/// tree-based planner must match offset for offset.
MemoryPlan referencePlan(const std::vector<MemoryRequest> &requests, uint64_t alignment) {
  auto alignUp = [&](uint64_t v) { return (v + alignment - 1) & ~(alignment - 1); };
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (requests[a].size != requests[b].size)
      return requests[a].size > requests[b].size;
    return requests[a].first < requests[b].first;
  });
  struct Placed {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Placed> placed; // sorted by begin
  std::vector<Placed> conflicts;
  for (size_t idx : order) {
    const MemoryRequest &r = requests[idx];
    uint64_t size = alignUp(r.size);
    plan.noReuseBytes += size;
    if (size == 0)
      continue;
    conflicts.clear();
    for (const Placed &p : placed)
      if (liveRangesOverlap(requests[p.index], r))
        conflicts.push_back(p);
    uint64_t offset = 0;
    for (const Placed &p : conflicts) {
      if (offset + size <= p.begin)
        break;
      offset = std::max(offset, p.end);
    }
    plan.offsets[idx] = offset;
    Placed np{offset, offset + size, idx};
    placed.insert(
        std::upper_bound(placed.begin(), placed.end(), np,
                         [](const Placed &a, const Placed &b) { return a.begin < b.begin; }),
        np);
    plan.arenaBytes = std::max(plan.arenaBytes, offset + size);
  }
  return plan;
}

/// The no-overlap invariant in O(n log n), for problems too large for the pairwise check: a
/// sweep over time keeps the live blocks ordered by offset, and a block starting to live must
/// not meet its neighbours there (two blocks live at the same time are both live when the later
/// of the two starts). Returns the number of violations.
size_t countConflictsBySweep(const std::vector<MemoryRequest> &rs, const MemoryPlan &p) {
  std::vector<size_t> byFirst;
  for (size_t i = 0; i < rs.size(); ++i)
    if (rs[i].size)
      byFirst.push_back(i);
  std::sort(byFirst.begin(), byFirst.end(),
            [&](size_t a, size_t b) { return rs[a].first < rs[b].first; });
  using Ending = std::pair<int64_t, size_t>; // (last, request)
  std::priority_queue<Ending, std::vector<Ending>, std::greater<>> ending;
  std::set<std::pair<uint64_t, size_t>> live; // (offset, request)
  size_t violations = 0;
  for (size_t i : byFirst) {
    while (!ending.empty() && ending.top().first < rs[i].first) {
      live.erase({p.offsets[ending.top().second], ending.top().second});
      ending.pop();
    }
    auto [it, inserted] = live.insert({p.offsets[i], i});
    if (!inserted)
      ++violations; // cannot happen: indices differ
    if (std::next(it) != live.end() && p.offsets[i] + rs[i].size > std::next(it)->first)
      ++violations;
    if (it != live.begin()) {
      size_t below = std::prev(it)->second;
      if (p.offsets[below] + rs[below].size > p.offsets[i])
        ++violations;
    }
    ending.push({rs[i].last, i});
  }
  return violations;
}

/// A training-shaped problem of `n` requests over `n` instructions, forward first, then
/// backward: one in eight alive for the whole step (weights, optimizer state), one in sixteen
/// from its definition in backward to the end (gradients), three in eight saved in forward for
/// their mirror point in backward (nested ranges), the rest temporaries read within a few
/// instructions. Sizes from a palette of `shapes` per-layer tensor sizes spread over six orders
/// of magnitude (0: any size, which fragments the arena far more than real graphs do).
std::vector<MemoryRequest> trainingLikeProblem(size_t n, uint64_t seed, size_t shapes) {
  std::mt19937_64 rng(seed);
  auto anySize = [&]() -> uint64_t {
    return (rng() % 4 == 0) ? 4096u << (rng() % 8) : 1 + rng() % (1u << (rng() % 21));
  };
  std::vector<uint64_t> palette;
  for (size_t k = 0; k < shapes; ++k)
    palette.push_back(anySize());
  const int64_t steps = static_cast<int64_t>(n);
  auto at = [&](int64_t lo, int64_t hi) { // uniform in [lo, hi)
    return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(hi - lo, 1)));
  };
  std::vector<MemoryRequest> rs;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t size = palette.empty() ? anySize() : palette[rng() % palette.size()];
    int64_t first, last;
    const uint64_t kind = rng() % 16;
    if (kind < 2) {
      first = -1;
      last = kForever;
    } else if (kind < 3) {
      first = at(steps / 2, steps);
      last = kForever;
    } else if (kind < 9) {
      first = at(0, steps / 2);
      last = std::min(steps - 1 - first + at(0, 8), steps - 1);
    } else {
      first = at(0, steps);
      last = first + at(0, 4);
    }
    rs.push_back({size, first, last});
  }
  return rs;
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

TEST(MemoryPlanner, MatchesThePairwiseReferenceOnRandomProblems) {
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<MemoryRequest> rs;
    const int n = static_cast<int>(rng() % 200);
    const int64_t span = 1 + static_cast<int64_t>(rng() % 100);
    const uint64_t maxSize = 1 + rng() % 20000;
    for (int i = 0; i < n; ++i) {
      int64_t first = static_cast<int64_t>(rng() % static_cast<uint64_t>(span + 1)) - 1;
      int64_t last =
          rng() % 8 == 0 ? kForever : first + static_cast<int64_t>(rng() % (1 + rng() % 30));
      // Sizes from a small set make ties (and touching blocks) common.
      uint64_t size = rng() % 3 == 0 ? 64 * (rng() % 5) : rng() % maxSize;
      rs.push_back({size, first, last});
    }
    const uint64_t align = uint64_t{1} << (rng() % 8);
    MemoryPlan p = planMemory(rs, align);
    MemoryPlan ref = referencePlan(rs, align);
    ASSERT_EQ(p.offsets, ref.offsets) << "trial " << trial;
    EXPECT_EQ(p.arenaBytes, ref.arenaBytes) << "trial " << trial;
    EXPECT_EQ(p.noReuseBytes, ref.noReuseBytes) << "trial " << trial;
    expectNoConflicts(rs, p, align);
  }
}

TEST(MemoryPlanner, MatchesThePairwiseReferenceOnTrainingShapedProblems) {
  // Any sizes (interleaved holes: many requests end with the planner's fallback walk) and a
  // palette of 16 sizes (the segment tree answers nearly every request).
  for (size_t shapes : {0, 16}) {
    std::vector<MemoryRequest> rs = trainingLikeProblem(3000, 7, shapes);
    MemoryPlan p = planMemory(rs, 64);
    MemoryPlan ref = referencePlan(rs, 64);
    EXPECT_EQ(p.offsets, ref.offsets) << shapes;
    EXPECT_EQ(p.arenaBytes, ref.arenaBytes) << shapes;
    EXPECT_LT(p.arenaBytes, p.noReuseBytes) << shapes; // reuse happened: not vacuous
    EXPECT_EQ(countConflictsBySweep(rs, p), 0u) << shapes;
  }
}

TEST(MemoryPlanner, SweepCheckCatchesAnOverlap) {
  // The large test below relies on the sweep: it must see a conflict that exists.
  std::vector<MemoryRequest> rs = {{128, 0, 5}, {64, 3, 9}, {64, 6, 7}};
  MemoryPlan bad;
  bad.offsets = {0, 64, 0};
  bad.arenaBytes = 192;
  EXPECT_EQ(countConflictsBySweep(rs, bad), 1u);
  bad.offsets = {0, 128, 0};
  EXPECT_EQ(countConflictsBySweep(rs, bad), 0u);
  bad.offsets = {0, 128, 128};
  EXPECT_EQ(countConflictsBySweep(rs, bad), 1u);
}

TEST(MemoryPlanner, FiftyThousandRequestsStayValid) {
  std::vector<MemoryRequest> rs = trainingLikeProblem(50000, 2024, 16);
  MemoryPlan p = planMemory(rs, 64);
  ASSERT_EQ(p.offsets.size(), rs.size());
  uint64_t highest = 0, forever = 0;
  for (size_t i = 0; i < rs.size(); ++i) {
    ASSERT_EQ(p.offsets[i] % 64, 0u) << i;
    highest = std::max(highest, p.offsets[i] + (rs[i].size + 63) / 64 * 64);
    if (rs[i].first == -1 && rs[i].last == kForever)
      forever += (rs[i].size + 63) / 64 * 64;
  }
  EXPECT_EQ(p.arenaBytes, highest);
  EXPECT_GE(p.arenaBytes, forever); // the always-live blocks alone need this much
  EXPECT_LT(p.arenaBytes, p.noReuseBytes);
  EXPECT_EQ(countConflictsBySweep(rs, p), 0u);
}

} // namespace
} // namespace dtc::plan
