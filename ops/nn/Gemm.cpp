// Gemm: Y = alpha * A' * B' + beta * C with A' = transA ? A^T : A, B' = transB ? B^T : B
// (onnx/docs/Operators.md#Gemm). Forms: 7 (C required), 9 (wider types), 11 (C optional),
// 13 (bfloat16). C broadcasts unidirectionally to (M, N). Gradient: two Gemm nodes for dA and
// dB (the transposes become Gemm's trans attributes), beta * ReduceSum(dY) for C.
#include "ops/OpDef.h"
#include "ops/Sharding.h"

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

// Gradient of Y = alpha * A' B' + beta * C (A' = A^T when transA, B' likewise):
//   dA' = alpha * dY B'^T, dB' = alpha * A'^T dY (matrix calculus of Y = A'B'), so
//   dA = transA ? alpha * B' dY^T : alpha * dY B'^T,
//   dB = transB ? alpha * dY^T A' : alpha * A'^T dY,
//   each one Gemm whose trans attributes absorb every transpose;
//   dC = beta * sum-to-shape(dY, C.shape) (unidirectional broadcasting undone by ReduceSum).
Status gemmGrad(GradientContext &ctx) {
  ir::Value *a = ctx.input(0), *b = ctx.input(1), *dy = ctx.outputGrad(0);
  if (!dy)
    return Status::ok();
  const ir::Node &node = ctx.node();
  const int64_t transA = node.attrInt("transA", 0) != 0, transB = node.attrInt("transB", 0) != 0;
  const float alpha = node.attrFloat("alpha", 1.0f), beta = node.attrFloat("beta", 1.0f);
  auto gemm = [&](ir::Value *x, ir::Value *y, int64_t tx, int64_t ty) {
    return ctx.emit1("Gemm", {x, y},
                     {{"alpha", ir::Attribute(alpha)},
                      {"beta", ir::Attribute(1.0f)},
                      {"transA", ir::Attribute(tx)},
                      {"transB", ir::Attribute(ty)}});
  };
  if (ctx.needsGrad(0)) {
    DTC_ASSIGN_OR_RETURN(ir::Value * g, transA ? gemm(b, dy, transB, 1) : gemm(dy, b, 0, !transB));
    ctx.setInputGrad(0, g);
  }
  if (ctx.needsGrad(1)) {
    DTC_ASSIGN_OR_RETURN(ir::Value * g, transB ? gemm(dy, a, 1, transA) : gemm(a, dy, !transA, 0));
    ctx.setInputGrad(1, g);
  }
  if (ctx.input(2) && ctx.needsGrad(2)) {
    DTC_ASSIGN_OR_RETURN(ir::Value * g, ctx.sumToShape(dy, ctx.input(2)->shape()));
    if (beta != 1.0f) {
      DTC_ASSIGN_OR_RETURN(g, ctx.emit1("Mul", {g, ctx.constantF32(beta)}));
    }
    ctx.setInputGrad(2, g);
  }
  return Status::ok();
}

} // namespace

namespace {

/// Gemm's Megatron splits (see MatMul): row-parallel when A is split on its contraction axis
/// (the bias is added once, after the all-reduce), column-parallel when B is split, or free and
/// kept split by the consumers, along N (the bias is split with it).
Status gemmSharding(ShardingContext &ctx) {
  const int64_t kA = ctx.node().attrInt("transA", 0) ? 0 : 1;
  const int64_t kB = ctx.node().attrInt("transB", 0) ? 1 : 0;
  const int64_t nB = 1 - kB;
  const ir::Sharding &sa = ctx.input(0), &sb = ctx.input(1);
  const int64_t T = ctx.parts();
  if (ctx.inputDims(0).size() != 2 || ctx.inputDims(1).size() != 2)
    return Status::ok();
  if (sa.isSplit() && sa.axis == kA && sa.blocks == 1 &&
      (ctx.isFreeWeight(1) || (sb.isSplit() && sb.axis == kB && sb.blocks == 1))) {
    ctx.require(0, sa);
    ctx.require(1, ir::Sharding::split(kB, T));
    ctx.setOutput(0, ir::Sharding::partial(T));
    if (ctx.hasInput(2))
      ctx.addAfterReduce(2);
    return Status::ok();
  }
  if (!sa.isReplicated())
    return Status::ok();
  std::optional<ir::Sharding> col;
  if (sb.isSplit() && sb.axis == nB)
    col = ir::Sharding::split(1, T, sb.blocks);
  else if (ctx.isFreeWeight(1))
    col = columnSplit(ctx, 0, 1, ctx.inputDims(1)[static_cast<size_t>(nB)]);
  if (!col)
    return Status::ok();
  ctx.requireReplicatedCopy(0);
  ctx.require(1, ir::Sharding::split(nB, T, col->blocks));
  if (ctx.hasInput(2)) {
    const std::vector<int64_t> &c = ctx.inputDims(2);
    if (!c.empty() && c.back() > 1)
      ctx.require(2, ir::Sharding::split(static_cast<int64_t>(c.size()) - 1, T, col->blocks));
  }
  ctx.setOutput(0, *col);
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
  d.gradient = gemmGrad;
  // A' is (M, K), B' is (K, N): 2 * M * N * K FLOPs for A' * B', plus M * N for the alpha scale
  // when alpha != 1, plus, when C is present, M * N for adding it and M * N for the beta scale
  // when beta != 1 (ONNX Gemm; the BLAS gemm count 2MNK + 2MN for alpha, beta != 1 and C).
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    const std::vector<int64_t> &a = ctx.inputDims(0);
    if (a.size() != 2)
      return ctx.error("A must be 2-D");
    double k = static_cast<double>(a[ctx.node().attrInt("transA", 0) != 0 ? 0 : 1]);
    double mn = ctx.outputElements(0);
    double flops = 2 * mn * k;
    if (ctx.node().attrFloat("alpha", 1.f) != 1.f)
      flops += mn;
    if (ctx.hasInput(2))
      flops += mn * (ctx.node().attrFloat("beta", 1.f) != 1.f ? 2 : 1);
    return ctx.withFlops(flops);
  };
  d.sharding = gemmSharding;
  return d;
}

} // namespace dtc::ops
