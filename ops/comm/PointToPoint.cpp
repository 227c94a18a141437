// ai.dtc.Send and ai.dtc.Recv: the point-to-point transfers the pipeline pass
// (passes/Pipeline.cpp) inserts where a value crosses from one stage to another. Like
// AllReduce they have no CPU kernel: lowering turns each into an asynchronous Collective
// instruction (SEND or RECV on the rank's pp group) and a Wait before the first instruction
// that needs it (a receive's result) or that would overwrite it (a send's operand).
#include "ops/comm/Collective.h"

#include "ops/OpDef.h"
#include "ops/Sharding.h"

namespace dtc::ops {

namespace {

constexpr TypeMask kTransferTypes = kNumericTypes | kBoolType;

Status checkPeerAndTag(InferenceContext &ctx) {
  const int64_t peer = ctx.node().attrInt("peer", -1);
  const int64_t tag = ctx.node().attrInt("tag", -1);
  if (peer < 0)
    return ctx.error("peer " + std::to_string(peer) + " is not a stage");
  if (peer == ctx.node().stage())
    return ctx.error("peer " + std::to_string(peer) + " is the node's own stage");
  if (tag < 0 || tag > kMaxTransferTag)
    return ctx.error("tag " + std::to_string(tag) + " is not in [0, " +
                     std::to_string(kMaxTransferTag) + "]");
  return Status::ok();
}

} // namespace

/// Send(X) -> (): X goes to stage `peer` (an index in the pp group), matched there by the Recv
/// with the same `tag`. Attributes: peer, tag (both required).
OpDef defineSend() {
  OpDef d;
  d.name = "Send";
  d.domain = ir::kDtcDomain;
  d.version(1)
      .in("X", "T")
      .attr("peer", ir::AttrKind::kInt, true)
      .attr("tag", ir::AttrKind::kInt, true)
      .type("T", kTransferTypes);
  d.infer = [](InferenceContext &ctx) -> Status {
    if (ctx.node().numOutputs() != 0)
      return ctx.error("has no outputs, got " + std::to_string(ctx.node().numOutputs()));
    return checkPeerAndTag(ctx);
  };
  // Reads its operand once; the transfer itself is the communicator's.
  d.cost = dataMovementCost();
  d.sharding = replicatedSharding();
  return d;
}

/// Recv() -> Y: Y (dtype `dtype`, an ir::DType number, static shape `shape`) comes from stage
/// `peer`'s Send with the same `tag`. Attributes: peer, tag, dtype, shape (all required).
OpDef defineRecv() {
  OpDef d;
  d.name = "Recv";
  d.domain = ir::kDtcDomain;
  d.version(1)
      .out("Y", "T")
      .attr("peer", ir::AttrKind::kInt, true)
      .attr("tag", ir::AttrKind::kInt, true)
      .attr("dtype", ir::AttrKind::kInt, true)
      .attr("shape", ir::AttrKind::kInts, true)
      .type("T", kTransferTypes);
  d.infer = [](InferenceContext &ctx) -> Status {
    DTC_RETURN_IF_ERROR(checkPeerAndTag(ctx));
    const int64_t dtype = ctx.node().attrInt("dtype", 0);
    const ir::DType t = static_cast<ir::DType>(dtype);
    if (dtype <= 0 || dtype > 31 || !(kTransferTypes & bit(t)))
      return ctx.error("dtype " + std::to_string(dtype) + " cannot be transferred");
    const std::vector<int64_t> shape = ctx.node().attrInts("shape");
    for (int64_t s : shape)
      if (s < 0)
        return ctx.error("shape has a negative size " + std::to_string(s));
    ctx.setOutputDType(0, t);
    ctx.setOutputShape(0, ir::Shape::ofStatic(shape));
    return Status::ok();
  };
  d.cost = dataMovementCost();
  d.sharding = replicatedSharding();
  return d;
}

} // namespace dtc::ops
