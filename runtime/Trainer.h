// The training loop of dtc-run --data (DESIGN.md section 8): feeds batches, the learning rate,
// the step number and the RNG key to a training plan, runs the micro-batch part K times and the
// optimizer part once per step, reports loss, accuracy and throughput (progress on stderr,
// JSON lines in --log), validates, checkpoints and resumes exactly, and writes the trained
// parameters (--save-params, --export) and the last step's gradients (--dump-gradients).
#pragma once

#include "compiler/plan/Plan.h"
#include "runtime/io/Npy.h"

#include <cstdint>
#include <cstdio>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace dtc::rt {

class Communicator;
class Executor;
class Tracer;

/// Where a worker of a parameter-host plan (ps=S:W over gRPC, runtime/ps/Service.h; cs=N in
/// one process) gets its parameters and sends its gradients. Errors name the server.
class ParameterClient {
public:
  virtual ~ParameterClient() = default;
  /// Joins the job (every server); returns the step this worker continues at.
  virtual Expected<int64_t> join() = 0;
  /// Writes the parameters to use for `step` into the executor's parameter buffers, waiting
  /// while the staleness bound holds this worker back.
  virtual Status pull(int64_t step, Executor &ex) = 0;
  /// Sends the gradients the executor computed for `step`, at learning rate `lr`. Returns the
  /// step to compute next: step + 1, or later when a synchronous job went on without this
  /// worker (lost, then back).
  virtual Expected<int64_t> push(int64_t step, double lr, Executor &ex) = 0;
  /// Tells the servers this worker has finished its steps.
  virtual Status finish() = 0;
};

struct TrainOptions {
  /// Where to print the kernel profile of every instruction over the whole run (--profile), or
  /// null for none.
  std::ostream *profile = nullptr;
  /// The plan file (messages, model lookup) and a model to read weights from instead.
  std::string planPath;
  std::string modelPath;
  /// The plan file's fingerprint (plan::readPlanForRank's), compared across ranks and recorded
  /// in checkpoints; empty: plan::fingerprint of the plan (which must then hold no summary).
  std::string planFingerprint;
  /// Training and validation .npz files (see DataLoader.h).
  std::string dataPath;
  std::string valDataPath;
  /// Length of the run: `steps` optimizer steps in all (a resumed run continues to the same
  /// total), or `epochs` epochs; one epoch when both are 0. Setting both is an error.
  int64_t epochs = 0;
  int64_t steps = 0;
  /// Shuffling seed (default 0) and shuffling (default on). A resumed run takes both from the
  /// checkpoint; giving a different one explicitly is an error.
  std::optional<uint64_t> seed;
  std::optional<bool> shuffle;
  /// JSON lines file (truncated at start, appended to on --resume); "" for none.
  std::string logPath;
  /// Checkpoints: every `checkpointEvery` steps (0: at the end of every epoch) and at the end of
  /// the run, into `checkpointDir` ("" for none), sharded by plan program (runtime/Checkpoint.h).
  /// `resume` continues from its newest complete one (the newest manifest).
  std::string checkpointDir;
  int64_t checkpointEvery = 0;
  bool resume = false;
  /// Outputs written at the end ("" for none).
  std::string exportPath;
  std::string dumpGradientsPath;
  std::string saveParamsPath;
  int threads = 0;
  /// CUDA plans: cuDNN workspace limit in MiB (--cuda-workspace-mb) and the NCCL
  /// communicator's timeout in seconds (--timeout); see ExecutorOptions.
  int cudaWorkspaceMb = 256;
  double commTimeoutSeconds = 60;
  /// Progress: nullptr for none; on a terminal one updating line, else a line every
  /// `printEvery` steps and one per epoch.
  std::FILE *progress = stderr;
  bool progressIsTerminal = false;
  int64_t printEvery = 50;
  /// A step whose loss is NaN or infinite ends the run with an error naming the step (before
  /// it is logged, checkpointed or exported; as PyTorch users add a NaN check); true goes on.
  bool allowNonFiniteLoss = false;
  /// The job's communicator when the plan has several ranks (or collectives): this process
  /// trains rank comm->rank() on its shard of every global batch; rank 0 alone prints, logs,
  /// writes checkpoint manifests and outputs; the first rank of each program writes that
  /// program's checkpoint shard. Not owned; null on one rank.
  Communicator *comm = nullptr;
  /// Parameter servers and central storage: this process is worker `workerRank` of the plan
  /// (its rank: data shard, and worker 0 alone prints and writes outputs); parameters come
  /// from and gradients go to `parameters` every step. Not owned; null otherwise.
  ParameterClient *parameters = nullptr;
  int workerRank = 0;
  /// Seconds to sleep after every step (--step-delay): a slow worker, for fault-injection tests
  /// and the asynchronous-training benchmark. 0: none.
  double stepDelaySeconds = 0;
  /// --trace: every instruction and collective as a timeline event. Not owned; may be null.
  Tracer *tracer = nullptr;
  /// Where the caller writes the trace at the end: checked before training like the other
  /// outputs ("" for none).
  std::string tracePath;
};

/// Checks the training part of a plan before anything is loaded: mode training, CPU ranks that
/// all run one program (data parallelism), training.loss_output an f32 scalar output, prediction_output (if set) an output,
/// label_input (if set) an input, optimizer_begin in [1, #instructions], parameter, gradient,
/// state and state_buffers indices in range, runtime inputs (lr f32[], step i64[], rng i64[3])
/// bound, grad_accum_steps >= 1. Errors: "plan <where>: training: ...".
Status checkTrainingPlan(const plan::Plan &plan, const std::string &where);

/// Counts correct predictions of one batch: `prediction` holds class scores [B, C, d...] (f32),
/// `label` class indices [B, d...] (int32 or int64); a position counts when its label differs
/// from `ignoreIndex`, and is correct when the label equals the first index of the maximum over
/// axis 1 (numpy.argmax). A prediction of int64 class indices shaped like the label (the
/// predicted class a tensor-parallel plan computes in-graph from scores split by class, with
/// the same first-index rule: passes/TensorParallel.cpp) is compared with the label directly.
/// Returns false (counting nothing) when the shapes do not have either form (regression,
/// binary logits shaped like the label).
bool countCorrect(const HostArray &prediction, const HostArray &label, int64_t ignoreIndex,
                  int64_t &correct, int64_t &counted);

/// Runs a training job on `plan` (a validated training plan is checked again). With data
/// parallelism (opts.comm, world size N): every rank loads the same dataset and takes its
/// slice [r * B/N, (r + 1) * B/N) of each global batch B (the order is the same seeded shuffle
/// on every rank; the last partial global batch is dropped on every rank); parameters,
/// optimizer state and running statistics are broadcast from rank 0 after loading (on --resume
/// every rank reads its own program's checkpoint shard instead); loss and accuracy are averaged
/// over the ranks. Checkpoint and --resume errors are returned on every rank alike.
/// Errors are
/// "<where>: <what>" naming the file, array, buffer or instruction; output files are written
/// atomically at the end, so an error leaves none behind (the log is streamed).
Status train(plan::Plan plan, const TrainOptions &opts);

} // namespace dtc::rt
