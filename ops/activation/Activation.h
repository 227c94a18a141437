// Shared pieces of the activation family: element conversion between every numeric dtype
// (f16 and bf16 included) for Cast folding and for constants made by normalization (Clip
// bounds), the softmax-family definition (Softmax, LogSoftmax), and the gradient rule body the
// unary activations share (ai.dtc.EltwiseGrad).
#pragma once

#include "compiler/ir/Half.h"
#include "ops/OpDef.h"

#include <string>
#include <vector>

namespace dtc::ops {

/// float16, float, double: the float types before bfloat16 joined most ops (opset 13).
constexpr TypeMask kFloatNoBf16Types =
    bit(ir::DType::kFloat16) | bit(ir::DType::kFloat32) | bit(ir::DType::kFloat64);

/// IEEE 754 binary16 and bfloat16 <-> float (compiler/ir/Half.h).
using ir::bfloat16ToFloat;
using ir::floatToBFloat16;
using ir::floatToHalf;
using ir::halfToFloat;

/// Elements of a numeric or bool constant as doubles (any dtype but string); error naming
/// the tensor otherwise. int64 values beyond 2^53 lose precision: use toInt64s for those.
Expected<std::vector<double>> elementsAsDoubles(const ir::TensorData &t);

/// A tensor of `dtype` (any numeric dtype or bool) holding `values` converted like a C++
/// static_cast (float -> integer truncates toward zero; bool is value != 0). NaN and
/// out-of-range values converted to integers give 0 (ONNX leaves them undefined).
ir::TensorDataPtr tensorOfType(const std::string &name, ir::DType dtype,
                               const std::vector<int64_t> &dims, const std::vector<double> &values);

/// `in` converted to `to` as Cast folds it (integer/bool -> integer/bool exactly and modular;
/// anything else through doubles, see tensorOfType), named `name`. Errors (naming `where`) for
/// string tensors ("cannot fold a <opName> from or to string") and unreadable data. Shared by
/// Cast and CastLike.
Expected<ir::TensorDataPtr> castTensor(const ir::TensorData &in, ir::DType to,
                                       const std::string &name, const std::string &where,
                                       const char *opName);

/// The gradient of Cast and CastLike with respect to input 0: dX = Cast(dY, to = X's dtype), dY
/// itself when the dtypes agree. Does nothing when input 0 needs no gradient or dY is absent.
Status castGradient(GradientContext &ctx);

/// Softmax and LogSoftmax: versions 1, 11 (negative axis), 13 (one axis, default -1). Older
/// forms are normalized as described in Activation.cpp (normalizeSoftmaxFamily).
OpDef softmaxFamilyDef(const std::string &name);

/// Errors (naming the node) when optional input `i` is present, its shape is static and it
/// holds other than exactly one element (Clip bounds, Dropout ratio and training_mode must be
/// scalars; a 1-element 1-D tensor is accepted as exporters emit those).
Status checkScalarInput(InferenceContext &ctx, size_t i, const std::string &what);

/// The gradient rule body shared by the unary activations: sets input 0's gradient to
/// ai.dtc.EltwiseGrad(dY, fromOutput ? Y : X) with `algorithm` (ops/training/
/// ActivationGradEltwise.cpp lists the algorithms and their formulas). Reading Y instead of X
/// (relu_dst, logistic_dst, tanh_dst, exp_dst, sqrt_dst, reciprocal_dst) lets the forward op run
/// in place over X. Does nothing when input 0 needs no gradient.
Status eltwiseGradRule(GradientContext &ctx, const std::string &algorithm, bool fromOutput,
                       float alpha = 0.f, float beta = 0.f);

/// A float attribute of an activation and its default (ONNX operator text).
struct ActivationAttr {
  const char *name;
  float defaultValue;
};

/// y = fn(x, a, b), with a and b the values of `attrs[0]` and `attrs[1]` (0 when absent).
using ActivationFn = double (*)(double x, double a, double b);

/// A unary float activation (Softplus, Softsign, Elu, Selu, Celu, Mish, Sin, Cos): one input X
/// of `types` from opset `since` on, output Y of X's type and shape, float attributes `attrs`
/// (at most two). Folds through `fn` in double; cost one FLOP per element; elementwise sharding;
/// gradient dX = ai.dtc.EltwiseGrad(dY, X) with `gradAlgorithm` and alpha/beta = the two
/// attributes' values.
OpDef activationDef(const std::string &name, int since, TypeMask types,
                    const std::string &gradAlgorithm, ActivationFn fn,
                    std::vector<ActivationAttr> attrs = {});

} // namespace dtc::ops
