// Pipeline schedules (GPipe, 1F1B, ZB-H1, interleaved 1F1B), their simulation (deadlock check,
// bubble, activations in flight) and cost-balanced contiguous stage splits.
#include "passes/PipelineSchedule.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dtc::passes {

std::string pipelineOpText(const PipelineOp &op) {
  return (op.kind == PipelineOp::kForward    ? "F"
          : op.kind == PipelineOp::kBackward ? "B"
                                             : "W") +
         std::to_string(op.microbatch) + (op.chunk ? "." + std::to_string(op.chunk) : "");
}

namespace {

/// ZB-H1 by greedy list scheduling in unit time steps (see PipelineSchedule.h).
PipelineScheduleTable zeroBubbleH1(int64_t S, int64_t M) {
  const size_t stages = static_cast<size_t>(S);
  constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
  std::vector<std::vector<int64_t>> doneF(stages,
                                          std::vector<int64_t>(static_cast<size_t>(M), kNever));
  std::vector<std::vector<int64_t>> doneB = doneF;
  std::vector<int64_t> nextF(stages, 0), nextB(stages, 0), nextW(stages, 0);
  PipelineScheduleTable table(stages);
  int64_t remaining = 3 * S * M;
  for (int64_t t = 0; remaining > 0; ++t) {
    for (size_t s = 0; s < stages; ++s) {
      const int64_t f = nextF[s], b = nextB[s], w = nextW[s];
      const bool last = s + 1 == stages;
      const bool canB = b < f && (last ? doneF[s][static_cast<size_t>(b)] <= t
                                       : doneB[s + 1][static_cast<size_t>(b)] <= t);
      const bool canF =
          f < M && (s == 0 || doneF[s - 1][static_cast<size_t>(f)] <= t) && f - w < S + 1;
      if (canB) {
        doneB[s][static_cast<size_t>(b)] = t + 1;
        table[s].push_back({PipelineOp::kBackward, b});
        ++nextB[s];
      } else if (canF) {
        doneF[s][static_cast<size_t>(f)] = t + 1;
        table[s].push_back({PipelineOp::kForward, f});
        ++nextF[s];
      } else if (w < b) {
        table[s].push_back({PipelineOp::kWeight, w});
        ++nextW[s];
      } else {
        continue; // idle in this time step
      }
      --remaining;
    }
  }
  return table;
}

/// Interleaved 1F1B in Megatron-LM's order (see PipelineSchedule.h).
PipelineScheduleTable interleaved(int64_t S, int64_t M, int64_t V) {
  PipelineScheduleTable table(static_cast<size_t>(S));
  const int64_t total = M * V;
  // The k-th forward (or backward) of a rank: rounds of S micro-batches per chunk.
  auto opOf = [&](PipelineOp::Kind kind, int64_t k) {
    const int64_t inRound = k % (S * V);
    int64_t chunk = inRound / S;
    if (kind == PipelineOp::kBackward)
      chunk = V - 1 - chunk;
    return PipelineOp{kind, (k / (S * V)) * S + inRound % S, chunk};
  };
  for (int64_t s = 0; s < S; ++s) {
    std::vector<PipelineOp> &ops = table[static_cast<size_t>(s)];
    const int64_t warmup = M == S ? total : std::min((S - s - 1) * 2 + (V - 1) * S, total);
    int64_t f = 0, b = 0;
    for (; f < warmup; ++f)
      ops.push_back(opOf(PipelineOp::kForward, f));
    while (f < total) {
      ops.push_back(opOf(PipelineOp::kForward, f++));
      ops.push_back(opOf(PipelineOp::kBackward, b++));
    }
    while (b < total)
      ops.push_back(opOf(PipelineOp::kBackward, b++));
  }
  return table;
}

} // namespace

