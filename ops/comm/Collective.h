// Collective ops of training graphs (ops/comm/): nodes that become communication instructions of
// the plan rather than kernel calls.
#pragma once

#include <cstdint>
#include <string>

namespace dtc::ops {

/// The largest Send/Recv tag: MPI guarantees tags up to 32767 (MPI_TAG_UB).
inline constexpr int64_t kMaxTransferTag = 32767;

/// True for ops lowered to plan Collective instructions (ai.dtc.AllReduce, Send, Recv), which
/// have no CPU kernel.
bool isCollectiveOp(const std::string &domain, const std::string &op);

} // namespace dtc::ops
