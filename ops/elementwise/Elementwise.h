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

/// A unary op definition: one input X of `types`, output Y of the same type and shape.
OpDef unaryDef(const std::string &name, int since, TypeMask types);

} // namespace dtc::ops
