// ai.dtc.AllReduce: the gradient all-reduce the data-parallel pass (passes/DataParallel.cpp)
// inserts, one node per gradient bucket. It has no CPU kernel: lowering turns it into an
// asynchronous Collective instruction of the plan (run by the runtime's communicator) and a Wait
// before the first instruction that needs its results.
#include "ops/comm/Collective.h"

#include "ops/Gradient.h"
#include "ops/OpDef.h"
#include "ops/Sharding.h"

namespace dtc::ops {

bool isCollectiveOp(const std::string &domain, const std::string &op) {
  return domain == ir::kDtcDomain && (op == "AllReduce" || op == "AllGather" ||
                                      op == "ReduceScatter" || op == "Send" || op == "Recv");
}

/// AllReduce(X1..Xk) -> (Y1..Yk): Yi = the reduction over the group of Xi (same type).
/// Attributes: op "sum" | "mean" | "max" (default mean), group (communicator group name, default
/// "dp"), bucket (index, for names). Gradient: only for the tensor-parallel sum (group "tp",
/// inserted before autodiff): what follows it is replicated, so every rank holds the same
/// output gradient and the input's is that gradient (Megatron's g). Data-parallel all-reduces
/// are inserted after autodiff and have none. The max (vocabulary-parallel cross-entropy's
/// global max of the logits, passes/TensorParallel.cpp) is a constant for the gradient, as in
/// Megatron-LM: autodiff stops at its output (passes/Autodiff.cpp), so its rule is never asked.
OpDef defineAllReduce() {
  OpDef d;
  d.name = "AllReduce";
  d.domain = ir::kDtcDomain;
  OpVersion &v = d.version(1)
                     .variadicIn("X", "T")
                     .attr("op", ir::AttrKind::kString)
                     .attr("group", ir::AttrKind::kString)
                     .attr("bucket", ir::AttrKind::kInt)
                     .type("T", bit(ir::DType::kFloat32) | bit(ir::DType::kFloat64));
  v.outputs.push_back(ArgSpec{"Y", "T", false, true});
  d.infer = [](InferenceContext &ctx) -> Status {
    if (ctx.node().numOutputs() != ctx.numInputs())
      return ctx.error("needs one output per input, got " + std::to_string(ctx.numInputs()) +
                       " inputs and " + std::to_string(ctx.node().numOutputs()) + " outputs");
    const std::string op = ctx.node().attrString("op", "mean");
    if (op != "sum" && op != "mean" && op != "max")
      return ctx.error("op '" + op + "' is not sum, mean or max");
    for (size_t i = 0; i < ctx.numInputs(); ++i) {
      ctx.setOutputDType(i, ctx.inputDType(i));
      ctx.setOutputShape(i, ctx.inputShape(i));
    }
    return Status::ok();
  };
  // Local cost only: 0 FLOPs (the reduction runs in the communicator, whose cost the
  // strategy model counts from the bytes), every input read and every output written.
  d.gradient = [](GradientContext &ctx) -> Status {
    if (ctx.node().attrString("group", "dp") != "tp" || ctx.node().attrString("op", "") != "sum")
      return ctx.error("only the tensor-parallel sum (group tp, op sum) is differentiable");
    for (size_t i = 0; i < ctx.node().numInputs(); ++i)
      if (ctx.needsGrad(i) && ctx.outputGrad(i))
        ctx.setInputGrad(i, ctx.outputGrad(i));
    return Status::ok();
  };
  d.cost = dataMovementCost();
  d.sharding = replicatedSharding();
  return d;
}

} // namespace dtc::ops
