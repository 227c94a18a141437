// Builds the parameter host of ps=S:W and cs=N (compiler/ir/ParameterHost.h) from a workers'
// training graph (training-mode, attach-loss and autodiff have run): shards the trained
// parameters, places them on the servers balanced by bytes, and runs the optimizer pass on each
// server's graph.
#pragma once

#include "compiler/ir/ParameterHost.h"
#include "compiler/support/Status.h"
#include "compiler/support/TrainingConfig.h"
#include "passes/PassManager.h"

#include <cstdint>
#include <vector>

namespace dtc::driver {

/// How many shards a parameter of `bytes` bytes and `rows` rows along axis 0 gets on `servers`
/// servers: floor(bytes / minShardBytes), clamped to [1, min(servers, rows)] (TensorFlow's
/// tf.distribute.experimental.partitioners.MinSizePartitioner). Rows split as evenly as they
/// can: the first rows % shards shards take one row more.
int64_t shardCount(int64_t bytes, int64_t rows, int64_t servers, int64_t minShardBytes);

/// Server of each shard, given their sizes in bytes and the parameter each belongs to:
/// largest first (ties in order), each on the least-loaded server (ties: lowest index) that
/// holds no other shard of its parameter (Graham's LPT rule; the shards of one parameter are
/// at most `servers`).
std::vector<int> placeShards(const std::vector<int64_t> &bytes, const std::vector<int> &parameter,
                             int servers);

/// The servers' graphs and the shard table for `worker` under cfg.mesh (ps: psServers servers;
/// cs: one host). Every trained parameter with a gradient is placed; the optimizer pass runs on
/// each server graph under `pm` (so --print-after optimizer shows them). Errors: a server left
/// without a parameter (more servers than shards), and the optimizer pass's own.
Expected<ir::ParameterHost> buildParameterHost(const ir::Graph &worker, const TrainingConfig &cfg,
                                               const passes::PassManagerOptions &pm);

} // namespace dtc::driver
