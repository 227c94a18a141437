// Pipeline schedules: the GPipe and 1F1B orders, the simulation's deadlock check, bubble
// fraction against (S - 1) / (M + S - 1), activations in flight, and cost-balanced stage splits.
#include "passes/PipelineSchedule.h"

#include <gtest/gtest.h>

namespace dtc::passes {
namespace {

std::string text(const std::vector<PipelineOp> &ops) {
  std::string s;
  for (const PipelineOp &op : ops)
    s += (s.empty() ? "" : " ") + pipelineOpText(op);
  return s;
}

TEST(PipelineSchedule, GPipeAndOneFOneBOrders) {
  PipelineScheduleTable g = makePipelineSchedule(PipelineSchedule::kGPipe, 2, 3);
  EXPECT_EQ(text(g[0]), "F0 F1 F2 B0 B1 B2");
  EXPECT_EQ(text(g[1]), "F0 F1 F2 B0 B1 B2");
  PipelineScheduleTable f = makePipelineSchedule(PipelineSchedule::k1F1B, 4, 6);
  EXPECT_EQ(text(f[0]), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(text(f[2]), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  EXPECT_EQ(text(f[3]), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  // Fewer micro-batches than stages: the warm-up is cut to M.
  EXPECT_EQ(text(makePipelineSchedule(PipelineSchedule::k1F1B, 4, 2)[0]), "F0 F1 B0 B1");
}

TEST(PipelineSchedule, BubbleMatchesTheFormula) {
  for (PipelineSchedule kind : {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B})
    for (int64_t s : {1, 2, 4})
      for (int64_t m : {1, 4, 8}) {
        auto sim = simulatePipeline(makePipelineSchedule(kind, s, m), m, 1.0, 2.0);
        ASSERT_TRUE(sim) << sim.status().message();
        const double expected = static_cast<double>(s - 1) / static_cast<double>(m + s - 1);
        EXPECT_NEAR(sim->bubbleFraction, expected, 1e-12) << "S=" << s << " M=" << m;
        EXPECT_DOUBLE_EQ(sim->makespan, 3.0 * static_cast<double>(m + s - 1));
      }
}

TEST(PipelineSchedule, InterleavedOrderAndBubble) {
  // S = 2 ranks, V = 2 chunks, M = 4: rank 0 warms up with 2(S-1) + (V-1)S = 4 forwards in
  // rounds of S micro-batches per chunk, rank 1 with 2; backwards run the chunks in reverse.
  const PipelineScheduleTable t = makePipelineSchedule(PipelineSchedule::kInterleaved, 2, 4, 2);
  EXPECT_EQ(text(t[0]), "F0 F1 F0.1 F1.1 F2 B0.1 F3 B1.1 F2.1 B0 F3.1 B1 B2.1 B3.1 B2 B3");
  EXPECT_EQ(text(t[1]), "F0 F1 F0.1 B0.1 F1.1 B1.1 F2 B0 F3 B1 F2.1 B2.1 F3.1 B3.1 B2 B3");
  // Narayanan et al. 2021: bubble (S-1) / (VM + S-1) of the step under equal chunk costs.
  for (int64_t S : {2, 4})
    for (int64_t V : {2, 3, 4})
      for (int64_t M : {S, 2 * S, 4 * S}) {
        auto sim = simulatePipeline(
            makePipelineSchedule(PipelineSchedule::kInterleaved, S, M, V), M, 1.0, 2.0);
        ASSERT_TRUE(sim) << sim.status().message() << " S=" << S << " V=" << V << " M=" << M;
        const double sd = static_cast<double>(S), md = static_cast<double>(M);
        const double formula = (sd - 1) / (static_cast<double>(V) * md + sd - 1);
        auto plain = simulatePipeline(makePipelineSchedule(PipelineSchedule::k1F1B, S, M), M);
        ASSERT_TRUE(plain);
        if (M > S)
          EXPECT_NEAR(sim->bubbleFraction, formula, 1e-9) << "S=" << S << " V=" << V << " M=" << M;
        else // M = S runs every forward first (Megatron-LM): GPipe-like, still below 1F1B's
          EXPECT_LT(sim->bubbleFraction, plain->bubbleFraction);
      }
  // A chunk's pass missing from a rank is named with its chunk.
  PipelineScheduleTable broken = t;
  broken[1].pop_back();
  auto bad = simulatePipeline(broken, 4);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().message(), "pipeline schedule: stage 1: never runs B3");
  broken = t;
  std::swap(broken[0][2], broken[0][4]); // F2 before F0.1 on rank 0: F0.1 arrives later
  auto swapped = simulatePipeline(broken, 4);
  EXPECT_TRUE(swapped) << swapped.status().message();
}

TEST(PipelineSchedule, OneFOneBKeepsFewerActivations) {
  const int64_t S = 4, M = 8;
  auto g = simulatePipeline(makePipelineSchedule(PipelineSchedule::kGPipe, S, M), M);
  auto f = simulatePipeline(makePipelineSchedule(PipelineSchedule::k1F1B, S, M), M);
  ASSERT_TRUE(g && f);
  for (int64_t s = 0; s < S; ++s) {
    EXPECT_EQ(g->peakActivations[static_cast<size_t>(s)], M);
    EXPECT_EQ(f->peakActivations[static_cast<size_t>(s)], S - s);
  }
}

TEST(PipelineSchedule, ZeroBubbleH1DefersWeightGradientsIntoTheBubble) {
  // Qi et al. 2023: with F = B = W the ZB-H1 bubble is (S-1) of the 3M+S-1 time units a stage
  // spends, against 1F1B's (S-1) / (M+S-1): about a third for M >> S. The greedy schedule stays
  // within 15% of it, with at most S + 1 micro-batches in flight.
  for (int64_t S : {2, 4, 8})
    for (int64_t M : {S, 2 * S, 4 * S}) {
      const PipelineScheduleTable zb = makePipelineSchedule(PipelineSchedule::kZBH1, S, M);
      auto z = simulatePipeline(zb, M, 1, 2);
      auto f = simulatePipeline(makePipelineSchedule(PipelineSchedule::k1F1B, S, M), M, 1, 2);
      ASSERT_TRUE(z) << z.status().message();
      ASSERT_TRUE(f);
      const double sd = static_cast<double>(S), md = static_cast<double>(M);
      EXPECT_NEAR(f->bubbleFraction, (sd - 1) / (md + sd - 1), 1e-9);
      EXPECT_LE(z->bubbleFraction, 1.15 * (sd - 1) / (3 * md + sd - 1)) << "S=" << S << " M=" << M;
      for (int64_t s = 0; s < S; ++s) {
        EXPECT_LE(z->peakActivations[static_cast<size_t>(s)], S + 1);
        int64_t weights = 0;
        for (const PipelineOp &op : zb[static_cast<size_t>(s)])
          weights += op.kind == PipelineOp::kWeight;
        EXPECT_EQ(weights, M);
      }
    }
  // 2 stages, 4 micro-batches: the last stage runs each B right after its F and defers W into
  // the waits for the next forward; the first stage fills its cool-down with W.
  const PipelineScheduleTable t = makePipelineSchedule(PipelineSchedule::kZBH1, 2, 4);
  std::string first, last;
  for (const PipelineOp &op : t[0])
    first += pipelineOpText(op) + " ";
  for (const PipelineOp &op : t[1])
    last += pipelineOpText(op) + " ";
  EXPECT_EQ(first, "F0 F1 F2 B0 W0 B1 F3 B2 W1 W2 B3 W3 ");
  EXPECT_EQ(last, "F0 B0 F1 B1 F2 B2 W0 F3 B3 W1 W2 W3 ");
  // A W before its B is malformed.
  PipelineScheduleTable bad = {{{PipelineOp::kForward, 0},
                                {PipelineOp::kWeight, 0},
                                {PipelineOp::kBackward, 0}}};
  auto sim = simulatePipeline(bad, 1);
  ASSERT_FALSE(sim);
  EXPECT_EQ(sim.status().message(), "pipeline schedule: stage 0: runs W0 before B0");
}

TEST(PipelineSchedule, DeadlockAndMalformedSchedulesAreRejected) {
  // Stage 0 waits for B0's gradient before sending F1; stage 1 runs F1 before B0: a cycle.
  PipelineScheduleTable t = {{{PipelineOp::kForward, 0},
                              {PipelineOp::kBackward, 0},
                              {PipelineOp::kForward, 1},
                              {PipelineOp::kBackward, 1}},
                             {{PipelineOp::kForward, 0},
                              {PipelineOp::kForward, 1},
                              {PipelineOp::kBackward, 0},
                              {PipelineOp::kBackward, 1}}};
  auto sim = simulatePipeline(t, 2);
  ASSERT_FALSE(sim);
  EXPECT_EQ(sim.status().message(), "pipeline schedule: deadlocks: stage 0 waits at B0 for B0 of "
                                    "stage 1; stage 1 waits at F1 for F1 of stage 0");
  PipelineScheduleTable twice = {{{PipelineOp::kForward, 0}, {PipelineOp::kForward, 0}}};
  EXPECT_EQ(simulatePipeline(twice, 1).status().message(),
            "pipeline schedule: stage 0: runs F0 twice");
  PipelineScheduleTable early = {{{PipelineOp::kBackward, 0}, {PipelineOp::kForward, 0}}};
  EXPECT_EQ(simulatePipeline(early, 1).status().message(),
            "pipeline schedule: stage 0: runs B0 before F0");
  PipelineScheduleTable missing = {{{PipelineOp::kForward, 0}}};
  EXPECT_EQ(simulatePipeline(missing, 1).status().message(),
            "pipeline schedule: stage 0: never runs B0");
}

TEST(PipelineSchedule, BalancedSplitsUnderAMemoryLimit) {
  // Six equal items; the first two are heavy in memory (say, an embedding). Unconstrained the
  // split is 2/2/2; if a stage may hold at most 11 units, the heavy items go to different
  // stages and the second heavy one shares its stage with one light item at most: 1/2/3.
  const std::vector<double> costs(6, 1.0);
  const std::vector<double> memory = {10, 10, 1, 1, 1, 1};
  auto fits = [&](size_t, size_t begin, size_t end) {
    double m = 0;
    for (size_t i = begin; i < end; ++i)
      m += memory[i];
    return m <= 11;
  };
  auto free = balanceStages(costs, 3);
  ASSERT_TRUE(free);
  EXPECT_EQ(*free, (std::vector<size_t>{0, 2, 4}));
  auto limited = balanceStages(costs, 3, fits);
  ASSERT_TRUE(limited) << limited.status().message();
  EXPECT_EQ(*limited, (std::vector<size_t>{0, 1, 3}));
  // The part index reaches the callback (a limit that depends on the stage), and a limit no
  // split meets is an error.
  auto none = balanceStages(costs, 3, [](size_t, size_t, size_t) { return false; });
  ASSERT_FALSE(none);
  EXPECT_EQ(none.status().message(), "pipeline stages: no split of the 6 items into 3 stages fits");
  auto lastSmall = balanceStages(
      costs, 2, [](size_t part, size_t begin, size_t end) { return part == 0 || end - begin <= 1; });
  ASSERT_TRUE(lastSmall);
  EXPECT_EQ(*lastSmall, (std::vector<size_t>{0, 5}));
}

TEST(PipelineSchedule, BalancedStageSplits) {
  auto split = balanceStages(std::vector<double>(30, 1.0), 4);
  ASSERT_TRUE(split);
  EXPECT_EQ(*split, (std::vector<size_t>{0, 8, 16, 23})); // 8/8/7/7
  // One heavy item gets a stage of its own.
  auto heavy = balanceStages({1, 1, 10, 1, 1}, 3);
  ASSERT_TRUE(heavy);
  EXPECT_EQ(*heavy, (std::vector<size_t>{0, 2, 3}));
  EXPECT_EQ(*balanceStages({5}, 1), (std::vector<size_t>{0}));
  EXPECT_EQ(balanceStages({1, 2}, 3).status().message(),
            "pipeline stages: 2 items cannot fill 3 stages: a stage would have nothing to do");
  EXPECT_FALSE(balanceStages({1, -1}, 1));
}

} // namespace
} // namespace dtc::passes
