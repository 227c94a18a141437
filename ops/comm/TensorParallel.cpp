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

namespace {

/// The gradient of TensorParallelCopy {sliced_axis = a, parts = T}: rank r's slice of Y's
/// gradient along a ([pre, S/T, post]), all-gathered ([T, pre, S/T, post]) and put back in
/// order ([pre, T, S/T, post] -> [pre, S, post]).
Status slicedCopyGrad(GradientContext &ctx) {
  const int64_t a = ctx.node().attrInt("sliced_axis", -1), T = ctx.node().attrInt("parts", 0);
  const ir::Shape &x = ctx.input(0)->shape();
  if (!x.isStatic() || a >= static_cast<int64_t>(x.rank()) || T < 1 ||
      x.staticSizes()[static_cast<size_t>(a)] % T != 0)
    return ctx.error("sliced_axis " + std::to_string(a) + " and parts " + std::to_string(T) +
                     " do not split " + x.str());
  ir::Value *rank = ctx.graph().findValue(ir::kTpRankInput);
  if (!rank)
    return ctx.error("needs the runtime input " + std::string(ir::kTpRankInput));
  const std::vector<int64_t> whole = x.staticSizes();
  const int64_t p = whole[static_cast<size_t>(a)] / T;
  std::vector<int64_t> base(static_cast<size_t>(p));
  for (int64_t j = 0; j < p; ++j)
    base[static_cast<size_t>(j)] = j;
  DTC_ASSIGN_OR_RETURN(ir::Value * first, ctx.emit1("Mul", {rank, ctx.constantI64s({p})}));
  DTC_ASSIGN_OR_RETURN(ir::Value * idx, ctx.emit1("Add", {ctx.constantI64s(base), first}));
  DTC_ASSIGN_OR_RETURN(ir::Value * local,
                       ctx.emit1("Gather", {ctx.outputGrad(0), idx}, {{"axis", ir::Attribute(a)}}));
  DTC_ASSIGN_OR_RETURN(ir::Value * g,
                       ctx.emit1("AllGather", {local},
                                 {{"group", ir::Attribute("tp")}, {"parts", ir::Attribute(T)}},
                                 ir::kDtcDomain));
  if (a > 0) {
    std::vector<int64_t> perm;
    for (int64_t d = 1; d <= a; ++d)
      perm.push_back(d);
    perm.push_back(0);
    for (int64_t d = a + 1; d <= static_cast<int64_t>(whole.size()); ++d)
      perm.push_back(d);
    DTC_ASSIGN_OR_RETURN(g, ctx.emit1("Transpose", {g}, {{"perm", ir::Attribute(perm)}}));
  }
  DTC_ASSIGN_OR_RETURN(g, ctx.reshapeTo(g, whole));
  ctx.setInputGrad(0, g);
  return Status::ok();
}

} // namespace

/// TensorParallelCopy(X) -> Y = X (a view; CPU kernel in ops/cpu/Kernels.def). Marks a
/// replicated value read by a split computation: the gradient each rank computes for it is a
/// partial sum, so the gradient is all-reduced (sum) over the tp group. With sliced_axis = a
/// >= 0 and parts = T, Y is read only through rank r's slice r of T along axis a (where
/// --sequence-parallel enters its region: Megatron-LM's scatter_to_sequence_parallel_region),
/// so each rank's gradient is zero outside its slice and X's is the all-gather of the slices,
/// half an all-reduce's traffic.
OpDef defineTensorParallelCopy() {
  OpDef d;
  d.name = "TensorParallelCopy";
  d.domain = ir::kDtcDomain;
  d.version(1)
      .in("X", "T")
      .out("Y", "T")
      .attr("sliced_axis", ir::AttrKind::kInt)
      .attr("parts", ir::AttrKind::kInt)
      .type("T", kFloatTypes);
  d.infer = [](InferenceContext &ctx) -> Status {
    ctx.setOutputShape(0, ctx.inputShape(0));
    return Status::ok();
  };
  d.gradient = [](GradientContext &ctx) -> Status {
    if (!ctx.needsGrad(0) || !ctx.outputGrad(0))
      return Status::ok();
    if (ctx.node().attrInt("sliced_axis", -1) >= 0)
      return slicedCopyGrad(ctx);
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
/// (MPI_Allgather order). Attributes: group (mesh axis, "tp"), parts (the group size),
/// reduce_scatter_grad (default 0). No CPU kernel: lowering makes it an ALL_GATHER collective.
/// Gradient: Y's gradient is the same on every rank (what follows is replicated), so X's is its
/// row r = dtc::tp_rank. With reduce_scatter_grad = 1 what follows is a split computation
/// (--sequence-parallel: the gathered sequence feeds a column-parallel layer), so each rank
/// holds a partial sum of Y's gradient and X's is row r of the sum over the group: a
/// reduce-scatter (Megatron-LM's gather_from_sequence_parallel_region with
/// tensor_parallel_output_grad; Korthikanti et al. 2022, section 4.2.2, g-bar).
OpDef defineAllGather() {
  OpDef d;
  d.name = "AllGather";
  d.domain = ir::kDtcDomain;
  d.version(1)
      .in("X", "T")
      .out("Y", "T")
      .attr("group", ir::AttrKind::kString)
      .attr("parts", ir::AttrKind::kInt, true)
      .attr("reduce_scatter_grad", ir::AttrKind::kInt)
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
    if (ctx.node().attrInt("reduce_scatter_grad", 0) != 0) {
      const ir::Shape &x = ctx.input(0)->shape();
      const int64_t parts = ctx.node().attrInt("parts", 0);
      if (!x.isStatic() || parts < 1)
        return ctx.error("reduce_scatter_grad needs a static input shape and parts >= 1");
      int64_t n = parts;
      for (int64_t d : x.staticSizes())
        n *= d;
      DTC_ASSIGN_OR_RETURN(ir::Value * flat, ctx.reshapeTo(ctx.outputGrad(0), {n}));
      DTC_ASSIGN_OR_RETURN(
          ir::Value * g, ctx.emit1("ReduceScatter", {flat},
                                   {{"op", ir::Attribute("sum")},
                                    {"group", ir::Attribute(ctx.node().attrString("group", "tp"))},
                                    {"parts", ir::Attribute(parts)}},
                                   ir::kDtcDomain));
      DTC_ASSIGN_OR_RETURN(g, ctx.reshapeTo(g, x.staticSizes()));
      ctx.setInputGrad(0, g);
      return Status::ok();
    }
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
