// What the lowering files share (compiler/plan/Lowering.cpp, PipelineLowering.cpp); not part
// of the lowering's interface (Lowering.h).
#pragma once

#include "compiler/ir/ParameterHost.h"
#include "compiler/plan/Lowering.h"

#include <functional>

namespace dtc::plan::detail {

/// Lowers `graph` to a plan with one program; `cfg` is given for training plans (whose roles
/// lowering reads from graph.training()). With
/// `finish`, the plan is complete (one program for every rank, see finishPlan); without, it
/// holds the program and the hyperparameters only (pipelines lower one program per stage).
Expected<Plan> lowerProgram(const ir::Graph &graph, const LowerOptions &opts,
                            const TrainingConfig *cfg, bool finish);

/// The parts of a plan that do not depend on one program: mesh and rank table (rank r runs
/// programs[programOf(coordOf(r))]), data-parallel hyperparameters, the model reference with
/// its checksums; then the runtime's own validation. Errors: collectives under `single`,
/// tensor parallelism, an unreadable model file, a plan validation would refuse.
Status finishPlan(Plan &plan, const ir::Graph &graph, const LowerOptions &opts,
                  const TrainingConfig *cfg, int numCollectives,
                  const std::function<int(const MeshCoord &)> &programOf);

/// One program per pipeline stage (cfg.mesh.pp > 1; a rank's pp coordinate picks its program,
/// dp replicas share their stage's). Errors name the stage: a stage with nothing to do, a value
/// read across stages without a transfer, a send without its receive.
Expected<Plan> lowerPipeline(const ir::Graph &graph, const TrainingConfig &cfg,
                             const LowerOptions &opts);

/// ps=S:W and cs=N (cfg.mesh.hasParameterHost()): the workers' program (every rank runs
/// programs[0]: forward and backward, no optimizer part) and one program per server (its
/// shards' updates, gradients bound as inputs), with the plan's parameter_host table. Errors
/// name the server.
Expected<Plan> lowerParameterHost(const ir::Graph &graph, const ir::ParameterHost &host,
                                  const TrainingConfig &cfg, const LowerOptions &opts);

} // namespace dtc::plan::detail