PipelineScheduleTable makePipelineSchedule(PipelineSchedule kind, int64_t stages,
                                           int64_t microbatches, int64_t virtualStages) {
  if (kind == PipelineSchedule::kZBH1)
    return zeroBubbleH1(stages, microbatches);
  if (kind == PipelineSchedule::kInterleaved)
    return interleaved(stages, microbatches, virtualStages);
  PipelineScheduleTable table(static_cast<size_t>(stages));
  for (int64_t s = 0; s < stages; ++s) {
    std::vector<PipelineOp> &ops = table[static_cast<size_t>(s)];
    if (kind == PipelineSchedule::kGPipe) {
      for (int64_t m = 0; m < microbatches; ++m)
        ops.push_back({PipelineOp::kForward, m});
      for (int64_t m = 0; m < microbatches; ++m)
        ops.push_back({PipelineOp::kBackward, m});
      continue;
    }
    const int64_t warmup = std::min(stages - s - 1, microbatches);
    int64_t f = 0, b = 0;
    for (; f < warmup; ++f)
      ops.push_back({PipelineOp::kForward, f});
    while (f < microbatches) {
      ops.push_back({PipelineOp::kForward, f++});
      ops.push_back({PipelineOp::kBackward, b++});
    }
    while (b < microbatches)
      ops.push_back({PipelineOp::kBackward, b++});
  }
  return table;
}

