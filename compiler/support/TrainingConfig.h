// The training configuration dtc-compile's flags (or a --config JSON file) set (DESIGN.md
// section 5): the loss, the optimizer and its schedule, the batch and the strategy's mesh. The
// training passes read it; lowering copies its hyperparameters into the plan.
#pragma once

#include "compiler/support/Mesh.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dtc {

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
  /// --tp-shard NAME=AXIS: weights the tensor-parallel pass must split along AXIS.
  std::vector<std::pair<std::string, int64_t>> tpShard;
  /// --sequence-parallel (tp > 1): the per-token regions between a row-parallel layer and the
  /// next column-parallel one (LayerNorm, residual adds, bias adds) run split along the
  /// sequence axis, with reduce-scatters and all-gathers in place of the all-reduces
  /// (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models").
  bool sequenceParallel = false;
  /// The tensor-parallel index whose local shapes the training passes build (uneven splits give
  /// the ranks of a tp group different shapes: dtc-compile then compiles once per index).
  int64_t tpIndex = 0;
  /// Set by the tensor-parallel pass when a split is uneven (ir::isUnevenSplit): the graph holds
  /// tp rank `tpIndex`'s shapes only, so each tp index needs a compilation of its own.
  bool tpUneven = false;
  /// Set with tpUneven: the size of every axis split unevenly. tp indices whose
  /// ir::splitRange lengths agree on each of them get identical programs (a rank's first row is
  /// computed from the runtime-fed tp rank), so dtc-compile compiles one index per such class.
  std::vector<int64_t> tpUnevenSizes;
  /// Parameters whose name matches this ECMAScript regex are frozen ("" = none).
  std::string freeze;
  /// --untie-initializers: import gives every use of a constant-filled floating-point
  /// initializer its own copy (compiler/onnx/UntieInitializers.h).
  bool untieInitializers = false;
  /// --precision: fp32 (default) or bf16 (MatMul, Gemm and Conv in bfloat16 with f32 master
  /// weights and optimizer state: passes/MixedPrecision.cpp). fp16 is accepted by the pass, but
  /// no kernel runs it yet (the CPU target refuses it naming the node).
  std::string precision = "fp32";
  /// --loss-scale (torch.cuda.amp.GradScaler semantics): "" takes the precision's default
  /// ("dynamic" for fp16, "off" otherwise); "off"; "dynamic"; or a constant scale ("1024"). The
  /// backward pass starts from the scale instead of 1, the optimizer unscales the gradients, and
  /// a step whose gradients are not all finite is skipped (passes/Optimizer.cpp).
  std::string lossScale;
  /// --loss-scale-init: the dynamic scale's initial value (GradScaler's init_scale, 2^16).
  float lossScaleInit = 65536.0f;
  /// --loss-scale-window: consecutive finite steps after which a dynamic scale doubles
  /// (GradScaler's growth_interval); a non-finite step halves it.
  int64_t lossScaleWindow = 2000;
  /// The effective --loss-scale: "off", "dynamic" or a constant's text.
  std::string lossScaleMode() const {
    if (!lossScale.empty())
      return lossScale;
    return precision == "fp16" ? "dynamic" : "off";
  }
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
  /// dp: ZeRO stage (--zero; Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training
  /// Trillion Parameter Models", SC 2020). 0: off. 1: optimizer state sharded: every gradient
  /// bucket is flattened and zero-padded to a multiple of N, rank r keeps the optimizer state of
  /// block r and updates only that block of the parameters, and the updated blocks are
  /// all-gathered. 2: gradients sharded too: each bucket is reduce-scattered instead of
  /// all-reduced.
  int64_t zero = 0;
  /// pp: user-chosen stage boundaries (node or tensor names, pp - 1 of them in topological
  /// order); empty: stages balanced by estimated time.
  std::vector<std::string> ppCuts;
  /// Bytes of memory one device offers (--device-memory; 0 = no limit). Every rank's arena must
  /// fit (checked after lowering); pipelines balance their stages under an estimate of it.
  uint64_t deviceMemory = 0;
  /// ps=S:W: how many steps a worker may run ahead of the slowest live worker (--staleness;
  /// 0: synchronous, each update the mean of the W workers' gradients; -1: unbounded, fully
  /// asynchronous, each gradient applied scaled by 1/W as it arrives, TensorFlow's default).
  int64_t staleness = -1;
  /// ps=S:W, asynchronous (--async-rule): "scaled" (default), each push one optimizer step on
  /// its gradient scaled by 1/W; "aggregate", each optimizer step the mean of the next (live
  /// workers) pushes, whoever sent them, so that an epoch takes as many steps as dp's
  /// (TensorFlow's SyncReplicasOptimizer, replicas_to_aggregate = W, without its barrier).
  /// "staleness-lr", each push one optimizer step on its unscaled gradient at lr / max(1, the
  /// updates applied since the worker pulled) (Zhang, Gupta, Lian, Liu 2016).
  std::string asyncRule = "scaled";
  /// ps=S:W: a parameter of more bytes than this is split along axis 0 into up to S shards of
  /// at least this many bytes (TensorFlow's MinSizePartitioner, min_shard_bytes 256 KiB).
  int64_t psMinShardBytes = 256 << 10;
  /// Samples one rank computes per micro-batch: batchSize / max(1, dataParallel()), and with a
  /// pipeline divided by its micro-batches (the graph is bound to one micro-batch; the pipeline
  /// pass feeds it slices of the rank's batch).
  int64_t rankBatchSize() const {
    return batchSize / (dataParallel() > 1 ? dataParallel() : 1) /
           (mesh.pp > 1 ? mesh.microbatches : 1);
  }
};

} // namespace dtc
