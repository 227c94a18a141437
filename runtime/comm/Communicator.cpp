// The backend-neutral part of the communicator (Communicator.h): request kind names and the
// blocking convenience forms, each one request through run().
#include "runtime/comm/Communicator.h"

#include <algorithm>

namespace dtc::rt {

const char *commKindName(CommKind kind) {
  switch (kind) {
  case CommKind::kAllReduce:
    return "all-reduce";
  case CommKind::kAllGather:
    return "all-gather";
  case CommKind::kReduceScatter:
    return "reduce-scatter";
  case CommKind::kBroadcast:
    return "broadcast";
  case CommKind::kSend:
    return "send";
  case CommKind::kRecv:
    return "recv";
  }
  return "request";
}

// --- Communicator's convenience forms: one request each --------------------------------------

namespace {
/// Bytes per element (1 for a dtype without a size: the request then fails naming the dtype).
size_t elementBytes(ir::DType t) {
  return static_cast<size_t>(std::max<int64_t>(1, ir::dtypeSize(t)));
}
/// A request of one operand: `in` (absent for a recv) and `out` (absent for a send) of `bytes`.
CommRequest oneOperand(CommKind kind, const std::string &what, const void *in, void *out,
                       size_t bytes) {
  CommRequest r;
  r.kind = kind;
  r.name = what;
  if (in)
    r.inputs = {in};
  if (out)
    r.outputs = {out};
  r.bytes = {bytes};
  return r;
}
} // namespace

uint64_t Communicator::allReduceAsync(AllReduceRequest request) {
  CommRequest r;
  r.kind = CommKind::kAllReduce;
  r.name = std::move(request.name);
  r.dtype = request.dtype;
  r.op = request.op;
  r.inputs = std::move(request.inputs);
  r.outputs = std::move(request.outputs);
  r.bytes = std::move(request.bytes);
  return submit(std::move(r));
}

Status Communicator::allReduceSum(double *data, size_t count, const std::string &what) {
  return allReduce(data, count, ir::DType::kFloat64, ReduceOp::kSum, what);
}

Status Communicator::allReduce(void *data, size_t count, ir::DType dtype, ReduceOp op,
                               const std::string &what) {
  CommRequest r = oneOperand(CommKind::kAllReduce, what, data, data, count * elementBytes(dtype));
  r.dtype = dtype;
  r.op = op;
  return run(std::move(r));
}

Status Communicator::broadcast(void *data, size_t bytes, int root, const std::string &what) {
  CommRequest r = oneOperand(CommKind::kBroadcast, what, data, data, bytes);
  r.peer = root;
  return run(std::move(r));
}

Status Communicator::allGather(const void *send, size_t bytes, void *recv,
                               const std::string &what) {
  return run(oneOperand(CommKind::kAllGather, what, send, recv, bytes));
}

Status Communicator::reduceScatter(const void *send, void *recv, size_t count, ir::DType dtype,
                                   ReduceOp op, const std::string &what) {
  CommRequest r =
      oneOperand(CommKind::kReduceScatter, what, send, recv, count * elementBytes(dtype));
  r.dtype = dtype;
  r.op = op;
  return run(std::move(r));
}

Status Communicator::send(const void *data, size_t bytes, int peer, int tag,
                          const std::string &what) {
  CommRequest r = oneOperand(CommKind::kSend, what, data, nullptr, bytes);
  r.peer = peer;
  r.tag = tag;
  return run(std::move(r));
}

Status Communicator::recv(void *data, size_t bytes, int peer, int tag, const std::string &what) {
  CommRequest r = oneOperand(CommKind::kRecv, what, nullptr, data, bytes);
  r.peer = peer;
  r.tag = tag;
  return run(std::move(r));
}

} // namespace dtc::rt