Expected<PipelineSimulation> simulatePipeline(const PipelineScheduleTable &schedule,
                                              int64_t microbatches, double forwardCost,
                                              double backwardCost) {
  const int64_t stages = static_cast<int64_t>(schedule.size());
  if (stages < 1 || microbatches < 1)
    return Status::error("pipeline schedule", "needs at least one stage and one micro-batch");
  if (!(forwardCost > 0) || !(backwardCost > 0))
    return Status::error("pipeline schedule", "pass costs must be positive");
  int64_t V = 1;
  for (const auto &ops : schedule)
    for (const PipelineOp &op : ops) {
      if (op.chunk < 0 || op.chunk >= 4096)
        return Status::error("pipeline schedule", pipelineOpText(op) + " names chunk " +
                                                      std::to_string(op.chunk));
      V = std::max(V, op.chunk + 1);
    }
  const size_t M = static_cast<size_t>(microbatches);
  // Per (chunk, micro-batch): index chunk * M + m.
  const size_t perRank = static_cast<size_t>(V) * M;
  auto slotText = [&](PipelineOp::Kind kind, int64_t m, int64_t chunk) {
    return pipelineOpText({kind, m, chunk});
  };
  // Each rank lists every pass of every micro-batch of every chunk once, its backward after its
  // forward.
  for (int64_t s = 0; s < stages; ++s) {
    const std::string where = "pipeline schedule: stage " + std::to_string(s);
    std::vector<int> seenF(perRank, 0), seenB(perRank, 0), seenW(perRank, 0);
    bool split = false;
    for (const PipelineOp &op : schedule[static_cast<size_t>(s)]) {
      if (op.microbatch < 0 || op.microbatch >= microbatches)
        return Status::error(where, pipelineOpText(op) + " names no micro-batch of " +
                                        std::to_string(microbatches));
      const size_t k = static_cast<size_t>(op.chunk) * M + static_cast<size_t>(op.microbatch);
      split = split || op.kind == PipelineOp::kWeight;
      std::vector<int> &seen = op.kind == PipelineOp::kForward    ? seenF
                               : op.kind == PipelineOp::kBackward ? seenB
                                                                  : seenW;
      if (seen[k]++)
        return Status::error(where, "runs " + pipelineOpText(op) + " twice");
      if (op.kind == PipelineOp::kBackward && !seenF[k])
        return Status::error(where,
                             "runs " + pipelineOpText(op) + " before " +
                                 slotText(PipelineOp::kForward, op.microbatch, op.chunk));
      if (op.kind == PipelineOp::kWeight && !seenB[k])
        return Status::error(where,
                             "runs " + pipelineOpText(op) + " before " +
                                 slotText(PipelineOp::kBackward, op.microbatch, op.chunk));
    }
    for (size_t k = 0; k < perRank; ++k)
      if (!seenF[k] || !seenB[k] || (split && !seenW[k])) {
        const auto kind = !seenF[k]   ? PipelineOp::kForward
                          : !seenB[k] ? PipelineOp::kBackward
                                      : PipelineOp::kWeight;
        return Status::error(where,
                             "never runs " + slotText(kind, static_cast<int64_t>(k % M),
                                                      static_cast<int64_t>(k / M)));
      }
  }
  // Event simulation over the S * V virtual stages (v = chunk * S + rank): done[v][m] once
  // finished; a rank's next slot starts when the rank is free and its inputs have arrived.
  const int64_t virtualStages = stages * V;
  const double kNever = -1;
  std::vector<std::vector<double>> doneF(static_cast<size_t>(virtualStages),
                                         std::vector<double>(M, kNever));
  std::vector<std::vector<double>> doneB = doneF;
  std::vector<size_t> next(static_cast<size_t>(stages), 0);
  std::vector<double> freeAt(static_cast<size_t>(stages), 0);
  PipelineSimulation sim;
  sim.start.assign(static_cast<size_t>(stages), {});
  sim.peakActivations.assign(static_cast<size_t>(stages), 0);
  std::vector<int64_t> alive(static_cast<size_t>(stages), 0);
  std::vector<bool> splits(static_cast<size_t>(stages), false);
  for (size_t s = 0; s < schedule.size(); ++s)
    for (const PipelineOp &op : schedule[s])
      splits[s] = splits[s] || op.kind == PipelineOp::kWeight;
  // The input a slot of virtual stage v waits for: (virtual stage, kind) of its producer, or
  // stage -1 for none.
  auto dependency = [&](int64_t v, const PipelineOp &op) -> std::pair<int64_t, PipelineOp::Kind> {
    if (op.kind == PipelineOp::kForward)
      return {v - 1, PipelineOp::kForward};
    if (op.kind == PipelineOp::kWeight)
      return {v, PipelineOp::kBackward};
    if (v == virtualStages - 1)
      return {-1, PipelineOp::kForward};
    return {v + 1, PipelineOp::kBackward};
  };
  const double scale = 1.0 / static_cast<double>(V);
  size_t remaining = 0;
  for (const auto &ops : schedule)
    remaining += ops.size();
  while (remaining > 0) {
    bool progressed = false;
    for (int64_t s = 0; s < stages; ++s) {
      const size_t si = static_cast<size_t>(s);
      while (next[si] < schedule[si].size()) {
        const PipelineOp &op = schedule[si][next[si]];
        const size_t m = static_cast<size_t>(op.microbatch);
        const int64_t v = op.chunk * stages + s;
        const size_t vi = static_cast<size_t>(v);
        const auto [dv, dk] = dependency(v, op);
        double ready = freeAt[si];
        if (dv >= 0) {
          const double t = (dk == PipelineOp::kForward ? doneF : doneB)[static_cast<size_t>(dv)][m];
          if (t == kNever)
            break;
          ready = std::max(ready, t);
        }
        if (op.kind == PipelineOp::kBackward)
          ready = std::max(ready, doneF[vi][m]);
        sim.start[si].push_back(ready);
        const double cost = scale * (op.kind == PipelineOp::kForward ? forwardCost
                                     : splits[si]                    ? backwardCost / 2
                                                                     : backwardCost);
        const double end = ready + cost;
        if (op.kind != PipelineOp::kWeight)
          (op.kind == PipelineOp::kForward ? doneF : doneB)[vi][m] = end;
        // Activations live from F until the last backward part (B, or W when split).
        if (op.kind == PipelineOp::kForward)
          ++alive[si];
        else if (op.kind == (splits[si] ? PipelineOp::kWeight : PipelineOp::kBackward))
          --alive[si];
        sim.peakActivations[si] = std::max(sim.peakActivations[si], alive[si]);
        freeAt[si] = end;
        sim.makespan = std::max(sim.makespan, end);
        ++next[si];
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) {
      std::string what;
      for (int64_t s = 0; s < stages; ++s) {
        const size_t si = static_cast<size_t>(s);
        if (next[si] >= schedule[si].size())
          continue;
        const PipelineOp &op = schedule[si][next[si]];
        const auto [dv, dk] = dependency(op.chunk * stages + s, op);
        what += (what.empty() ? "" : "; ") + std::string("stage ") + std::to_string(s) +
                " waits at " + pipelineOpText(op) + " for " +
                slotText(dk, op.microbatch, dv / stages) + " of stage " +
                std::to_string(dv % stages);
      }
      return Status::error("pipeline schedule", "deadlocks: " + what);
    }
  }
  const double busy = static_cast<double>(stages * microbatches) * (forwardCost + backwardCost);
  sim.bubbleFraction = 1.0 - busy / (static_cast<double>(stages) * sim.makespan);
  return sim;
}

Expected<std::vector<size_t>>
balanceStages(const std::vector<double> &costs, int64_t stages,
              const std::function<bool(size_t part, size_t begin, size_t end)> &fits) {
  const size_t n = costs.size();
  if (stages < 1)
    return Status::error("pipeline stages", "need at least one stage");
  if (n < static_cast<size_t>(stages))
    return Status::error("pipeline stages", std::to_string(n) + " items cannot fill " +
                                                std::to_string(stages) +
                                                " stages: a stage would have nothing to do");
  std::vector<double> prefix(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    if (!(costs[i] >= 0) || !std::isfinite(costs[i]))
      return Status::error("pipeline stages",
                           "item " + std::to_string(i) + " has cost " + std::to_string(costs[i]));
    prefix[i + 1] = prefix[i] + costs[i];
  }
  const size_t S = static_cast<size_t>(stages);
  struct Best {
    double max = std::numeric_limits<double>::infinity();
    double squares = std::numeric_limits<double>::infinity();
    size_t from = 0;
  };
  // best[k][i]: items [0, i) in k + 1 parts.
  std::vector<std::vector<Best>> best(S, std::vector<Best>(n + 1));
  const double eps = 1e-9 * std::max(1.0, prefix[n]);
  // Ties go to the later split (the last part smaller), so leftover items go to the first
  // stages, as 8/8/7/7.
  auto better = [&](double mx, double sq, const Best &b) {
    return mx < b.max - eps || (mx <= b.max + eps && sq <= b.squares + eps * eps);
  };
  for (size_t i = 1; i <= n; ++i)
    if (!fits || fits(0, 0, i))
      best[0][i] = {prefix[i], prefix[i] * prefix[i], 0};
  for (size_t k = 1; k < S; ++k)
    for (size_t i = k + 1; i <= n; ++i)
      for (size_t j = k; j < i; ++j) {
        const Best &prev = best[k - 1][j];
        if (std::isinf(prev.max) || (fits && !fits(k, j, i)))
          continue;
        const double part = prefix[i] - prefix[j];
        const double mx = std::max(prev.max, part), sq = prev.squares + part * part;
        if (better(mx, sq, best[k][i]))
          best[k][i] = {mx, sq, j};
      }
  if (std::isinf(best[S - 1][n].max))
    return Status::error("pipeline stages", "no split of the " + std::to_string(n) +
                                                " items into " + std::to_string(stages) +
                                                " stages fits");
  std::vector<size_t> firsts(S);
  size_t end = n;
  for (size_t k = S; k-- > 0;) {
    firsts[k] = k == 0 ? 0 : best[k][end].from;
    end = firsts[k];
  }
  return firsts;
}

} // namespace dtc::passes
