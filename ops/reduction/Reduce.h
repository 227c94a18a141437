// Shared pieces of the reduction family: the attribute and input forms of ReduceMean/Sum/Max
// (axes attribute before opset 18 (13 for ReduceSum), optional int64 axes input from then on),
// their normalization and shape inference, and the shape inference of the two losses.
#pragma once

#include "ops/OpDef.h"

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
