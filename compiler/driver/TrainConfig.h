// Training options of dtc-compile: the --config JSON file (keys are the flag names without the
// leading dashes: {"loss": "mse", "optimizer": "adam", "lr": 1e-3, "betas": [0.9, 0.999],
// "batch-size": 32, ...}), validation of every value, and the training compile pipeline
// (training-mode -> attach-loss -> autodiff -> optimizer) run on an imported, dim-bound graph.
#pragma once

#include "compiler/ir/Graph.h"
#include "compiler/support/Diagnostics.h"
#include "compiler/support/Status.h"
#include "passes/PassManager.h"
#include "compiler/support/TrainingConfig.h"

#include <string>

namespace dtc::driver {

/// Reads `path` into `cfg` (and `strategy`). Errors: "<path>: ..." for unreadable or malformed
/// JSON, a file that is not regular (FIFO, device) or over 1 MiB, "<path>: key 'x': ..." for an
/// unknown key or a value of the wrong type.
Status readTrainConfigFile(const std::string &path, TrainingConfig &cfg,
                           std::string &strategy);

/// Sets cfg.dataParallel() from a --strategy value: "single" (0) or "dp=N" (N in [1, 65536]).
/// Errors name the flag and list the available strategies.
Status parseStrategy(const std::string &strategy, TrainingConfig &cfg);

/// A byte count as --device-memory takes it: digits with an optional binary suffix K, M, G or T
/// (or KiB, MiB, GiB, TiB: powers of 1024), e.g. "512MiB", "16G", "1073741824". Errors name
/// `flag`: an empty, malformed, zero or overflowing size.
Expected<uint64_t> parseByteSize(const std::string &text, const std::string &flag);

/// Checks ranges and names: loss, optimizer, lr >= 0, momentum in [0, 1), betas in [0, 1),
/// eps > 0, weight decay >= 0, schedule name and its parameters, clip >= 0, accumulation >= 1,
/// nesterov only with momentum > 0 (as torch.optim.SGD). Errors name the flag ("--lr: ...").
Status validateTrainConfig(const TrainingConfig &cfg);

/// Runs training-mode, attach-loss, pipeline (pp only), autodiff, data-parallel (dp=N only),
/// optimizer and pipeline-comm (pp only) on `graph` (shapes bound to the per-rank micro-batch,
/// cfg.rankBatchSize()) under a pass manager, filling graph.training(). `verifyEach` runs the IR
/// verifier after each pass; `printAfter` (pass names or "all") prints the IR after those
/// passes to `printStream` (stdout when null); `timePasses` reports each pass's time on
/// `timeStream` (stderr when null).
Status runTrainingPasses(ir::Graph &graph, TrainingConfig &cfg, Diagnostics &diags, bool verifyEach,
                         const passes::PassManagerOptions &report = {});

} // namespace dtc::driver
