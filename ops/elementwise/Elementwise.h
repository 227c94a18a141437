// Shared pieces of the elementwise families: broadcasting inference and a constant evaluator
// for binary ops (used by constant folding of shape arithmetic).
#pragma once

#include "ops/OpDef.h"

#include <functional>

namespace dtc::ops {

/// Infers the broadcast shape of all present inputs into output 0 and propagates symbolic
/// shape values for integer Add/Sub/Mul/Div when both sides are known.
Status inferBroadcast(InferenceContext &ctx);

/// Output shape = input 0's shape (unary elementwise ops).
Status inferSameShape(InferenceContext &ctx);

/// Folds a broadcasting binary op over int64 or float32/float64 constants. `intFn`/`floatFn`
/// compute one element; `outType` (kUndefined = same as the inputs) is the result dtype.
Expected<std::vector<ir::TensorDataPtr>>
foldBinary(FoldContext &ctx, const std::function<Expected<int64_t>(int64_t, int64_t)> &intFn,
           const std::function<double(double, double)> &floatFn,
           ir::DType outType = ir::DType::kUndefined);

/// Writes doubles as a tensor of `dtype` (see tensorOfType in ops/activation/Activation.h).
ir::TensorDataPtr makeTensor(const std::string &name, ir::DType dtype,
                             const std::vector<int64_t> &dims, const std::vector<double> &values);

/// Folds a unary op elementwise through doubles (any numeric dtype; the result is converted back
/// to the input's dtype as tensorOfType does).
Expected<std::vector<ir::TensorDataPtr>> foldUnary(FoldContext &ctx,
                                                   const std::function<double(double)> &fn);

/// The gradient rule of ops whose derivative is zero almost everywhere (Floor, Ceil, Round,
/// Sign): dX = ai.dtc.ZeroGradient(dY), zeros without a constant of X's size (f32; PyTorch's
/// convention for these ops). Error naming the node for other dtypes.
Status zeroGradient(GradientContext &ctx);

/// A unary op definition: one input X of `types`, output Y of the same type and shape.
OpDef unaryDef(const std::string &name, int since, TypeMask types);

/// And, Or, Xor (opset 7 on; opset 1's `broadcast`/`axis` form is older than dtc's opset 7):
/// bool A and B with multidirectional broadcasting, bool C = fn(A, B). Folds. No gradient (bool).
OpDef logicalDef(const std::string &name, const std::function<bool(bool, bool)> &fn);

/// BitwiseAnd, BitwiseOr, BitwiseXor (opset 18): integer A and B of one type with broadcasting,
/// C = fn(A, B) of the same type. Folds (on the two's-complement bits of int64 values, then
/// narrowed to the type). No gradient (integers).
OpDef bitwiseDef(const std::string &name, const std::function<int64_t(int64_t, int64_t)> &fn);

/// A comparison C = fn(A, B) with broadcasting and a bool output, from opset `since` on over
/// `types` (GreaterOrEqual, LessOrEqual: opset 12; opset 16 only adds bfloat16). Folds; no
/// gradient (bool output).
OpDef comparisonDef(const std::string &name, int since, TypeMask types,
                    const std::function<bool(double, double)> &fn);

/// Folds a variadic broadcasting op (Max, Min, Sum) left to right, two inputs at a time, with
/// foldBinary's element functions.
Expected<std::vector<ir::TensorDataPtr>>
foldVariadic(FoldContext &ctx, const std::function<Expected<int64_t>(int64_t, int64_t)> &intFn,
             const std::function<double(double, double)> &floatFn);

/// The variadic elementwise ops Max, Min (one form per opset: 6 same-shape, 8 broadcasting, 12
/// integer types, 13 bfloat16; the same-shape form is a special case of the canonical one),
/// Sum and Mean (6, 8, 13; float types): inputs data_0..data_{n-1} (n >= 1) of one type T,
/// output of their broadcast shape. Sets schema and inference only.
OpDef variadicDef(const std::string &name, const std::string &output, bool integerTypes);

/// The gradient rule of Max and Min: the gradient goes to the input(s) whose value was selected
/// (x_i == Y, broadcast), split evenly among tied inputs, as PyTorch's maximum/minimum backward
/// (derivatives.yaml: `grad / 2` on ties for two inputs); a NaN output sends zero everywhere.
///   mask_i = Equal(x_i, Y); count = sum_i Cast(mask_i, f32);
///   dx_i = sumToShape(Where(mask_i, dY / count, 0), shape(x_i)).
/// f32 only (error naming the node otherwise).
Status selectedInputGradient(GradientContext &ctx);

} // namespace dtc::ops
