// The tensor-parallel collectives the tensor-parallel pass (passes/TensorParallel.cpp) inserts
// before autodiff, with their gradient rules: Megatron-LM's f (TensorParallelCopy: identity
// forward, all-reduce backward) and g (AllReduce sum over tp: all-reduce forward, identity
// backward) operators (Shoeybi et al. 2019, figure 3), and AllGather (backward: each rank keeps
// the slice it contributed).
#include "compiler/ir/Training.h"
#include "ops/Gradient.h"
#include "ops/OpDef.h"
#include "ops/Sharding.h"
#include "ops/comm/Collective.h"

namespace dtc::ops {

/// TensorParallelCopy(X) -> Y = X (a view; CPU kernel in ops/cpu/Kernels.def). Marks a
/// replicated value read by a split computation: the gradient each rank computes for it is a
/// partial sum, so the gradient is all-reduced (sum) over the tp group.
OpDef defineTensorParallelCopy() {
  OpDef d;
  d.name = "TensorParallelCopy";
  d.domain = ir::kDtcDomain;
  d.version(1).in("X", "T").out("Y", "T").type("T", kFloatTypes);
  d.infer = [](InferenceContext &ctx) -> Status {
    ctx.setOutputShape(0, ctx.inputShape(0));
    return Status::ok();
  };
  d.gradient = [](GradientContext &ctx) -> Status {
    if (!ctx.needsGrad(0) || !ctx.outputGrad(0))
      return Status::ok();
    DTC_ASSIGN_OR_RETURN(ir::Value * g,
                         ctx.emit1("AllReduce", {ctx.outputGrad(0)},
                                   {{"op", ir::Attribute("sum")}, {"group", ir::Attribute("tp")}},
                                   ir::kDtcDomain));
    ctx.setInputGrad(0, g);
    return Status::ok();
  };
  d.cost = viewCost();
  d.sharding = replicatedSharding();
  return d;
}

/// AllGather(X) -> Y[parts, X dims...]: rank r's X is Y[r] on every rank of the group
/// (MPI_Allgather order). Attributes: group (mesh axis, "tp"), parts (the group size). No CPU
/// kernel: lowering makes it an ALL_GATHER collective. Gradient: Y's gradient is the same on
/// every rank (what follows is replicated), so X's is its row r = dtc::tp_rank.
OpDef defineAllGather() {
  OpDef d;
  d.name = "AllGather";
  d.domain = ir::kDtcDomain;
  d.version(1)
      .in("X", "T")
      .out("Y", "T")
      .attr("group", ir::AttrKind::kString)
      .attr("parts", ir::AttrKind::kInt, true)
      .type("T", kNumericTypes | kBoolType);
  d.infer = [](InferenceContext &ctx) -> Status {
    const int64_t parts = ctx.node().attrInt("parts", 0);
    if (parts < 1)
      return ctx.error("parts " + std::to_string(parts) + " is not positive");
    std::vector<ir::Dim> dims{ir::Dim::fixed(parts)};
    for (const ir::Dim &x : ctx.inputShape(0).dims())
      dims.push_back(x);
    ctx.setOutputShape(0, ir::Shape(dims));
    return Status::ok();
  };
  d.gradient = [](GradientContext &ctx) -> Status {
    if (!ctx.needsGrad(0) || !ctx.outputGrad(0))
      return Status::ok();
    ir::Value *rank = ctx.graph().findValue(ir::kTpRankInput);
    if (!rank)
      return ctx.error("needs the runtime input " + std::string(ir::kTpRankInput));
    DTC_ASSIGN_OR_RETURN(ir::Value * g, ctx.emit1("Gather", {ctx.outputGrad(0), rank},
                                                  {{"axis", ir::Attribute(int64_t{0})}}));
    ctx.setInputGrad(0, g);
    return Status::ok();
  };
  d.cost = dataMovementCost();
  d.sharding = replicatedSharding();
  return d;
}

} // namespace dtc::ops
