// Shared pieces of the reduction family: the attribute and input forms of the Reduce* ops (axes
// attribute before opset 18 (13 for ReduceSum), optional int64 axes input from then on), their
// normalization, shape inference, folding and gradient helpers, and the shape inference of the
// two losses.
#pragma once

#include "ops/OpDef.h"

#include <functional>

namespace dtc::ops {

/// float16, float, double, int32, int64, uint32, uint64: ReduceMean/Sum/Max-1 types.
constexpr TypeMask kReduceTypes = bit(ir::DType::kFloat16) | bit(ir::DType::kFloat32) |
                                  bit(ir::DType::kFloat64) | bit(ir::DType::kInt32) |
                                  bit(ir::DType::kInt64) | bit(ir::DType::kUInt32) |
                                  bit(ir::DType::kUInt64);

/// Adds the attribute form from `since`: data -> reduced, attributes axes (ints), keepdims.
OpVersion &reduceAttrForm(OpDef &d, int since, TypeMask types);
/// Adds the input form from `since` (copying the previous version's types): data, optional
/// int64 axes -> reduced; attributes keepdims, noop_with_empty_axes.
OpVersion &reduceInputForm(OpDef &d, int since);

/// A normalize function that moves the `axes` attribute into input 1 (as an int64 constant)
/// for models whose opset is below `inputSince`. An absent attribute becomes an omitted input
/// (reduce over all axes, as before).
NormalizeFn reduceNormalizer(int inputSince);

/// Output shape of ReduceMean/Sum/Max in canonical form (ONNX reduction/defs.cc):
///  - axes omitted or empty: every axis is reduced, unless noop_with_empty_axes = 1 (then the
///    output is the input);
///  - constant axes (negative ones count from the back; each in [-r, r), no repeats, else an
///    error naming the node): those dims become 1 (keepdims = 1, the default) or are dropped;
///  - axes not constant: with keepdims the rank is kept (dims of size 1 stay 1, others are
///    unknown); without, the rank is r - len(axes) when the axes' length is static.
Status inferReduce(InferenceContext &ctx);

/// For gradient rules of ReduceSum/Mean/Max: the reduced axes of a canonical node (sorted,
/// non-negative; every axis when the axes input is omitted or empty, none when
/// noop_with_empty_axes = 1 and axes are empty). Axes must be constant.
Expected<std::vector<int64_t>> reducedAxes(GradientContext &ctx);
/// dY broadcast back to the input's shape: reshaped to the keepdims shape, then Expand.
Expected<ir::Value *> broadcastReduceGrad(GradientContext &ctx, ir::Value *dy);

/// The forms of ReduceMean, ReduceProd, ReduceL1, ReduceL2, ReduceLogSumExp and
/// ReduceSumSquare: attribute form 1, 11 (negative axes), 13 (bfloat16), input form 18
/// (optional int64 axes, noop_with_empty_axes); normalization, inference, reduce sharding.
OpDef reduceDef(const std::string &name);
/// The forms of ReduceMax and ReduceMin: attribute form 1, 11, 12 (int8, uint8), 13
/// (bfloat16), input form 18, 20 (bool); normalization, inference, reduce sharding.
OpDef reduceMinMaxDef(const std::string &name);

/// The gradient rule of ReduceMax and ReduceMin: dY goes to the elements equal to Y, split
/// evenly among ties, as PyTorch's amax/amin backward (torch.amax/amin are what exporters turn
/// into ReduceMax/ReduceMin):
///   mask = Cast(Equal(X, Y), float), dX = mask * dY / ReduceSum(mask)   (over the axes)
/// A NaN extremum equals nothing: count 0, and the slice's gradient is NaN, as in PyTorch.
Status selectedElementsGradient(GradientContext &ctx);

/// The gradient of a reduction whose dX = dY * g(X, Y) elementwise: calls `local(x, y)` with Y
/// reshaped to the keepdims shape (so it broadcasts against X), and sets dX = local * dY (dY
/// reshaped likewise). noop_with_empty_axes with empty axes: dX = dY when `noopIsIdentity`,
/// else the local rule still applies (ReduceL1, ReduceL2 and ReduceSumSquare then compute |x|,
/// |x| and x^2 elementwise, as the ONNX reference does).
Status
reduceLocalGradient(GradientContext &ctx,
                    const std::function<Expected<ir::Value *>(ir::Value *x, ir::Value *y)> &local,
                    bool noopIsIdentity = true);

/// One reduction for constant folding: acc starts at `init`, takes every element through
/// `step`, and ends through `finish(acc, count)`; computed in double.
struct ReduceFold {
  double init;
  double (*step)(double acc, double x);
  double (*finish)(double acc, int64_t count);
};
/// Folds a canonical reduction node (constant data and axes) with `f`; the output has the
/// input's dtype (integers truncate as a C++ cast does).
Expected<std::vector<ir::TensorDataPtr>> foldReduce(FoldContext &ctx, const ReduceFold &f);

/// ArgMax and ArgMin (`name`): versions 1, 11, 12 (select_last_index), 13; inference (an axis
/// out of range is an error naming the node), folding, cost. See ops/reduction/ArgMax.cpp.
OpDef argReduceDef(const std::string &name);

/// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss (ONNX nn/defs.cc, math/defs.cc):
/// input 0 scores (N, C, d1..dk), input 1 labels (N, d1..dk), optional input 2 weights (C);
/// output 0: (N, d1..dk) for reduction "none", a scalar for "mean" (default) and "sum";
/// output 1 (SoftmaxCrossEntropyLoss only, optional): log_prob shaped like the scores.
/// Errors name the node: rank of scores < 2, labels not (N, d1..dk), weights not (C), an
/// unknown reduction.
Status inferLoss(InferenceContext &ctx);

/// FLOPs of a loss's `reduction` over `samples` per-sample losses: none 0; sum one add per
/// sample; mean one add per sample, one more per sample for the sum of the weights when
/// `weighted`, and the final divide.
double lossReductionFlops(double samples, const std::string &reduction, bool weighted);

} // namespace dtc::ops
