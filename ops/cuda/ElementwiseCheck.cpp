// The CUDA target's checks and in-place rules of the hand-written kernels (Elementwise.cu,
// Reduce.cu, Loss.cu, Optimizer.cu): which dtypes each kernel takes and the limits of its index
// math. The CPU check has already proved the spec consistent (arity, shapes, attributes).
#include "ops/cuda/Checks.h"
#include "ops/cuda/TrainingUtil.cuh"

namespace dtc::ops::cuda {

namespace {

using ir::DType;

/// Errors unless the broadcast of the inputs to output 0 fits kMaxDims dims after collapsing.
Status checkBroadcastRank(const KernelSpec &spec) {
  std::vector<std::vector<int64_t>> shapes;
  for (const TensorDesc &t : spec.inputs)
    if (t.present())
      shapes.push_back(t.shape);
  // Pairwise: every kernel broadcasts at most three operands against the output.
  for (const std::vector<int64_t> &s : shapes) {
    Broadcast<2> b;
    if (!makeBroadcast<2>(spec.outputs[0].shape, {s, spec.outputs[0].shape}, b))
      return spec.error("the broadcast of " + shapeStr(s) + " to " +
                        shapeStr(spec.outputs[0].shape) + " has more than " +
                        std::to_string(kMaxDims) +
                        " dims after merging; the CUDA kernel "
                        "supports up to " +
                        std::to_string(kMaxDims));
  }
  if (shapes.size() == 2) {
    Broadcast<2> b;
    if (!makeBroadcast<2>(spec.outputs[0].shape, shapes, b))
      return spec.error("the broadcast of the inputs to " + shapeStr(spec.outputs[0].shape) +
                        " has more than " + std::to_string(kMaxDims) +
                        " dims after merging; the CUDA kernel supports up to " +
                        std::to_string(kMaxDims));
  }
  return Status::ok();
}

/// 0 or 1: an input of the output's shape and dtype that the output may overwrite (the kernels
/// read element o of such an operand before writing element o), else -1.
int sameShapeInput(const KernelSpec &spec) {
  const TensorDesc &out = spec.outputs[0];
  for (size_t i = 0; i < 2 && i < spec.inputs.size(); ++i)
    if (spec.inputs[i].present() && spec.inputs[i].shape == out.shape &&
        spec.inputs[i].dtype == out.dtype)
      return static_cast<int>(i);
  return -1;
}

} // namespace

Status checkBinary(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkDTypes(spec, {DType::kFloat32, DType::kInt64}));
  return checkBroadcastRank(spec);
}

int inPlaceBinary(const KernelSpec &spec) { return sameShapeInput(spec); }

Status checkPow(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkInputDType(spec, 0, {DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkInputDType(spec, 1, {DType::kFloat32, DType::kInt64}));
  DTC_RETURN_IF_ERROR(checkOutputDType(spec, 0, {DType::kFloat32}));
  return checkBroadcastRank(spec);
}

int inPlacePow(const KernelSpec &spec) { return sameShapeInput(spec); }

Status checkMod(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkDTypes(spec, {DType::kFloat32, DType::kInt64, DType::kInt32}));
  return checkBroadcastRank(spec);
}

int inPlaceMod(const KernelSpec &spec) { return sameShapeInput(spec); }

Status checkPRelu(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkDTypes(spec, {DType::kFloat32}));
  return checkBroadcastRank(spec);
}

Status checkVariadic(const KernelSpec &spec) {
  if (spec.op == "Max" || spec.op == "Min")
    DTC_RETURN_IF_ERROR(checkDTypes(spec, {DType::kFloat32, DType::kInt64, DType::kInt32}));
  else
    DTC_RETURN_IF_ERROR(checkDTypes(spec, {DType::kFloat32}));
  return checkBroadcastRank(spec);
}

int inPlaceVariadic(const KernelSpec &spec) {
  // Only input 0: the later inputs are read after the output was written from input 0.
  return spec.inputs[0].shape == spec.outputs[0].shape ? 0 : -1;
}

Status checkCompare(const KernelSpec &spec) {
  std::vector<DType> types = {DType::kFloat32, DType::kInt64, DType::kInt32};
  if (spec.op == "Equal")
    types.push_back(DType::kBool);
  DTC_RETURN_IF_ERROR(checkInputDType(spec, 0, types));
  DTC_RETURN_IF_ERROR(checkInputDType(spec, 1, types));
  return checkBroadcastRank(spec);
}

int inPlaceCompare(const KernelSpec &spec) {
  // Only bool Equal writes elements of its inputs' size.
  return spec.inputs[0].dtype == DType::kBool ? sameShapeInput(spec) : -1;
}

