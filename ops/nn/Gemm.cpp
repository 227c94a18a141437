// Gemm: Y = alpha * A' * B' + beta * C with A' = transA ? A^T : A, B' = transB ? B^T : B
// (onnx/docs/Operators.md#Gemm). Forms: 7 (C required), 9 (wider types), 11 (C optional),
// 13 (bfloat16). C broadcasts unidirectionally to (M, N).
#include "ops/OpDef.h"

namespace dtc::ops {

namespace {

Status inferGemm(InferenceContext &ctx) {
  const ir::Shape &a = ctx.inputShape(0);
  const ir::Shape &b = ctx.inputShape(1);
  if ((a.hasRank() && a.rank() != 2) || (b.hasRank() && b.rank() != 2))
    return ctx.error("A and B must be 2-D, got A " + a.str() + " and B " + b.str());
  bool transA = ctx.node().attrInt("transA", 0) != 0;
  bool transB = ctx.node().attrInt("transB", 0) != 0;
  ir::Dim m, ka, kb, n;
  if (a.hasRank()) {
    m = a[transA ? 1 : 0];
    ka = a[transA ? 0 : 1];
  }
  if (b.hasRank()) {
    kb = b[transB ? 1 : 0];
    n = b[transB ? 0 : 1];
  }
  bool kDiffer = ka.isStatic() && kb.isStatic() && ka.value() != kb.value();
  if (kDiffer)
    return ctx.error("inner dimensions do not match: A " + a.str() + (transA ? " (transA)" : "") +
                     " has K=" + ka.str() + ", B " + b.str() + (transB ? " (transB)" : "") +
                     " has K=" + kb.str());
  if (ctx.hasInput(2) && ctx.inputShape(2).hasRank()) {
    // Unidirectional broadcasting of C to (M, N) (onnx/docs/Broadcasting.md).
    const ir::Shape &c = ctx.inputShape(2);
    if (c.rank() > 2)
      return ctx.error("C " + c.str() + " cannot be broadcast to (M, N): rank > 2");
    const ir::Dim *target[2] = {&m, &n};
    for (size_t i = 0; i < c.rank(); ++i) {
      const ir::Dim &cd = c[i];
      const ir::Dim &td = *target[2 - c.rank() + i];
      if (cd.isStatic() && cd.value() != 1 && td.isStatic() && td.value() != cd.value())
        return ctx.error("C " + c.str() + " cannot be broadcast to (M, N) = (" + m.str() + ", " +
                         n.str() + ")");
    }
  }
  ctx.setOutputShape(0, ir::Shape({m, n}));
  return Status::ok();
}

} // namespace

OpDef defineGemm() {
  OpDef d;
  d.name = "Gemm";
  constexpr TypeMask kTypes = kFloatTypes | bit(ir::DType::kInt32) | bit(ir::DType::kInt64) |
                              bit(ir::DType::kUInt32) | bit(ir::DType::kUInt64);
  d.version(7)
      .in("A", "T")
      .in("B", "T")
      .in("C", "T")
      .out("Y", "T")
      .attr("alpha", ir::AttrKind::kFloat)
      .attr("beta", ir::AttrKind::kFloat)
      .attr("transA", ir::AttrKind::kInt)
      .attr("transB", ir::AttrKind::kInt)
      .type("T", kTypes);
  d.version(11).inputs[2].optional = true;
  d.infer = inferGemm;
  return d;
}

} // namespace dtc::ops
