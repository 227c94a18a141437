// MatMul: numpy-style matrix product (onnx/docs/Operators.md#MatMul). 1-D operands are promoted
// (A: [K] -> [1,K], B: [K] -> [K,1]) and the added axis removed from the result; leading batch
// axes broadcast. The form is the same in every opset (1, 9, 13 only widen the types).
// Gradient: dA = dY @ B^T, dB = A^T @ dY on ai.dtc.MatMulT (transposes read through strides).
#include "ops/OpDef.h"
#include "ops/ShapeHelpers.h"
#include "ops/Sharding.h"

#include <functional>
#include <numeric>

namespace dtc::ops {

namespace {

// Two contraction sizes conflict only when both are static and differ (distinct symbols may
// still be equal at run time).
bool dimsCompatible(const ir::Dim &a, const ir::Dim &b) {
  return !(a.isStatic() && b.isStatic() && a.value() != b.value());
}

Status inferMatMul(InferenceContext &ctx) {
  const ir::Shape &a = ctx.inputShape(0);
  const ir::Shape &b = ctx.inputShape(1);
  if (!a.hasRank() || !b.hasRank()) {
    ctx.setOutputShape(0, ir::Shape::unknownRank());
    return Status::ok();
  }
  if (a.rank() == 0 || b.rank() == 0)
    return ctx.error("MatMul operands must have rank >= 1, got A " + a.str() + " and B " + b.str());
  std::vector<ir::Dim> da = a.dims(), db = b.dims();
  bool aVector = da.size() == 1, bVector = db.size() == 1;
  if (aVector)
    da.insert(da.begin(), ir::Dim::fixed(1));
  if (bVector)
    db.push_back(ir::Dim::fixed(1));
  const ir::Dim &ka = da.back();
  const ir::Dim &kb = db[db.size() - 2];
  if (!dimsCompatible(ka, kb))
    return ctx.error("inner dimensions do not match: A " + a.str() + " has K=" + ka.str() + ", B " +
                     b.str() + " has K=" + kb.str());
  ir::Shape batchA(std::vector<ir::Dim>(da.begin(), da.end() - 2));
  ir::Shape batchB(std::vector<ir::Dim>(db.begin(), db.end() - 2));
  DTC_ASSIGN_OR_RETURN(ir::Shape batch, broadcastShapes({batchA, batchB}, ctx.node().where()));
  std::vector<ir::Dim> out = batch.dims();
  if (!aVector)
    out.push_back(da[da.size() - 2]);
  if (!bVector)
    out.push_back(db.back());
  ctx.setOutputShape(0, ir::Shape(std::move(out)));
  return Status::ok();
}

int64_t product(const std::vector<int64_t> &v) {
  return std::accumulate(v.begin(), v.end(), int64_t{1}, std::multiplies<int64_t>());
}

/// MatMulT(a, b) with the given transposes (ops/training/NNGradMatMul.cpp).
Expected<ir::Value *> matmulT(GradientContext &ctx, ir::Value *a, ir::Value *b, bool transA,
                              bool transB) {
  return ctx.emit1("MatMulT", {a, b},
                   {{"transA", ir::Attribute(int64_t{transA})},
                    {"transB", ir::Attribute(int64_t{transB})},
                    {"alpha", ir::Attribute(1.0f)}},
                   "ai.dtc");
}

// Gradient of Y = A @ B (numpy matmul). With A2 = A promoted to [batchA..., M, K] (a 1-D A is
// [1, K]), B2 to [batchB..., K, N] (a 1-D B is [K, 1]) and dY2 = dY as [batch..., M, N]:
// dA = sum-to-shape(dY2 @ B2^T), dB = sum-to-shape(A2^T @ dY2), reshaped back to the operands'
// shapes. The batch broadcast is undone by ReduceSum (GradientContext::sumToShape). When one
// operand has no batch axes, the other's batch axes are folded into its rows so that one 2-D
// product replaces the batched product and its reduction: for A [b.., M, K] and B [K, N],
// dB = A^T [K, b..*M] @ dY [b..*M, N] and dA = dY [b..*M, N] @ B^T.
Status matmulGrad(GradientContext &ctx) {
  ir::Value *a = ctx.input(0), *b = ctx.input(1), *dy = ctx.outputGrad(0);
  if (!dy)
    return Status::ok();
  if (!a->shape().isStatic() || !b->shape().isStatic())
    return ctx.error("gradient: shapes must be static (got " + a->shape().str() + " and " +
                     b->shape().str() + ")");
  const std::vector<int64_t> sa = a->shape().staticSizes(), sb = b->shape().staticSizes();
  std::vector<int64_t> a2 = sa, b2 = sb;
  if (a2.size() == 1)
    a2.insert(a2.begin(), 1);
  if (b2.size() == 1)
    b2.push_back(1);
  const int64_t m = a2[a2.size() - 2], k = a2.back(), n = b2.back();
  const std::vector<int64_t> batchA(a2.begin(), a2.end() - 2), batchB(b2.begin(), b2.end() - 2);
  DTC_ASSIGN_OR_RETURN(ir::Shape batchShape,
                       broadcastShapes({ir::Shape::ofStatic(batchA), ir::Shape::ofStatic(batchB)},
                                       ctx.node().where()));
  std::vector<int64_t> y2 = batchShape.staticSizes();
  const int64_t rows = product(y2) * m; // rows of dY when the batch folds into M
  y2.push_back(m);
  y2.push_back(n);

  if (ctx.needsGrad(0)) {
    ir::Value *g = nullptr;
    DTC_ASSIGN_OR_RETURN(ir::Value * bb, ctx.reshapeTo(b, b2));
    if (batchB.empty()) {
      // A's batch (= the output's) folds into the rows: [rows, N] @ [K, N]^T = [rows, K].
      DTC_ASSIGN_OR_RETURN(ir::Value * dyr, ctx.reshapeTo(dy, {rows, n}));
      DTC_ASSIGN_OR_RETURN(g, matmulT(ctx, dyr, bb, false, true));
    } else {
      DTC_ASSIGN_OR_RETURN(ir::Value * dyr, ctx.reshapeTo(dy, y2));
      DTC_ASSIGN_OR_RETURN(ir::Value * full, matmulT(ctx, dyr, bb, false, true));
      DTC_ASSIGN_OR_RETURN(g, ctx.sumToShape(full, ir::Shape::ofStatic(a2)));
    }
    DTC_ASSIGN_OR_RETURN(g, ctx.reshapeTo(g, sa));
    ctx.setInputGrad(0, g);
  }
  if (ctx.needsGrad(1)) {
    ir::Value *g = nullptr;
    if (batchB.empty()) {
      // [rows, K]^T @ [rows, N] = [K, N]: the batch sum happens inside the product.
      DTC_ASSIGN_OR_RETURN(ir::Value * ar, ctx.reshapeTo(a, {rows, k}));
      DTC_ASSIGN_OR_RETURN(ir::Value * dyr, ctx.reshapeTo(dy, {rows, n}));
      DTC_ASSIGN_OR_RETURN(g, matmulT(ctx, ar, dyr, true, false));
    } else {
      DTC_ASSIGN_OR_RETURN(ir::Value * aa, ctx.reshapeTo(a, a2));
      DTC_ASSIGN_OR_RETURN(ir::Value * dyr, ctx.reshapeTo(dy, y2));
      DTC_ASSIGN_OR_RETURN(ir::Value * full, matmulT(ctx, aa, dyr, true, false));
      DTC_ASSIGN_OR_RETURN(g, ctx.sumToShape(full, ir::Shape::ofStatic(b2)));
    }
    DTC_ASSIGN_OR_RETURN(g, ctx.reshapeTo(g, sb));
    ctx.setInputGrad(1, g);
  }
  return Status::ok();
}

} // namespace

namespace {

/// Megatron-LM's linear layers (Shoeybi et al. 2019): A split on the contraction axis with B
/// split on its rows is row-parallel (output partial); a replicated A against B split on its
/// columns is column-parallel (output split on the last axis; A's gradient is partial, so A
/// goes through TensorParallelCopy). A free 2-D B is split by columns only when the look-ahead
/// shows the split reaches a consumer that ends it. Batched products (attention heads) pass a
/// split batch axis through when both operands are split alike (or B broadcasts along it).
Status matmulSharding(ShardingContext &ctx) {
  const std::vector<int64_t> &a = ctx.inputDims(0), &b = ctx.inputDims(1);
  const int64_t ra = static_cast<int64_t>(a.size()), rb = static_cast<int64_t>(b.size());
  const int64_t r = static_cast<int64_t>(ctx.outputDims(0).size());
  if (ra < 2 || rb < 2)
    return Status::ok();
  const ir::Sharding &sa = ctx.input(0), &sb = ctx.input(1);
  const int64_t T = ctx.parts();
  if (sa.isSplit() && sa.axis == ra - 1 && sa.blocks == 1 &&
      (ctx.isFreeWeight(1) || (sb.isSplit() && sb.axis == rb - 2 && sb.blocks == 1))) {
    ctx.require(0, sa);
    ctx.require(1, ir::Sharding::split(rb - 2, T));
    ctx.setOutput(0, ir::Sharding::partial(T));
    return Status::ok();
  }
  if (sa.isSplit() && sa.axis < ra - 2) { // a batch axis
    const int64_t outAxis = sa.axis + (r - ra);
    const int64_t bAxis = outAxis - (r - rb);
    ctx.require(0, sa);
    ctx.require(1, bAxis >= 0 && b[static_cast<size_t>(bAxis)] > 1
                       ? ir::Sharding::split(bAxis, T, sa.blocks)
                       : ir::Sharding::replicated());
    ctx.setOutput(0, ir::Sharding::split(outAxis, T, sa.blocks));
    return Status::ok();
  }
  if (sa.isSplit() && sa.axis == ra - 2 && !sb.isSplit()) { // rows of A (sequence)
    ctx.require(0, sa);
    ctx.setOutput(0, ir::Sharding::split(r - 2, T, sa.blocks));
    return Status::ok();
  }
  if (sa.isSplit() || sa.isPartial())
    return Status::ok();                   // gather A first
  if (sb.isSplit() && sb.axis == rb - 1) { // B already split by columns (a tied weight)
    ctx.requireReplicatedCopy(0);
    ctx.require(1, sb);
    ctx.setOutput(0, ir::Sharding::split(r - 1, T, sb.blocks));
    return Status::ok();
  }
  if (sb.isSplit() && sb.axis < rb - 2 && !ctx.isFreeWeight(1)) {
    const int64_t outAxis = sb.axis + (r - rb);
    const int64_t aAxis = outAxis - (r - ra);
    // A (attention's other operand, split alike by its own path) takes the same split.
    if (aAxis >= 0 && a[static_cast<size_t>(aAxis)] > 1)
      ctx.require(0, ir::Sharding::split(aAxis, T, sb.blocks));
    ctx.require(1, sb);
    ctx.setOutput(0, ir::Sharding::split(outAxis, T, sb.blocks));
    return Status::ok();
  }
  if (ctx.isFreeWeight(1) && rb == 2) {
    if (auto s = columnSplit(ctx, 0, r - 1, b[1])) {
      ctx.requireReplicatedCopy(0);
      ctx.require(1, ir::Sharding::split(1, T, s->blocks));
      ctx.setOutput(0, *s);
    }
  }
  return Status::ok();
}

} // namespace

OpDef defineMatMul() {
  OpDef d;
  d.name = "MatMul";
  constexpr TypeMask kTypes = kFloatTypes | bit(ir::DType::kInt32) | bit(ir::DType::kInt64) |
                              bit(ir::DType::kUInt32) | bit(ir::DType::kUInt64);
  d.version(1).in("A", "T").in("B", "T").out("Y", "T").type("T", kTypes);
  d.infer = inferMatMul;
  d.gradient = matmulGrad;
  // Each output element is a dot product of length K (A's last axis): 2 * numel(Y) * K FLOPs,
  // i.e. 2 * batch * M * N * K with batch the broadcast batch (roofline convention, one
  // multiply-add = 2). 1-D operands count as M = 1 or N = 1.
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    const std::vector<int64_t> &a = ctx.inputDims(0);
    if (a.empty())
      return ctx.error("A must have rank >= 1");
    return ctx.withFlops(2 * ctx.outputElements(0) * static_cast<double>(a.back()));
  };
  d.sharding = matmulSharding;
  return d;
}

} // namespace dtc::ops
