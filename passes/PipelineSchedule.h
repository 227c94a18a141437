// Pipeline schedules and stage balancing (DESIGN.md section 6, issue "pipeline model
// parallelism"): the order in which each stage runs the forward (F) and backward (B) pass of
// every micro-batch, a simulation that checks a schedule (each pass once, no deadlock) and
// measures its bubble and the activations each stage keeps, and the contiguous split of a
// sequence of costs into balanced stages. Pure functions: the pipeline pass and the compiler's
// checks build on them.
#pragma once

#include "compiler/support/Mesh.h"
#include "compiler/support/Status.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dtc::passes {

/// One slot of a stage's schedule.
struct PipelineOp {
  /// kBackward is the whole backward pass, or with kWeight present on the stage its
  /// input-gradient part (what the previous stage waits for); kWeight the weight-gradient part.
  enum Kind { kForward, kBackward, kWeight };
  Kind kind = kForward;
  int64_t microbatch = 0;
  /// Interleaved schedules: the model chunk (virtual stage chunk * S + rank of S ranks); else 0.
  int64_t chunk = 0;
  bool operator==(const PipelineOp &o) const {
    return kind == o.kind && microbatch == o.microbatch && chunk == o.chunk;
  }
};
/// "F0", "B3", "W1"; a chunk other than 0 follows a dot: "F3.1" (micro-batch 3 of chunk 1).
std::string pipelineOpText(const PipelineOp &op);

/// What every pipeline rank runs, in order: schedule[s] is rank s's list (without interleaving
/// a rank is one stage).
using PipelineScheduleTable = std::vector<std::vector<PipelineOp>>;

/// The schedule of `stages` pipeline ranks over `microbatches` micro-batches.
/// GPipe (Huang et al. 2019): every stage runs F0..F(M-1), then B0..B(M-1).
/// 1F1B (PipeDream-Flush, Narayanan et al. 2021, section 2.2): stage s first runs
/// min(S - s - 1, M) warm-up forwards, then alternates one forward and one backward, then runs
/// the remaining backwards; at most S - s micro-batches' activations are alive on stage s.
/// ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism"): a greedy list schedule under
/// unit pass costs (F = B = W): each stage, when free, runs its next B whose gradient has
/// arrived, else its next F whose input has arrived while at most `stages` micro-batches are in
/// flight (a micro-batch leaves at its W: one more than 1F1B's first stage keeps), else its
/// oldest pending W. In simulation its bubble is within 15% of ZB-H1's (S-1)(F+B-W) time,
/// (S-1) / (3M+S-1) of the stage time, against 1F1B's (S-1) / (M+S-1): about a third for M >> S.
/// Interleaved 1F1B (Narayanan et al. 2021, section 2.2.2; Megatron-LM's order): each rank
/// holds `virtualStages` V chunks; it runs forwards in rounds of S micro-batches per chunk
/// (chunk 0 of micro-batches 0..S-1, chunk 1 of the same, ..., then the next S micro-batches),
/// backwards in the same rounds with the chunks reversed; rank s warms up with
/// min(2(S - s - 1) + (V - 1)S, MV) forwards (all of them when M = S), then alternates. Bubble
/// (S-1) / (VM + S-1) of the step. Precondition for it: V >= 2, M a multiple of S.
/// Precondition: stages >= 1, microbatches >= 1.
PipelineScheduleTable makePipelineSchedule(PipelineSchedule kind, int64_t stages,
                                           int64_t microbatches, int64_t virtualStages = 1);

/// What a simulation of a schedule found.
struct PipelineSimulation {
  /// Time from the first forward's start to the last backward's end (units of the costs).
  double makespan = 0;
  /// Idle share of the stages' time: 1 - (busy time of all stages) / (stages * makespan).
  /// GPipe and 1F1B with equal stage costs: (S - 1) / (M + S - 1).
  double bubbleFraction = 0;
  /// Per rank, the most (micro-batch, chunk) passes whose forward has run and whose backward has
  /// not: the activations the rank keeps at once, in units of one chunk's micro-batch.
  std::vector<int64_t> peakActivations;
  /// start[s][k]: when stage s starts its k-th slot.
  std::vector<std::vector<double>> start;
};

/// Runs the schedule as the executor would: each rank runs its slots in order; with V chunks
/// (V = 1 + the largest chunk listed) slot (kind, m, chunk c) of rank s belongs to virtual stage
/// v = cS + s of SV. F(v, m) waits for F(v - 1, m) (the activations it receives), B(v, m) for
/// B(v + 1, m) (the gradient it receives) and for F(v, m); the last virtual stage's B(m) follows
/// its F(m) (the loss); W(v, m) follows B(v, m). Sends do not block. A forward takes
/// `forwardCost` / V, a backward `backwardCost` / V (> 0, the same on every stage): a rank's
/// work is the same whatever V; on a rank that lists W slots, B and W take half of the backward
/// each and a micro-batch's activations live until its W. Errors: a rank that lists a pass twice
/// or misses one (of any chunk), a backward before its own forward, or a deadlock: no rank can
/// go on; the message names every rank's blocked slot and what it waits for ("stage 0 waits at
/// B1 for B1 of stage 1; stage 1 waits at F1 ...").
Expected<PipelineSimulation> simulatePipeline(const PipelineScheduleTable &schedule,
                                              int64_t microbatches, double forwardCost = 1,
                                              double backwardCost = 2);

/// Splits `costs` (one per item, in order: layers or nodes) into `stages` contiguous, non-empty
/// parts and returns the index of each part's first item (the first is 0). The split minimizes
/// the largest part's cost and, among those, the sum of squared part costs, so equal items
/// spread evenly, the first stages taking the leftovers (30 equal layers on 4 stages: 8/8/7/7).
/// With `fits`, only parts for which fits(part index, first item, end item) holds are allowed
/// (a per-device memory limit). Exact dynamic programming, O(S * n^2) cost and `fits` calls.
/// Errors: fewer items than stages (a stage would have nothing to do), a negative cost, no split
/// whose every part fits ("no split ... fits").
Expected<std::vector<size_t>>
balanceStages(const std::vector<double> &costs, int64_t stages,
              const std::function<bool(size_t part, size_t begin, size_t end)> &fits = nullptr);

} // namespace dtc::passes
