// ai.dtc.ReduceScatter: the gradient reduce-scatter of ZeRO stage 2 (--zero 2; Rajbhandari et
// al. 2020, passes/DataParallel.cpp and passes/Optimizer.cpp), one node per flattened gradient
// bucket. Like AllReduce it has no CPU kernel: lowering turns it into an asynchronous
// REDUCE_SCATTER Collective instruction and a Wait before the first instruction that needs it.
#include "ops/comm/Collective.h"

#include "ops/Gradient.h"
#include "ops/OpDef.h"
#include "ops/Sharding.h"

namespace dtc::ops {

/// ReduceScatter(X[parts * s]) -> Y[s]: X is `parts` equal blocks of s elements; rank r of the
/// group gets block r of the reduction over the group (MPI_Reduce_scatter_block order).
/// Attributes: op "sum" | "mean" (default mean), group (mesh axis, default "dp"), parts (the
/// group size, required), bucket (index, for names). X is one-dimensional and its length a
/// multiple of parts (the passes pad buckets with zeros). Gradient: only for the
/// tensor-parallel sum (group tp, op sum), which --sequence-parallel inserts before autodiff in
/// place of an all-reduce (Korthikanti et al. 2022, g): what follows holds rank r's block, so
/// X's gradient is every rank's block of Y's gradient, an all-gather, the same on every rank.
/// ZeRO's reduce-scatters are inserted after autodiff and have none.
OpDef defineReduceScatter() {
  OpDef d;
  d.name = "ReduceScatter";
  d.domain = ir::kDtcDomain;
  d.version(1)
      .in("X", "T")
      .out("Y", "T")
      .attr("op", ir::AttrKind::kString)
      .attr("group", ir::AttrKind::kString)
      .attr("parts", ir::AttrKind::kInt, true)
      .attr("bucket", ir::AttrKind::kInt)
      .type("T", bit(ir::DType::kFloat32) | bit(ir::DType::kFloat64));
  d.infer = [](InferenceContext &ctx) -> Status {
    const std::string op = ctx.node().attrString("op", "mean");
    if (op != "sum" && op != "mean")
      return ctx.error("op '" + op + "' is not sum or mean");
    const int64_t parts = ctx.node().attrInt("parts", 0);
    if (parts < 1)
      return ctx.error("parts " + std::to_string(parts) + " is not positive");
    const ir::Shape &x = ctx.inputShape(0);
    if (!x.hasRank() || x.rank() != 1 || !x[0].isStatic())
      return ctx.error("input must be one-dimensional with a static length, got " + x.str());
    if (x[0].value() % parts != 0)
      return ctx.error("input length " + std::to_string(x[0].value()) +
                       " is not a multiple of parts " + std::to_string(parts));
    ctx.setOutputDType(0, ctx.inputDType(0));
    ctx.setOutputShape(0, ir::Shape({ir::Dim::fixed(x[0].value() / parts)}));
    return Status::ok();
  };
  d.gradient = [](GradientContext &ctx) -> Status {
    if (ctx.node().attrString("group", "dp") != "tp" || ctx.node().attrString("op", "") != "sum")
      return ctx.error("only the tensor-parallel sum (group tp, op sum) is differentiable");
    if (!ctx.needsGrad(0) || !ctx.outputGrad(0))
      return Status::ok();
    const int64_t parts = ctx.node().attrInt("parts", 0);
    DTC_ASSIGN_OR_RETURN(
        ir::Value * g, ctx.emit1("AllGather", {ctx.outputGrad(0)},
                                 {{"group", ir::Attribute("tp")}, {"parts", ir::Attribute(parts)}},
                                 ir::kDtcDomain));
    const ir::Shape &x = ctx.input(0)->shape();
    if (!x.isStatic())
      return ctx.error("needs a static input shape");
    DTC_ASSIGN_OR_RETURN(g, ctx.reshapeTo(g, x.staticSizes()));
    ctx.setInputGrad(0, g);
    return Status::ok();
  };
  d.cost = dataMovementCost();
  d.sharding = replicatedSharding();
  return d;
}

} // namespace dtc::ops
