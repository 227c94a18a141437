// The parameter host of ps=S:W (parameter servers) and cs=N (central storage), DESIGN.md
// section 6: the workers' graph ends with the gradients, and each server has a graph of its own
// that applies the optimizer to the shards of the parameters it owns. Built by the driver
// (compiler/driver/ParameterHost.h), lowered to the servers' programs (plan::lowerTraining).
#pragma once

#include "compiler/ir/Graph.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dtc::ir {

/// Rows [begin, begin + rows) along axis 0 of the workers' trained parameter `parameter`
/// (all of it when `whole`), held by server `server` as its graph's trained parameter number
/// `serverParameter` (the value's name is `parameter` when whole, else "<parameter>/ps_shard<k>").
struct ParameterShardInfo {
  std::string parameter;
  int server = 0;
  int64_t begin = 0;
  int64_t rows = 1;
  bool whole = true;
  int serverParameter = 0;
};

/// Server s runs servers[s]: graph inputs "<shard value>/grad" (the gradient pushed for it),
/// dtc::lr and dtc::step; its training roles list its shards as parameters in `shards` order.
struct ParameterHost {
  std::vector<std::unique_ptr<Graph>> servers;
  std::vector<ParameterShardInfo> shards;
};

} // namespace dtc::ir
