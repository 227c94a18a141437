// Pure C++ parts of the dense CUDA kernels that tests/gpu/DenseTest.cpp runs on the host: the
// GEMM plans of MatMul / MatMulT / Gemm, the pooling geometry, and the mapping of a kernel's
// operands to the argument structs of the hand-written kernels (DenseUtil.h).
#include "ops/cuda/DenseUtil.h"

#include <algorithm>

namespace dtc::ops::cuda {

namespace {

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

/// Input i, or null when absent.
const float *in(const KernelArgs &args, size_t i) {
  return args.numInputs > i ? static_cast<const float *>(args.inputs[i]) : nullptr;
}

/// Output i, or null when the node does not produce it.
float *out(const KernelArgs &args, size_t i) {
  return args.numOutputs > i ? static_cast<float *>(args.outputs[i]) : nullptr;
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
    float beta = spec.attrFloat("beta", 1.f);
    if (spec.inputs.size() == 3 && spec.inputs[2].present() && beta != 0.f) {
      std::vector<int64_t> c = spec.inputs[2].shape;
      while (c.size() < 2)
        c.insert(c.begin(), 1);
      p.hasC = true;
      p.beta = beta;
      p.cm = c[0];
      p.cn = c[1];
    }
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

ConvPlan convPlan(const KernelSpec &spec) {
  ConvPlan p;
  const std::string &op = spec.op;
  auto present = [](const std::vector<TensorDesc> &v, size_t i) {
    return v.size() > i && v[i].present();
  };
  // The forward side's x, w, y among the operands (-1 - i: output i).
  if (op == "ConvGradData" || op == "ConvTranspose") { // (dY | X', W) -> dX | Y'
    p.kind = ConvKind::kBackwardData;
    p.xId = -1;
    p.wId = 1;
    p.yId = 0;
  } else if (op == "ConvGradWeight") { // (dY, X) -> dW, dB?
    p.kind = ConvKind::kBackwardFilter;
    p.xId = 1;
    p.wId = -1;
    p.yId = 0;
  }
  auto shape = [&](int id) -> const std::vector<int64_t> & {
    return id >= 0 ? spec.inputs[static_cast<size_t>(id)].shape
                   : spec.outputs[static_cast<size_t>(-1 - id)].shape;
  };
  const auto &x = shape(p.xId), &w = shape(p.wId), &y = shape(p.yId);
  size_t sp = x.size() - 2;
  p.x.assign(x.begin(), x.end());
  p.w.assign(w.begin(), w.end());
  p.y.assign(y.begin(), y.end());
  p.group = static_cast<int>(spec.attrInt("group", 1));
  std::vector<int64_t> pads = op == "ConvTranspose"
                                  ? convTransposeBeginPads(spec)
                                  : spec.attrInts("pads", std::vector<int64_t>(2 * sp, 0));
  p.pads.assign(pads.begin(), pads.begin() + static_cast<long>(sp));
  std::vector<int64_t> strides = spec.attrInts("strides", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> dilations = spec.attrInts("dilations", std::vector<int64_t>(sp, 1));
  p.strides.assign(strides.begin(), strides.end());
  p.dilations.assign(dilations.begin(), dilations.end());
  if (sp == 1) { // cuDNN's Nd convolutions need two spatial axes at least
    for (std::vector<int> *v : {&p.x, &p.w, &p.y, &p.strides, &p.dilations})
      v->push_back(1);
    p.pads.push_back(0);
  }
  if (op == "ConvGradWeight") {
    if (present(spec.outputs, 1)) {
      p.biasGrad = 1;
      p.biasChannels = p.y[1];
    }
  } else if (present(spec.inputs, 2)) {
    p.bias = 2; // added to the result: y (Conv, FusedConv) or x (ConvTranspose)
    p.biasChannels = op == "ConvTranspose" ? p.x[1] : p.y[1];
  }
  if (op == "FusedConv") {
    p.z = present(spec.inputs, 3) ? 3 : -1;
    p.relu = spec.attrString("activation", "") == "Relu";
  }
  return p;
}

SoftmaxArgs softmaxArgs(const KernelSpec &spec, const KernelArgs &args) {
  SoftmaxArgs a;
  bool grad = spec.op == "SoftmaxGrad" || spec.op == "LogSoftmaxGrad";
  a.log = spec.op == "LogSoftmax" || spec.op == "LogSoftmaxGrad";
  const auto &shape = spec.inputs[0].shape;
  int64_t rank = static_cast<int64_t>(shape.size()), axis = spec.attrInt("axis", -1);
  if (axis < 0)
    axis += rank;
  for (int64_t i = 0; i < rank; ++i) {
    int64_t s = shape[static_cast<size_t>(i)];
    if (i < axis)
      a.outer *= s;
    else if (i == axis)
      a.n = s;
    else
      a.inner *= s;
  }
  a.x = in(args, 0);
  a.y = grad ? in(args, 1) : nullptr;
  a.out = out(args, 0);
  return a;
}

BatchNormArgs batchNormArgs(const KernelSpec &spec, const KernelArgs &args, float *scratch) {
  BatchNormArgs a;
  bool grad = spec.op == "BatchNormGrad";
  const auto &x = spec.inputs[grad ? 1 : 0].shape;
  a.d.batch = x[0];
  a.d.channels = x[1];
  for (size_t i = 2; i < x.size(); ++i)
    a.d.spatial *= x[i];
  a.momentum = spec.attrFloat("momentum", 0.9f);
  a.eps = spec.attrFloat("epsilon", 1e-5f);
  a.y = out(args, 0);
  if (grad) { // (dY, X, scale, saved mean, saved var) -> dX, dScale?, dB?
    a.dy = in(args, 0);
    a.x = in(args, 1);
    a.scale = in(args, 2);
    a.mean = in(args, 3);
    a.var = in(args, 4);
    a.dScale = out(args, 1);
    a.dB = out(args, 2);
    return a;
  }
  // (X, scale, B, mean, var): the statistics used (inference) or the running ones (training).
  a.x = in(args, 0);
  a.scale = in(args, 1);
  a.bias = in(args, 2);
  a.inMean = in(args, 3);
  a.inVar = in(args, 4);
  if (spec.op == "BatchNormTraining") {
    a.runMean = out(args, 1);
    a.runVar = out(args, 2);
    a.saveMean = out(args, 3) ? out(args, 3) : scratch;
    a.saveVar = out(args, 4) ? out(args, 4) : scratch + a.d.channels;
  }
  return a;
}

LayerNormArgs layerNormArgs(const KernelSpec &spec, const KernelArgs &args, float *scratch) {
  LayerNormArgs a;
  bool grad = spec.op == "LayerNormGrad";
  const auto &x = spec.inputs[grad ? 1 : 0].shape;
  int64_t rank = static_cast<int64_t>(x.size()), axis = spec.attrInt("axis", -1);
  if (axis < 0)
    axis += rank;
  a.outer = 1;
  a.inner = 1;
  for (int64_t i = 0; i < rank; ++i)
    (i < axis ? a.outer : a.inner) *= x[static_cast<size_t>(i)];
  a.eps = spec.attrFloat("epsilon", 1e-5f);
  a.y = out(args, 0);
  if (grad) { // (dY, X, Scale) -> dX, dScale, dB?
    a.dy = in(args, 0);
    a.x = in(args, 1);
    a.scale = in(args, 2);
    a.dScale = out(args, 1);
    a.dB = out(args, 2);
    a.stats = scratch;
    return a;
  }
  // (X, Scale, B?) -> Y, Mean?, InvStdDev?
  a.x = in(args, 0);
  a.scale = in(args, 1);
  a.bias = in(args, 2);
  a.mean = out(args, 1);
  a.invStd = out(args, 2);
  return a;
}

} // namespace dtc::ops::cuda
