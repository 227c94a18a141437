// The training loop's internals (runtime/Trainer.h is the interface), shared by Trainer.cpp (the
// loop, validation, outputs) and TrainerState.cpp (checkpoints, --resume and the exchange of
// state between ranks). Not installed; nothing outside runtime/ includes it.
#pragma once

#include "compiler/plan/Plan.h"
#include "compiler/support/FileIO.h"
#include "runtime/Checkpoint.h"
#include "runtime/DataLoader.h"
#include "runtime/Executor.h"
#include "runtime/Trainer.h"
#include "runtime/io/Npy.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace dtc::rt::detail {

using Clock = std::chrono::steady_clock;

/// What the loop needs to know about the plan, resolved once.
struct TrainingLayout {
  int lossBuffer = -1;
  std::string predictionName;
  std::string labelName;
  int optimizerBegin = 0;
  /// Validation runs [0, forwardEnd).
  int forwardEnd = 0;
  int64_t microBatches = 1;
  int64_t batch = 0;
  /// PARAMETER, OPTIMIZER_STATE and state buffers: what a checkpoint holds.
  std::vector<int> persistent;
  /// Persistent buffers the micro-batch part writes (restored after validation).
  std::vector<int> writtenByForward;
  /// Gradient buffer and initializer name of each trained parameter.
  std::vector<std::pair<int, std::string>> gradients;
  /// Buffers holding initializers (by source name, first buffer of each name).
  std::vector<std::pair<int, std::string>> initializers;
};

/// The layout of the program rank `rank` runs.
TrainingLayout layoutOf(const plan::Plan &plan, int rank);

/// Running sums of one epoch (or one validation pass).
struct Totals {
  double lossSum = 0;
  int64_t steps = 0;
  int64_t correct = 0;
  int64_t counted = 0;
  double seconds = 0;
  int64_t samples = 0;
  /// Loss scaling: optimizer steps skipped for non-finite gradients in this epoch.
  int64_t skipped = 0;
};

class Trainer {
public:
  Trainer(const plan::Plan &plan, const TrainOptions &opts, Executor &ex, const Dataset &train,
          const Dataset *val, TrainingLayout layout)
      : plan_(plan), opts_(opts), ex_(ex), train_(train), val_(val), l_(std::move(layout)),
        program_(ex.program()) {
    for (const plan::Binding &b : program_.inputs())
      fed_.insert(b.name());
  }

  Status run();

private:
  Status setScalars(int64_t step, int64_t rngCounter, double lr);
  /// Runs the micro-batch part on the batch starting at order[first]; adds loss/accuracy.
  Status microBatch(const Dataset &data, const std::vector<int64_t> &order, int64_t first,
                    double &loss, Totals &totals, int end = -1);
  Status validate(int64_t step, Totals &val);
  /// Writes the checkpoint of `step` (every rank calls it at the same step): the lowest rank of
  /// each program writes that program's shard, then rank 0 the manifest naming them all; an
  /// error on any rank is returned on every rank (agree()). Logs a "checkpoint" event: the
  /// manifest's file name, each shard's bytes and writing time (s), in program order, and the
  /// seconds from the start of the checkpoint to its manifest on rank 0 (waits for the slowest
  /// rank included).
  Status writeCheckpointAt(int64_t step, int64_t epoch, int64_t stepInEpoch, const Totals &t);
  /// Before the first step, on every rank: rank 0 checks the checkpoint folder (a fresh run
  /// refuses one holding checkpoints) or, with --resume, picks the newest manifest and checks
  /// it against the run, and opens the log; with --resume every rank then restores its own
  /// program's shard and takes the position the manifest records. Data parallelism without a
  /// pipeline, fresh: every replica takes rank 0's state (broadcastState). Errors on any rank
  /// end every rank with the same message.
  Status start(int64_t &step, Totals &epochTotals);
  /// Rank 0 on --resume: the newest manifest of the folder, checked against this run (plan,
  /// data, seed, shuffling, position, one shard per program of the plan).
  Expected<Manifest> pickCheckpoint();
  /// Reads this rank's program's shard of `manifest` and writes it into its persistent buffers.
  Status restoreShard(const Manifest &manifest);
  /// ZeRO plans (Hyperparameters.zero > 0, dp > 1): the persistent optimizer-state buffers, which
  /// differ between data-parallel replicas; empty otherwise. Checkpoints keep every replica's,
  /// named zeroShardName(buffer, dp index).
  std::vector<int> zeroShardedState() const;
  static std::string zeroShardName(const std::string &buffer, int64_t dp);
  Status logLine(const nlohmann::json &j);
  Status epochEnd(int64_t epoch, int64_t stepsDone, Totals &t, bool partial);

