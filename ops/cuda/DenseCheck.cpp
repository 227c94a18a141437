// The CUDA target's checks of the dense kernels (MatMul, Gemm, convolutions, pooling,
// normalization, softmax): what cuBLAS and cuDNN cannot do beyond what the CPU check already
// proved (32-bit sizes of cuBLAS and cuDNN, cuDNN's symmetric pads, synchronized batch norm).
// Pure C++: no CUDA header.
#include "ops/cuda/Checks.h"
#include "ops/cuda/DenseUtil.h"

#include <climits>

namespace dtc::ops::cuda {

namespace {

const std::vector<ir::DType> kF32 = {ir::DType::kFloat32};

/// Errors when `v` does not fit cuBLAS's / cuDNN's int.
Status fitsInt(const KernelSpec &spec, int64_t v, const std::string &what) {
  if (v > INT_MAX)
    return spec.error(what + " " + std::to_string(v) +
                      " exceeds 2^31 - 1, the limit of the CUDA kernel (cuBLAS/cuDNN int sizes)");
  return Status::ok();
}

Status shapesFitInt(const KernelSpec &spec) {
  for (const auto *list : {&spec.inputs, &spec.outputs})
    for (const TensorDesc &t : *list)
      if (t.present())
        DTC_RETURN_IF_ERROR(fitsInt(spec, t.numElements(), "operand size"));
  return Status::ok();
}

/// cuDNN pads both ends of an axis by one amount. The window of output o starts at
/// o * stride - pad_begin whatever the end pad is, so the begin pad suffices when the output
/// size cuDNN derives from it (floor((in + 2 * pad_begin - dilation * (k - 1) - 1) / stride) + 1)
/// is the real one.
Status checkCudnnPads(const KernelSpec &spec, const std::vector<int64_t> &x,
                      const std::vector<int64_t> &w, const std::vector<int64_t> &y,
                      const std::vector<int64_t> &beginPads) {
  size_t sp = x.size() - 2;
  std::vector<int64_t> strides = spec.attrInts("strides", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> dilations = spec.attrInts("dilations", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> pads = spec.attrInts("pads", std::vector<int64_t>(2 * sp, 0));
  for (size_t i = 0; i < sp; ++i) {
    int64_t span = x[2 + i] + 2 * beginPads[i] - dilations[i] * (w[2 + i] - 1) - 1;
    if (span < 0 || span / strides[i] + 1 != y[2 + i])
      return spec.error("pads " + shapeStr(pads) + " on spatial axis " + std::to_string(i) +
                        " cannot be expressed by cuDNN, which pads both ends by one amount "
                        "(pad the input explicitly or use symmetric pads)");
    DTC_RETURN_IF_ERROR(fitsInt(spec, strides[i], "stride"));
    DTC_RETURN_IF_ERROR(fitsInt(spec, dilations[i], "dilation"));
    DTC_RETURN_IF_ERROR(fitsInt(spec, beginPads[i], "pad"));
  }
  return shapesFitInt(spec);
}

std::vector<int64_t> beginPads(const KernelSpec &spec, size_t sp) {
  std::vector<int64_t> pads = spec.attrInts("pads", std::vector<int64_t>(2 * sp, 0));
  pads.resize(sp);
  return pads;
}

Status checkGemmSizes(const KernelSpec &spec, int64_t m, int64_t n, int64_t k) {
  DTC_RETURN_IF_ERROR(fitsInt(spec, m, "M"));
  DTC_RETURN_IF_ERROR(fitsInt(spec, n, "N"));
  DTC_RETURN_IF_ERROR(fitsInt(spec, k, "K"));
  int64_t batch = m * n > 0 ? spec.outputs[0].numElements() / (m * n) : 0;
  return fitsInt(spec, batch, "batch count");
}

} // namespace

std::vector<int64_t> convTransposeBeginPads(const KernelSpec &spec) {
  const auto &x = spec.inputs[0].shape, &w = spec.inputs[1].shape;
  size_t sp = x.size() - 2;
  std::vector<int64_t> pads = beginPads(spec, sp);
  std::string autoPad = spec.attrString("auto_pad", "NOTSET");
  std::vector<int64_t> outputShape = spec.attrInts("output_shape");
  if (outputShape.size() == x.size())
    outputShape.erase(outputShape.begin(), outputShape.begin() + 2);
  if (autoPad == "VALID")
    pads.assign(sp, 0);
  bool same = autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER";
  if (!outputShape.empty() || same) {
    std::vector<int64_t> strides = spec.attrInts("strides", std::vector<int64_t>(sp, 1));
    std::vector<int64_t> dilations = spec.attrInts("dilations", std::vector<int64_t>(sp, 1));
    std::vector<int64_t> outPad = spec.attrInts("output_padding", std::vector<int64_t>(sp, 0));
    for (size_t i = 0; i < sp; ++i) {
      int64_t full = strides[i] * (x[2 + i] - 1) + outPad[i] + dilations[i] * (w[2 + i] - 1) + 1;
      int64_t target = !outputShape.empty() ? outputShape[i] : x[2 + i] * strides[i];
      pads[i] = (full - target) / 2;
    }
  }
  return pads;
}

/// Mixed precision (--precision bf16): the matrix products take f32, or bf16 throughout (the CPU
/// check makes every operand one dtype) through cublasGemmStridedBatchedEx with f32 compute;
/// Gemm's C is f32 only (its broadcast kernel is; the mixed-precision pass never gives a bf16
/// Gemm a C).
const std::vector<ir::DType> kF32Bf16 = {ir::DType::kFloat32, ir::DType::kBFloat16};

Status checkMatMul(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkDTypes(spec, kF32Bf16));
  std::vector<int64_t> a = spec.inputs[0].shape, b = spec.inputs[1].shape;
  int64_t m = a.size() == 1 ? 1 : a[a.size() - 2], n = b.size() == 1 ? 1 : b.back();
  return checkGemmSizes(spec, m, n, a.back());
}

Status checkMatMulT(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkDTypes(spec, kF32Bf16));
  const auto &a = spec.inputs[0].shape, &y = spec.outputs[0].shape;
  bool transA = spec.attrInt("transA", 0) != 0;
  return checkGemmSizes(spec, y[y.size() - 2], y.back(), a[transA ? a.size() - 2 : a.size() - 1]);
}

Status checkGemm(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkDTypes(spec, kF32Bf16));
  if (spec.inputs[0].dtype == ir::DType::kBFloat16 && spec.inputs.size() > 2 &&
      spec.inputs[2].present())
    return spec.error("a bf16 Gemm with C is not supported by the CUDA kernel (add C after the "
                      "product, in f32, as --precision bf16 does)");
  const auto &a = spec.inputs[0].shape, &y = spec.outputs[0].shape;
  bool transA = spec.attrInt("transA", 0) != 0;
  return checkGemmSizes(spec, y[0], y[1], transA ? a[0] : a[1]);
}

