// Collective ops of training graphs (ops/comm/): nodes that become communication instructions of
// the plan rather than kernel calls.
#pragma once

#include <string>

namespace dtc::ops {

/// True for ops lowered to plan Collective instructions (ai.dtc.AllReduce), which have no CPU
/// kernel.
bool isCollectiveOp(const std::string &domain, const std::string &op);

} // namespace dtc::ops