  const plan::Plan &plan_;
  const TrainOptions &opts_;
  Executor &ex_;
  const Dataset &train_;
  const Dataset *val_;
  TrainingLayout l_;
  /// This rank's program, and the inputs it binds (a pipeline stage reads only the data arrays
  /// its nodes use).
  const plan::RankProgram &program_;
  std::set<std::string> fed_;
  /// Pipelines: rank 0 gathers every stage's arrays for --save-params, --export and
  /// --dump-gradients.
  bool pipeline_ = false;
  /// This rank's data-parallel replica (which slice of the global batch it reads), the replica
  /// count, and the ranks that compute the loss (a pipeline's last stage; every rank otherwise).
  int dpIndex_ = 0;
  int dpSize_ = 1;
  int lossRanks_ = 1;
  std::string fingerprint_;
  uint64_t seed_ = 0;
  bool shuffle_ = true;
  int64_t stepsPerEpoch_ = 0;
  int64_t totalSteps_ = 0;
  /// --log: every write checked (a full disk is an error, not a short log).
  CheckedAppendFile log_;
  std::vector<HostArray> lastGradients_;
  bool progressLineOpen_ = false;
  /// Loss scaling (--loss-scale): whether the program outputs the skipped-step count
  /// (ir::kSkippedStepsOutput) and the next step's scale (ir::kLossScaleOutput); the count after
  /// the last step.
  bool reportsSkipped_ = false, reportsScale_ = false;
  double skippedSoFar_ = 0;
  /// Data parallelism: this rank, the world size, and the global batch (l_.batch per rank).
  int rank_ = 0;
  int world_ = 1;
  int64_t globalBatch_ = 0;
  Communicator *comm_ = nullptr;
  /// Sums `values` over the ranks (no-op on one rank).
  Status sumOverRanks(std::vector<double> &values, const std::string &what);
  /// Data parallelism: every rank must read the same data in the same order for as long: the
  /// ranks compare their dataset fingerprints and sample counts, seed, shuffling, run length,
  /// --resume and checkpointing (every rank takes part in each checkpoint), and all fail with
  /// the same message when one differs from rank 0's.
  Status checkSameRun();
  /// Rank 0's persistent buffers (parameters, optimizer state, running statistics) replace every
  /// other rank's.
  Status broadcastState();
  /// Which arrays gather() collects.
  enum class Part { kInitializers, kGradients };
  /// (buffer, array name) of `part` in a program with layout `l`.
  static std::vector<std::pair<int, std::string>> partOf(const TrainingLayout &l, Part part);
  /// Rank 0 gets `part` of every program (its own, then each other program's from that program's
  /// first rank) in `out`; other ranks send theirs (the first rank of each program) or do
  /// nothing. Every rank calls it at the same point.
  Status gather(Part part, std::vector<HostArray> &out);
  /// The program this rank runs, and the rank that writes program `program`'s checkpoint shard
  /// (its lowest rank; RankInfo.program is authoritative).
  /// The checkpoint shard a rank's persistent buffers go to: its program's index, times the
  /// tp degree plus its tp rank under tensor parallelism (tp peers run one program on different
  /// slices). "program P" or "program P, tp rank t" for messages.
  int shardKey(int rank) const;
  std::string shardKeyName(int key) const;
  /// The lowest rank with shard key `key` (it writes the shard), or -1.
  int shardWriter(int key) const;
  /// Every rank calls it at the same point with its own outcome: ok on every rank when every
  /// rank's is ok, else on every rank the error of the lowest failing rank ("rank R: <its
  /// message>", naming the other failing ranks), so that no rank waits for one that failed.
  /// `what` names the exchange in communication errors. One rank: `local` itself.
  Status agree(const Status &local, const std::string &what);
};

} // namespace dtc::rt::detail
