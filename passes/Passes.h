// Factories of every pass, and lookup by kebab-case name for `dtc-compile --passes`.
#pragma once

#include "passes/Pass.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dtc::passes {

/// shape-inference: infers dtype and shape of every value in topological order from the ops'
/// definitions; checks type constraints; merges with shapes declared in the model (an
/// incompatible declaration is an error naming the value).
std::unique_ptr<Pass> createShapeInferencePass();
/// canonicalize: constant folding (including Shape->Gather->Unsqueeze->Concat->Reshape chains
/// on symbolic batches), Identity removal, dead-node removal; warns when a constant shape
/// hard-codes the batch size. Runs shape inference itself, and leaves every type inferred.
std::unique_ptr<Pass> createCanonicalizePass();
/// training-mode: BatchNormalization -> ai.dtc.BatchNormTraining (batch statistics; running
/// statistics become ir::TrainingRoles::updates), Dropout (ratio > 0) -> ai.dtc.DropoutTraining fed
/// by the dtc::rng input.
std::unique_ptr<Pass> createTrainingModePass();
/// attach-loss: adds TrainingConfig::loss on the chosen model output and the label input; the
/// graph's outputs become {loss, prediction}.
std::unique_ptr<Pass> createAttachLossPass();
/// optimizer: per trained parameter, the optimizer update (SGD, Adam, AdamW) as ai.dtc ops with
/// its state, gradient clipping and accumulation; records ir::TrainingRoles::updates.
std::unique_ptr<Pass> createOptimizerPass();
/// autodiff: appends the backward graph of the training loss (ir::Graph::training()) for
/// every trained parameter (floats, used, not frozen); see Autodiff.h.
std::unique_ptr<Pass> createAutodiffPass();
/// data-parallel (--strategy dp=N): gradient all-reduce (mean) in buckets placed where backward
/// completes them, as ai.dtc.AllReduce nodes; sync = 1 on batch-norm nodes with --sync-batchnorm.
/// Runs after autodiff and before optimizer; replaces ir::TrainingRoles::gradients by the reduced
/// values.
std::unique_ptr<Pass> createDataParallelPass();
/// tensor-parallel (--strategy tp=T): splits weights over the tp group by the ops' sharding
/// rules and inserts the collectives where layouts meet (passes/TensorParallel.cpp). Runs after
/// attach-loss and before the pipeline pass and autodiff; a no-op without tp.
std::unique_ptr<Pass> createTensorParallelPass();
/// pipeline (--strategy pp=S): unrolls the forward graph over the micro-batches (data inputs
/// sliced, loss = mean of the micro-batch losses, prediction = their concatenation, running
/// statistics chained) and cuts it into S stages balanced by estimated time (Node::stage,
/// Node::microBatch). Runs after attach-loss and before autodiff; a no-op without pp.
std::unique_ptr<Pass> createPipelinePass();
/// pipeline-comm (--strategy pp=S): places the nodes added after `pipeline`, inserts
/// ai.dtc.Send / ai.dtc.Recv for every value crossing pipeline ranks, and orders the nodes rank
/// by rank in the schedule's order (GPipe, 1F1B, ZB-H1 or interleaved 1F1B); rejects parameters
/// used on several stages and schedules that deadlock. Runs after optimizer; a no-op without pp.
std::unique_ptr<Pass> createPipelineCommPass();
/// mixed-precision (--precision bf16|fp16): MatMul, Gemm and Conv of the forward graph read
/// bf16/fp16 casts of their f32 inputs and their results are cast back to f32 (Gemm's C added
/// after, in f32); parameters, the optimizer and every other op stay f32
/// (passes/MixedPrecision.cpp). Runs after tensor-parallel and pipeline, just before autodiff; a
/// no-op for fp32.
std::unique_ptr<Pass> createMixedPrecisionPass();
/// verify: runs the IR verifier (useful in --passes lists).
std::unique_ptr<Pass> createVerifyPass();

/// Replaces every symbolic dim by its size from `dims` ("N" -> 8), binding the leading dim of
/// every graph input that is a lone symbol (the batch axis exporters mark dynamic) to
/// `batchSize` unless `dims` names that symbol, and re-runs canonicalize so that shape
/// computations fold with the now static sizes. Errors: an unbound symbol on a graph input
/// (naming the input, the symbol and the flags that bind it), a size < 1, a --dim symbol no
/// input has, sizes that overflow. On return `dims` holds every bound symbol.
Status bindDims(ir::Graph &graph, std::map<std::string, int64_t> &dims,
                std::optional<int64_t> batchSize, Diagnostics &diags);

/// A new ai.dtc.BatchNormTraining node before the BatchNormalization node `n` (n's five inputs,
/// epsilon and momentum; outputs Y, running mean, running var, saved mean and saved var named
/// "<base>.Y" ...), its types inferred; `n` is left for the caller to replace. Used by
/// training-mode (running statistics become state updates) and by canonicalize for an inference
/// compilation of a training-mode export (batch statistics, running ones unused).
Expected<ir::Node *> insertBatchNormTraining(ir::Graph &g, ir::Node *n, const std::string &base,
                                             Diagnostics &diags);

/// The pass named `name`, or nullptr.
std::unique_ptr<Pass> createPassByName(const std::string &name);
/// Every pass name, in pipeline order.
std::vector<std::string> allPassNames();
/// The default pipeline for this stage of the project: canonicalize (which leaves every value's
/// type inferred).
std::vector<std::string> defaultPipeline();

} // namespace dtc::passes