Status checkConv(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkDTypes(spec, kF32));
  const auto &x = spec.inputs[0].shape;
  return checkCudnnPads(spec, x, spec.inputs[1].shape, spec.outputs[0].shape,
                        beginPads(spec, x.size() - 2));
}

int inPlaceFusedConv(const KernelSpec &spec) {
  // Output 0 may overwrite Z: the kernel then skips copying Z into it.
  if (spec.inputs.size() < 4 || !spec.inputs[3].present())
    return -1;
  const TensorDesc &z = spec.inputs[3], &y = spec.outputs.at(0);
  return z.dtype == y.dtype && z.shape == y.shape ? 3 : -1;
}

Status checkConvGradData(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkDTypes(spec, kF32));
  const auto &x = spec.outputs[0].shape;
  return checkCudnnPads(spec, x, spec.inputs[1].shape, spec.inputs[0].shape,
                        beginPads(spec, x.size() - 2));
}

Status checkConvGradWeight(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkDTypes(spec, kF32));
  const auto &x = spec.inputs[1].shape;
  return checkCudnnPads(spec, x, spec.outputs[0].shape, spec.inputs[0].shape,
                        beginPads(spec, x.size() - 2));
}

Status checkConvTranspose(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkDTypes(spec, kF32));
  // The convolution from the output back to the input.
  return checkCudnnPads(spec, spec.outputs[0].shape, spec.inputs[1].shape, spec.inputs[0].shape,
                        convTransposeBeginPads(spec));
}

Status checkPool(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkDTypes(spec, kF32));
  if (spec.inputs[0].shape.size() > 5)
    return spec.error("the CUDA kernel pools over at most 3 spatial axes");
  return Status::ok();
}

Status checkPoolGrad(const KernelSpec &spec) { return checkPool(spec); }

Status checkBatchNorm(const KernelSpec &spec) { return checkDTypes(spec, kF32); }

Status checkBatchNormTraining(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkDTypes(spec, kF32));
  if (spec.attrInt("sync", 0) != 0)
    return spec.error("sync=1 (synchronized batch normalization, --sync-batchnorm) is not "
                      "supported by the CUDA kernel");
  return Status::ok();
}

Status checkBatchNormGrad(const KernelSpec &spec) { return checkBatchNormTraining(spec); }

int inPlaceBatchNormGrad(const KernelSpec &spec) {
  // dX may overwrite dY: each thread reads an element of dY before it writes that element of dX,
  // after the channel's sums (NormKernels in DenseKernels.cu).
  return sameAsInput0(spec);
}

/// Scale and B with the normalized shape's size (a smaller one that broadcasts is the CPU
/// kernel's only).
Status checkLayerNormParams(const KernelSpec &spec, const std::vector<int64_t> &x,
                            const std::vector<size_t> &params) {
  DTC_RETURN_IF_ERROR(checkDTypes(spec, kF32));
  int64_t rank = static_cast<int64_t>(x.size()), axis = spec.attrInt("axis", -1), inner = 1;
  if (axis < 0)
    axis += rank;
  for (int64_t i = axis; i < rank; ++i)
    inner *= x[static_cast<size_t>(i)];
  for (size_t i : params)
    if (spec.inputs.size() > i && spec.inputs[i].present() && spec.inputs[i].numElements() != inner)
      return spec.error("input " + std::to_string(i) + " " + spec.inputs[i].str() +
                        " must have the normalized shape's " + std::to_string(inner) +
                        " elements on the CUDA kernel (no broadcasting of Scale and B)");
  return Status::ok();
}

Status checkLayerNorm(const KernelSpec &spec) {
  return checkLayerNormParams(spec, spec.inputs[0].shape, {1, 2});
}

Status checkLayerNormGrad(const KernelSpec &spec) {
  return checkLayerNormParams(spec, spec.inputs[1].shape, {2});
}

Status checkSoftmax(const KernelSpec &spec) { return checkDTypes(spec, kF32); }

Status checkSoftmaxGrad(const KernelSpec &spec) { return checkDTypes(spec, kF32); }

} // namespace dtc::ops::cuda
