// ReduceProd: product over the given axes. ONNX ReduceProd-1/11 (axes attribute; 11 allows
// negative axes), -13 (bfloat16), -18 (axes become an optional int64 input, plus
// noop_with_empty_axes). Canonical: the opset-18 input form. Folds.
#include "ops/reduction/Reduce.h"

namespace dtc::ops {

namespace {

/// dX_i = dY * prod_{j != i} X_j, zero-safe (no division by a zero element), as PyTorch's
/// prod_backward: with P = the product of the slice's non-zero elements and z = its count of
/// zeros, the local gradient is P / X_i when z = 0; P at the zero element and 0 elsewhere when
/// z = 1; 0 everywhere when z >= 2.
Status prodGradient(GradientContext &ctx) {
  DTC_ASSIGN_OR_RETURN(std::vector<int64_t> axes, reducedAxes(ctx));
  return reduceLocalGradient(ctx, [&](ir::Value *x, ir::Value *) -> Expected<ir::Value *> {
    const std::map<std::string, ir::Attribute> keep = {
        {"keepdims", ir::Attribute(int64_t{1})},
        {"noop_with_empty_axes", ir::Attribute(int64_t{0})}};
    ir::Value *zero = ctx.constantF32(0.f), *one = ctx.constantF32(1.f);
    ir::Value *axesValue = ctx.constantI64s(axes);
    DTC_ASSIGN_OR_RETURN(ir::Value * isZero, ctx.emit1("Equal", {x, zero}));
    DTC_ASSIGN_OR_RETURN(ir::Value * nonZero, ctx.emit1("Where", {isZero, one, x}));
    DTC_ASSIGN_OR_RETURN(ir::Value * p, ctx.emit1("ReduceProd", {nonZero, axesValue}, keep));
    DTC_ASSIGN_OR_RETURN(ir::Value * zeros,
                         ctx.emit1("Cast", {isZero}, {{"to", ir::Attribute(int64_t{1})}}));
    DTC_ASSIGN_OR_RETURN(ir::Value * z, ctx.emit1("ReduceSum", {zeros, axesValue}, keep));
    DTC_ASSIGN_OR_RETURN(ir::Value * noZero, ctx.emit1("Equal", {z, zero}));
    DTC_ASSIGN_OR_RETURN(ir::Value * oneZero, ctx.emit1("Equal", {z, one}));
    DTC_ASSIGN_OR_RETURN(ir::Value * others, ctx.emit1("Div", {p, nonZero}));
    DTC_ASSIGN_OR_RETURN(ir::Value * atZero, ctx.emit1("Where", {isZero, p, zero}));
    DTC_ASSIGN_OR_RETURN(ir::Value * single, ctx.emit1("Where", {oneZero, atZero, zero}));
    return ctx.emit1("Where", {noZero, others, single});
  });
}

} // namespace

OpDef defineReduceProd() {
  OpDef d = reduceDef("ReduceProd");
  d.fold = [](FoldContext &ctx) {
    return foldReduce(
        ctx, {1.0, [](double a, double x) { return a * x; }, [](double a, int64_t) { return a; }});
  };
  d.gradient = prodGradient;
  // One multiply per input element.
  d.cost = reductionCost();
  return d;
}

} // namespace dtc::ops
