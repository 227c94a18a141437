// The CUDA target's checks of the dense kernels (MatMul, Gemm, convolutions, pooling,
// normalization, softmax): what cuBLAS and cuDNN cannot do beyond what the CPU check already
// proved (32-bit sizes of cuBLAS and cuDNN, cuDNN's symmetric pads, synchronized batch norm).
// Pure C++: no CUDA header.
#include "ops/cuda/Checks.h"
#include "ops/cuda/DenseUtil.h"

#include <algorithm>
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

/// Fills the batch part of `p` from the operands' batch dims (each padded on the left with 1s
/// to the output's batch rank). An operand's dim of 1 against an output dim > 1 is broadcast.
void planBatches(GemmPlan &p, std::vector<int64_t> a, std::vector<int64_t> b,
                 const std::vector<int64_t> &out) {
  size_t r = out.size();
  a.insert(a.begin(), r - a.size(), 1);
  b.insert(b.begin(), r - b.size(), 1);
  // Element strides of each batch dim in A, B and Y (0 where broadcast), dims of 1 dropped.
  struct Dim {
    int64_t size, sa, sb, sy;
  };
  std::vector<Dim> dims;
  int64_t sa = p.m * p.k, sb = p.k * p.n, sy = p.m * p.n;
  for (size_t i = r; i-- > 0;) {
    if (out[i] != 1)
      dims.insert(dims.begin(), Dim{out[i], a[i] == 1 ? 0 : sa, b[i] == 1 ? 0 : sb, sy});
    sa *= a[i];
    sb *= b[i];
    sy *= out[i];
  }
  // Merge a dim into the next (inner) one when one stride describes both, in every operand.
  std::vector<Dim> merged;
  for (const Dim &d : dims) {
    if (!merged.empty()) {
      Dim &last = merged.back();
      if (last.sa == d.sa * d.size && last.sb == d.sb * d.size && last.sy == d.sy * d.size) {
        last = Dim{last.size * d.size, d.sa, d.sb, d.sy};
        continue;
      }
    }
    merged.push_back(d);
  }
  if (merged.empty()) {
    p.calls.push_back(GemmCall{});
    return;
  }
  Dim inner = merged.back();
  merged.pop_back();
  p.batch = inner.size;
  p.strideA = inner.sa;
  p.strideB = inner.sb;
  // Outer indices, row-major.
  std::vector<int64_t> idx(merged.size(), 0);
  while (true) {
    GemmCall c;
    for (size_t i = 0; i < merged.size(); ++i) {
      c.a += idx[i] * merged[i].sa;
      c.b += idx[i] * merged[i].sb;
      c.y += idx[i] * merged[i].sy;
    }
    p.calls.push_back(c);
    size_t i = merged.size();
    while (i > 0 && ++idx[i - 1] == merged[i - 1].size)
      idx[--i] = 0;
    if (i == 0)
      break;
  }
}

} // namespace

GemmPlan gemmPlan(const KernelSpec &spec) {
  GemmPlan p;
  std::vector<int64_t> a = spec.inputs[0].shape, b = spec.inputs[1].shape;
  if (spec.op == "Gemm") {
    p.transA = spec.attrInt("transA", 0) != 0;
    p.transB = spec.attrInt("transB", 0) != 0;
    p.alpha = spec.attrFloat("alpha", 1.f);
    p.m = p.transA ? a[1] : a[0];
    p.k = p.transA ? a[0] : a[1];
    p.n = p.transB ? b[0] : b[1];
    p.calls.push_back(GemmCall{});
    return p;
  }
  if (spec.op == "MatMulT") {
    p.transA = spec.attrInt("transA", 0) != 0;
    p.transB = spec.attrInt("transB", 0) != 0;
    p.alpha = spec.attrFloat("alpha", 1.f);
  } else { // MatMul: 1-D operands promoted
    if (a.size() == 1)
      a.insert(a.begin(), 1);
    if (b.size() == 1)
      b.push_back(1);
  }
  size_t ra = a.size(), rb = b.size();
  p.m = a[p.transA ? ra - 1 : ra - 2];
  p.k = a[p.transA ? ra - 2 : ra - 1];
  p.n = b[p.transB ? rb - 2 : rb - 1];
  std::vector<int64_t> batchA(a.begin(), a.end() - 2), batchB(b.begin(), b.end() - 2);
  // The output's batch dims: numpy broadcasting of A's and B's (right-aligned).
  std::vector<int64_t> out(std::max(batchA.size(), batchB.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    size_t ia = i + batchA.size(), ib = i + batchB.size();
    int64_t da = ia >= out.size() ? batchA[ia - out.size()] : 1;
    int64_t db = ib >= out.size() ? batchB[ib - out.size()] : 1;
    out[i] = da == 1 ? db : da;
  }
  planBatches(p, batchA, batchB, out);
  return p;
}

/// The geometry from the forward input's shape `x`, the output's `y` and the attributes.
PoolGeom poolGeom(const KernelSpec &spec, const std::vector<int64_t> &x,
                  const std::vector<int64_t> &y, bool max, bool global) {
  PoolGeom g;
  size_t sp = x.size() - 2;
  g.planes = x[0] * x[1];
  g.max = max;
  g.includePad = !max && spec.attrInt("count_include_pad", 0) == 1;
  std::vector<int64_t> kernel =
      global ? std::vector<int64_t>(x.begin() + 2, x.end()) : spec.attrInts("kernel_shape");
  std::vector<int64_t> strides =
      global ? std::vector<int64_t>(sp, 1) : spec.attrInts("strides", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> dilations = global ? std::vector<int64_t>(sp, 1)
                                          : spec.attrInts("dilations", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> pads = global ? std::vector<int64_t>(2 * sp, 0)
                                     : spec.attrInts("pads", std::vector<int64_t>(2 * sp, 0));
  for (size_t i = 0; i < sp; ++i) {
    g.in[i] = x[2 + i];
    g.out[i] = y[2 + i];
    g.k[i] = kernel[i];
    g.s[i] = strides[i];
    g.d[i] = dilations[i];
    g.pb[i] = pads[i];
    g.pe[i] = pads[i + sp];
  }
  return g;
}

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

Status checkMatMul(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkDTypes(spec, kF32));
  std::vector<int64_t> a = spec.inputs[0].shape, b = spec.inputs[1].shape;
  int64_t m = a.size() == 1 ? 1 : a[a.size() - 2], n = b.size() == 1 ? 1 : b.back();
  return checkGemmSizes(spec, m, n, a.back());
}

Status checkMatMulT(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkDTypes(spec, kF32));
  const auto &a = spec.inputs[0].shape, &y = spec.outputs[0].shape;
  bool transA = spec.attrInt("transA", 0) != 0;
  return checkGemmSizes(spec, y[y.size() - 2], y.back(), a[transA ? a.size() - 2 : a.size() - 1]);
}

Status checkGemm(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkDTypes(spec, kF32));
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
