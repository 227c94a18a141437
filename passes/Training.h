// Training configuration and the training state the training passes build (DESIGN.md section
// 5): attach-loss -> autodiff -> optimizer. The passes read TrainingConfig and fill
// TrainingState, which lowering (compiler/plan/Lowering.h, lowerTraining) turns into the plan's
// Training message. Values referenced here must stay in the graph: no pass after autodiff
// removes dead values.
#pragma once

#include "compiler/ir/Graph.h"
#include "compiler/support/Mesh.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dtc::passes {

/// Reserved names of the runtime-fed inputs of training graphs.
inline constexpr const char *kLrInput = "dtc::lr";     ///< f32[], learning rate of this step
inline constexpr const char *kStepInput = "dtc::step"; ///< i64[], optimizer step, 0-based
inline constexpr const char *kRngInput = "dtc::rng";   ///< i64[3], {seed, step, rank}

/// PyTorch DDP's default bucket_cap_mb.
inline constexpr float kDefaultBucketMb = 25.0f;

/// Everything dtc-compile's training flags (or a --config JSON file) set.
struct TrainingConfig {
  /// softmax-cross-entropy | mse | bce-with-logits | model (the model outputs its loss).
  std::string loss = "softmax-cross-entropy";
  /// The model output the loss attaches to ("" = the first output).
  std::string lossOutput;
  /// Name of the label input the loss adds.
  std::string labelName = "label";
  /// softmax-cross-entropy: labels equal to this carry no loss (PyTorch's default -100).
  int64_t ignoreIndex = -100;
  /// softmax-cross-entropy: the class axis of the scores (1 as ONNX and PyTorch; -1 for
  /// language-model logits (N, T, V), which attach-loss transposes to (N, V, T)).
  int64_t classAxis = 1;
  /// sgd | adam | adamw
  std::string optimizer = "sgd";
  float lr = 0.01f;
  float momentum = 0.0f;
  bool nesterov = false;
  float weightDecay = 0.0f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  std::string lrSchedule = "constant";
  int64_t warmupSteps = 0;
  int64_t stepSize = 1;
  float gamma = 0.1f;
  int64_t totalSteps = 0;
  float minLr = 0.0f;
  float clipGradNorm = 0.0f;
  int64_t gradAccumSteps = 1;
  /// Parameters whose name matches this ECMAScript regex are frozen ("" = none).
  std::string freeze;
  /// The global batch: with data parallelism each rank computes batchSize / dataParallel()
  /// samples of it.
  int64_t batchSize = 0;
  /// --strategy as a device mesh (single, dp, and as they land pp and tp).
  Mesh mesh;
  /// 0 for single (one device, no collectives), N >= 1 for a mesh with dp=N (synchronous data
  /// parallelism over N replicas; dp=1 runs the same program with its collectives over one rank).
  int64_t dataParallel() const { return mesh.single ? 0 : mesh.dp; }
  /// dp: gradient buckets of at most this many MiB (PyTorch DDP's bucket_cap_mb, default 25);
  /// the first bucket (the last layers' gradients, ready first) is capped at 1 MiB, as DDP does.
  float bucketMb = kDefaultBucketMb;
  /// dp: BatchNormalization statistics over all ranks (torch.nn.SyncBatchNorm) instead of per
  /// rank (DDP's default).
  bool syncBatchNorm = false;
  /// pp: user-chosen stage boundaries (node or tensor names, pp - 1 of them in topological
  /// order); empty: stages balanced by estimated time.
  std::vector<std::string> ppCuts;
  /// Samples one rank computes per micro-batch: batchSize / max(1, dataParallel()), and with a
  /// pipeline divided by its micro-batches (the graph is bound to one micro-batch; the pipeline
  /// pass feeds it slices of the rank's batch).
  int64_t rankBatchSize() const {
    return batchSize / (dataParallel() > 1 ? dataParallel() : 1) /
           (mesh.pp > 1 ? mesh.microbatches : 1);
  }
};

/// A state tensor the step overwrites: `state` (a parameter, optimizer state or running
/// statistic) takes the value of `next` at the end of the step.
struct StateUpdate {
  ir::Value *state;
  ir::Value *next;
};

/// What the training passes built, for lowering.
struct TrainingState {
  ir::Value *loss = nullptr;       ///< f32[] mean loss of the batch (a graph output)
  ir::Value *prediction = nullptr; ///< the model output the loss reads (a graph output)
  ir::Value *label = nullptr;      ///< the label graph input (nullptr for loss "model")
  /// Trained parameters in graph order, and the gradient of each (same index; nullptr when the
  /// loss does not depend on it: it is left unchanged).
  std::vector<ir::Value *> parameters;
  std::vector<ir::Value *> gradients;
  /// Optimizer state per trained parameter (same index; momentum buffer, or Adam's m and v).
  /// Initializers holding zeros, created by the optimizer pass.
  std::vector<std::vector<ir::Value *>> optimizerState;
  std::vector<StateUpdate> updates;
  /// Runtime-fed inputs (graph inputs named kLrInput, kStepInput, kRngInput), or nullptr.
  ir::Value *lr = nullptr;
  ir::Value *step = nullptr;
  ir::Value *rng = nullptr;
  /// First node of the optimizer phase (nullptr: none). Nodes before it run once per
  /// micro-batch, the rest once per step.
  ir::Node *optimizerBegin = nullptr;
};

} // namespace dtc::passes