Status checkLogical(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkDTypes(spec, {DType::kBool}));
  return checkBroadcastRank(spec);
}

int inPlaceLogical(const KernelSpec &spec) { return sameShapeInput(spec); }

Status checkNot(const KernelSpec &spec) { return checkDTypes(spec, {DType::kBool}); }

Status checkFloatClass(const KernelSpec &spec) {
  return checkInputDType(spec, 0, {DType::kFloat32});
}

Status checkUnary(const KernelSpec &spec) {
  UnaryOp op;
  if (!unaryOpOf(spec.op, spec.attrString("approximate", "none"), op))
    return spec.error("not a unary op of the CUDA elementwise kernels");
  if (op == UnaryOp::kNeg || op == UnaryOp::kAbs || op == UnaryOp::kSign || op == UnaryOp::kClip)
    return checkDTypes(spec, {DType::kFloat32, DType::kInt64});
  return checkDTypes(spec, {DType::kFloat32});
}

Status checkEltwiseGrad(const KernelSpec &spec) {
  GradAlg alg;
  const std::string name = spec.attrString("algorithm", "");
  if (!gradAlgOf(name, alg))
    return spec.error("unknown algorithm '" + name + "'");
  return checkDTypes(spec, {DType::kFloat32});
}

Status checkClipGrad(const KernelSpec &spec) { return checkDTypes(spec, {DType::kFloat32}); }

Status checkArgReduce(const KernelSpec &spec) {
  return checkInputDType(spec, 0, {DType::kFloat32, DType::kInt64, DType::kInt32});
}

Status checkReduce(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkInputDType(spec, 0, {DType::kFloat32, DType::kInt64}));
  DTC_RETURN_IF_ERROR(checkInputDType(spec, 1, {DType::kInt64}));
  if (spec.inputs[0].shape.size() > static_cast<size_t>(kMaxReduceRank))
    return spec.error("input 0 has rank " + std::to_string(spec.inputs[0].shape.size()) +
                      "; the CUDA reduction supports up to " + std::to_string(kMaxReduceRank));
  return Status::ok();
}

Status checkLoss(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkInputDType(spec, 0, {DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkInputDType(spec, 1, {DType::kInt64, DType::kInt32}));
  DTC_RETURN_IF_ERROR(checkInputDType(spec, 2, {DType::kFloat32}));
  for (size_t i = 0; i < spec.outputs.size(); ++i)
    DTC_RETURN_IF_ERROR(checkOutputDType(spec, i, {DType::kFloat32}));
  return Status::ok();
}

Status checkCheckLabels(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkInputDType(spec, 0, {DType::kInt64, DType::kInt32}));
  return checkOutputDType(spec, 0, {spec.inputs[0].dtype});
}

Status checkLossGrad(const KernelSpec &spec) {
  const bool sce = spec.op == "SoftmaxCrossEntropyLossGrad";
  const size_t labels = sce ? 2 : 1;
  for (size_t i = 0; i < spec.inputs.size(); ++i)
    DTC_RETURN_IF_ERROR(checkInputDType(spec, i,
                                        i == labels
                                            ? std::vector<DType>{DType::kInt64, DType::kInt32}
                                            : std::vector<DType>{DType::kFloat32}));
  return checkOutputDType(spec, 0, {DType::kFloat32});
}

int inPlaceSceLossGrad(const KernelSpec &spec) {
  // dscores may overwrite the scores: each element is read before it is written (Loss.cu).
  return spec.inputs[1].dtype == spec.outputs[0].dtype ? 1 : -1;
}

Status checkOptimizer(const KernelSpec &spec) {
  for (size_t i = 0; i < spec.inputs.size(); ++i)
    DTC_RETURN_IF_ERROR(checkInputDType(spec, i,
                                        (spec.op != "SGD" && i == 3)
                                            ? std::vector<DType>{DType::kInt64}
                                            : std::vector<DType>{DType::kFloat32}));
  for (size_t i = 0; i < spec.outputs.size(); ++i)
    DTC_RETURN_IF_ERROR(checkOutputDType(spec, i, {DType::kFloat32}));
  return Status::ok();
}

int inPlaceOptimizer(const KernelSpec &) { return 0; }

Status checkSumSquares(const KernelSpec &spec) { return checkDTypes(spec, {DType::kFloat32}); }

Status checkClipGradNormScale(const KernelSpec &spec) {
  return checkDTypes(spec, {DType::kFloat32});
}

Status checkZeroGradient(const KernelSpec &spec) {
  return checkOutputDType(spec, 0, {DType::kFloat32});
}

int inPlaceZeroGradient(const KernelSpec &) { return 0; }

} // namespace dtc::ops::cuda
