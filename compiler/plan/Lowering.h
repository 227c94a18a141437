// Lowering of the IR to a plan (DESIGN.md sections 5 and 7): bind the symbolic dims to sizes,
// schedule (a deterministic topological order), check that every node has a CPU kernel, plan the
// arena (liveness-based reuse, views and in-place results sharing bytes) and emit one rank's
// program.
#pragma once

#include "compiler/ir/Graph.h"
#include "compiler/ir/ParameterHost.h"
#include "compiler/plan/ChecksumPrefetch.h"
#include "compiler/plan/Plan.h"
#include "compiler/support/Diagnostics.h"
#include "compiler/support/Mesh.h"
#include "compiler/support/TrainingConfig.h"
#include "ops/kernel/Target.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace dtc::plan {

struct LowerOptions {
  /// Sizes of symbolic dims ("N" -> 8, "T" -> 16).
  std::map<std::string, int64_t> dims;
  /// Binds the leading dim of every graph input that is symbolic (the batch axis exporters
  /// mark dynamic), unless `dims` names that symbol.
  std::optional<int64_t> batchSize;
  /// The model as the plan refers to it (relative to the plan's folder, or absolute).
  std::string modelPath;
  /// The model file whose checksum and size go into the plan.
  std::string modelFile;
  /// The model was imported with --untie-initializers (recorded in the plan's ModelRef).
  bool untieInitializers = false;
  /// Checksums of the model file and its external data started earlier (dtc-compile starts
  /// them after import); null: computed when the plan is finished.
  ChecksumPrefetch *checksums = nullptr;
  std::string producer = "dtc-compile 0.1.0";
  /// Reuse memory whose value is dead (off: every buffer gets its own bytes; for debugging).
  bool reuseMemory = true;
  /// Fuse Conv+Relu and Conv+Add(+Relu) into ai.dtc.FusedConv where the kernel takes it.
  bool fuse = true;
  /// Keep activations between convolution-family ops channels-last (NHWC), with ai.dtc.Reorder
  /// instructions at the boundaries, where the kernels take it.
  bool channelsLast = true;
  /// The device the plan runs on: the target whose kernels the lowering checks every
  /// instruction against (an op without a kernel there is an error naming the node), whose
  /// alignment the arena uses and whose layouts and fusions it prefers.
  ops::DeviceKind device = ops::DeviceKind::kCpu;
};

/// The external data files (paths as the initializers give them, sorted, each once) that the
/// graph's non-constant initializers read: the files whose checksums the plan records.
std::vector<std::string> externalDataFiles(const ir::Graph &graph);

/// Lowers a graph whose shapes are all static (passes::bindDims first) to a one-rank forward-only
/// plan. Errors name the node or value: an op without a CPU kernel or with an unsupported dtype or
/// attribute, a value whose shape is still not static, an unreadable model file.
Expected<Plan> lowerInference(const ir::Graph &graph, const LowerOptions &opts);

/// Lowers a training graph (the training passes have run and recorded the roles in
/// graph.training(); shapes static) to a training plan (mode MODE_TRAINING, each program's
/// Training message, hyperparameters from `cfg`, one data binding per dataset-fed input): one
/// program shared by every rank, or one per pipeline stage (cfg.mesh.pp > 1). Parameters, optimizer
/// state and running statistics live in persistent arena bytes; gradients stay readable after the
/// step; a state takes its new value right after the instruction computing it (in place for
/// optimizer updates, else a Copy). Fusion and channels-last layouts are off (backward kernels are
/// row-major). Errors as lowerInference, plus a state read after its update or without a computed
/// update.
///
/// ps=S:W and cs=N need `host` (driver::buildParameterHost): programs[0] is the workers'
/// (no optimizer part), the servers' follow, and Plan.parameter_host describes them.
Expected<Plan> lowerTraining(const ir::Graph &graph, const TrainingConfig &cfg,
                             const LowerOptions &opts,
                             const ir::ParameterHost *host = nullptr);

/// Fills `plan`'s hyperparameters (from `cfg`) and `program`'s Training message (from
/// graph.training(): loss, prediction and label bindings, trained parameters with their
/// gradient and state buffers, state buffers, runtime-fed inputs, `optimizerBegin`) and one data
/// binding per dataset-fed graph input (sharded on axis 0). `bufferOf` maps values to the program's
/// buffer indices.
Status fillTraining(Plan &plan, RankProgram &program, const ir::Graph &graph,
                    const TrainingConfig &cfg,
                    const std::unordered_map<const ir::Value *, int> &bufferOf, int optimizerBegin);

/// Fills `plan`'s mesh description, world size, communicator groups (for single: none; else every
/// group along each axis of degree > 1, and the dp groups always, so dp=1 plans keep their
/// trivial collectives) and rank table: rank r runs programs[programOf(coordOf(r))] on CPU 0.
/// Each program's `ranks` lists its ranks. Errors: programOf out of range, a program no rank
/// runs.
Status layoutRanks(Plan &plan, const Mesh &mesh,
                   const std::function<int(const MeshCoord &)> &programOf);

/// Uneven tensor-parallel splits (ir::splitRange) give the ranks of a tp group different shapes,
/// so the training passes and lowering run once per class of tp indices with the same range
/// lengths (TrainingConfig::tpIndex, tpUnevenSizes): `plan` was lowered for index 0 and
/// `*others[t - 1]` for index t's class, all of the same mesh (one plan may serve several
/// indices; nullptr: index 0's class, whose ranks keep their programs). Each rank with tp index
/// t > 0 takes its program from *others[t - 1] (shared constants renumbered into `plan`'s
/// list), identical programs are stored once, and the result is validated. Errors: plans of
/// different meshes or world sizes.
Status mergeTensorParallelPlans(Plan &plan, const std::vector<const Plan *> &others);

} // namespace dtc::plan
