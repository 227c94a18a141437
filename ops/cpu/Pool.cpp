// CPU kernels of MaxPool, AveragePool, GlobalAveragePool (1-D to 3-D): oneDNN pooling_v2_forward
// (dilation d - 1) with the padding_r that yields ONNX's output size (ceil_mode as in
// ops/ShapeHelpers.cpp). AveragePool with count_include_pad=1 whose ceil windows pass the pads
// uses a loop: its divisor counts explicit pads, not the extension (onnxruntime's rule). Input
// and output share one layout, row-major or channels-last (nwc, nhwc, ndhwc). MaxPool gives NaN
// for a window holding NaN, as torch.nn.functional.max_pool and the ONNX reference (numpy max);
// oneDNN skips NaN, so MaxPoolNan fixes its output up.
#include "ops/cpu/NanPropagation.h"

#include <algorithm>
#include <limits>

namespace dtc::ops::cpu {

namespace {

struct PoolParams {
  bool max = false, global = false, includePad = false, ceil = false;
  size_t spatial = 0;
  std::vector<int64_t> kernel, strides, dilations, pads, padR; ///< padR: for oneDNN
  bool loop = false; ///< the hand-written loop (see the file comment)
};

Expected<PoolParams> poolParams(const KernelSpec &spec) {
  PoolParams p;
  const auto &x = spec.inputs[0].shape;
  if (x.size() < 3 || x.size() > 5)
    return spec.error("input 0 has rank " + std::to_string(x.size()) +
                      "; the CPU kernel supports 1-D to 3-D pooling (rank 3 to 5)");
  p.spatial = x.size() - 2;
  for (size_t i = 2; i < x.size(); ++i)
    if (x[i] == 0)
      return spec.error("input 0 has shape " + shapeStr(x) + "; spatial dims must be non-zero");
  p.max = spec.op == "MaxPool";
  p.global = spec.op == "GlobalAveragePool";
  std::vector<int64_t> out = {x[0], x[1]};
  if (p.global) {
    p.kernel.assign(x.begin() + 2, x.end());
    p.strides.assign(p.spatial, 1);
    p.dilations.assign(p.spatial, 1);
    p.pads.assign(2 * p.spatial, 0);
    p.padR.assign(p.spatial, 0);
    out.resize(x.size(), 1);
    DTC_RETURN_IF_ERROR(checkOutputShape(spec, out));
    return p;
  }
  std::string autoPad = spec.attrString("auto_pad", "NOTSET");
  if (autoPad != "NOTSET")
    return spec.error("auto_pad=" + autoPad +
                      " is not supported by the CPU kernel (expected explicit pads)");
  if (p.max && spec.attrInt("storage_order", 0) != 0)
    return spec.error("storage_order=1 is not supported by the CPU kernel");
  int64_t ceilMode = spec.attrInt("ceil_mode", 0);
  int64_t includePad = spec.attrInt("count_include_pad", 0);
  if ((ceilMode != 0 && ceilMode != 1) || (includePad != 0 && includePad != 1))
    return spec.error("ceil_mode and count_include_pad must be 0 or 1");
  p.ceil = ceilMode == 1;
  p.includePad = !p.max && includePad == 1;
  p.kernel = spec.attrInts("kernel_shape");
  p.strides = spec.attrInts("strides", std::vector<int64_t>(p.spatial, 1));
  p.dilations = spec.attrInts("dilations", std::vector<int64_t>(p.spatial, 1));
  p.pads = spec.attrInts("pads", std::vector<int64_t>(2 * p.spatial, 0));
  if (p.kernel.size() != p.spatial || p.strides.size() != p.spatial ||
      p.dilations.size() != p.spatial || p.pads.size() != 2 * p.spatial)
    return spec.error("kernel_shape, strides and dilations must have " + std::to_string(p.spatial) +
                      " values and pads " + std::to_string(2 * p.spatial));
  constexpr int64_t kLimit = 1 << 20;
  for (size_t i = 0; i < p.spatial; ++i) {
    int64_t pb = p.pads[i], pe = p.pads[i + p.spatial], k = p.kernel[i];
    if (k < 1 || k > kLimit || p.strides[i] < 1 || p.strides[i] > kLimit || p.dilations[i] < 1 ||
        p.dilations[i] > kLimit || pb < 0 || pe < 0 || pb >= k || pe >= k)
      return spec.error("kernel_shape, strides, dilations must be in [1, 2^20] and pads in "
                        "[0, kernel_shape)");
    int64_t eff = p.dilations[i] * (k - 1) + 1, in = x[2 + i], s = p.strides[i];
    int64_t span = in + pb + pe - eff;
    if (span < 0)
      return spec.error("the window is larger than the padded input on spatial axis " +
                        std::to_string(i));
    int64_t o = (p.ceil ? (span + s - 1) / s : span / s) + 1;
    if (p.ceil && (o - 1) * s >= in + pb)
      --o;
    out.push_back(o);
    // The right padding that makes oneDNN's floor formula give o.
    int64_t needed = (o - 1) * s + eff - in - pb;
    p.padR.push_back(std::max(needed, pe));
    if (p.includePad && needed > pe)
      p.loop = true;
  }
  DTC_RETURN_IF_ERROR(checkOutputShape(spec, out));
  return p;
}

/// AveragePool by a plain loop over N, C and up to three spatial dims (padded to 3); element
/// (n, c, s) of a tensor with S spatial elements is at n*C*S + c*S + s (row-major) or
/// n*C*S + s*C + c (channels-last).
class AvgPoolLoop : public Kernel {
public:
  AvgPoolLoop(const KernelSpec &spec, const PoolParams &p) {
    const auto &x = spec.inputs[0].shape, &y = spec.outputs[0].shape;
    n_ = x[0];
    c_ = x[1];
    channelsLast_ = spec.inputs[0].layout == Layout::kChannelsLast;
    for (size_t i = 0; i < 3; ++i) {
      bool real = i < p.spatial;
      in_[i] = real ? x[2 + i] : 1;
      out_[i] = real ? y[2 + i] : 1;
      k_[i] = real ? p.kernel[i] : 1;
      s_[i] = real ? p.strides[i] : 1;
      d_[i] = real ? p.dilations[i] : 1;
      pb_[i] = real ? p.pads[i] : 0;
      pe_[i] = real ? p.pads[i + p.spatial] : 0;
    }
    includePad_ = p.includePad;
  }

  Status run(const KernelArgs &args) override {
    const float *xBase = static_cast<const float *>(args.inputs[0]);
    float *yBase = static_cast<float *>(args.outputs[0]);
    int64_t inSize = in_[0] * in_[1] * in_[2], outSize = out_[0] * out_[1] * out_[2];
    // Strides of channel and spatial position inside one image.
    int64_t xc = channelsLast_ ? 1 : inSize, xs = channelsLast_ ? c_ : 1;
    int64_t yc = channelsLast_ ? 1 : outSize, ys = channelsLast_ ? c_ : 1;
    for (int64_t nc = 0; nc < n_ * c_; ++nc) {
      int64_t n = nc / c_, c = nc % c_;
      const float *x = xBase + n * c_ * inSize + c * xc;
      float *y = yBase + n * c_ * outSize + c * yc;
      for (int64_t o0 = 0; o0 < out_[0]; ++o0)
        for (int64_t o1 = 0; o1 < out_[1]; ++o1)
          for (int64_t o2 = 0; o2 < out_[2]; ++o2) {
            int64_t o[3] = {o0, o1, o2};
            float sum = 0.f;
            int64_t count = 0, padded = 1;
            int64_t lo[3], hi[3];
            for (int a = 0; a < 3; ++a) {
              lo[a] = o[a] * s_[a] - pb_[a];
              // Positions counted with the explicit pads: window clipped to [-pb, in + pe).
              int64_t last = std::min(lo[a] + d_[a] * (k_[a] - 1), in_[a] + pe_[a] - 1);
              padded *= (last - lo[a]) / d_[a] + 1;
              hi[a] = lo[a] + d_[a] * (k_[a] - 1);
            }
            for (int64_t i0 = lo[0]; i0 <= hi[0]; i0 += d_[0])
              for (int64_t i1 = lo[1]; i1 <= hi[1]; i1 += d_[1])
                for (int64_t i2 = lo[2]; i2 <= hi[2]; i2 += d_[2]) {
                  if (i0 < 0 || i0 >= in_[0] || i1 < 0 || i1 >= in_[1] || i2 < 0 || i2 >= in_[2])
                    continue;
                  sum += x[((i0 * in_[1] + i1) * in_[2] + i2) * xs];
                  ++count;
                }
            int64_t div = includePad_ ? padded : count;
            y[((o0 * out_[1] + o1) * out_[2] + o2) * ys] =
                div > 0 ? sum / static_cast<float>(div) : 0.f;
          }
    }
    return Status::ok();
  }

private:
  int64_t n_ = 0, c_ = 0, in_[3], out_[3], k_[3], s_[3], d_[3], pb_[3], pe_[3];
  bool includePad_ = false, channelsLast_ = false;
};

/// oneDNN's max pooling ignores NaN. When input 0 holds a NaN, the same primitive runs again on
/// a NaN indicator (1 where the input is NaN, 0 elsewhere; same shape and layout): an output
/// whose window saw a NaN gets 1 there and is set to NaN. NaN-free inputs cost one scan.
class MaxPoolNan : public Kernel {
public:
  MaxPoolNan(KernelPtr inner, int64_t inCount, int64_t outCount)
      : inner_(std::move(inner)), inCount_(inCount), outCount_(outCount) {}

  Status run(const KernelArgs &args) override {
    DTC_RETURN_IF_ERROR(inner_->run(args));
    const float *x = static_cast<const float *>(args.inputs[0]);
    if (!anyNan(x, inCount_))
      return Status::ok();
    flagIn_.resize(static_cast<size_t>(inCount_));
    flagOut_.resize(static_cast<size_t>(outCount_));
    for (int64_t i = 0; i < inCount_; ++i)
      flagIn_[static_cast<size_t>(i)] = x[i] != x[i] ? 1.f : 0.f;
    const void *ins[1] = {flagIn_.data()};
    void *outs[1] = {flagOut_.data()};
    DTC_RETURN_IF_ERROR(inner_->run(KernelArgs{ins, 1, outs, 1}));
    setNanWhere(static_cast<float *>(args.outputs[0]), flagOut_.data(), outCount_);
    return Status::ok();
  }

private:
  KernelPtr inner_;
  int64_t inCount_, outCount_;
  std::vector<float> flagIn_, flagOut_; ///< the indicator and its pooled form (NaN runs only)
};

} // namespace

Status checkPool(const KernelSpec &spec) {
  if (spec.op == "MaxPool" && spec.outputs.size() == 2)
    return spec.error("the Indices output of MaxPool is not supported by the CPU kernel");
  DTC_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  DTC_RETURN_IF_ERROR(checkSameLayout(spec, true, 0, false, 0));
  return poolParams(spec).status();
}

Expected<KernelPtr> createPool(const KernelSpec &spec, CpuContext &ctx) {
  DTC_ASSIGN_OR_RETURN(PoolParams p, poolParams(spec));
  if (p.loop)
    return KernelPtr(std::make_unique<AvgPoolLoop>(spec, p));
  return buildKernel(spec, [&]() -> KernelPtr {
    using dims = dnnl::memory::dims;
    dnnl::memory::desc src = layoutDesc(spec.inputs[0]);
    dnnl::memory::desc dst = layoutDesc(spec.outputs[0]);
    dims dil, padL(p.pads.begin(), p.pads.begin() + static_cast<long>(p.spatial));
    for (int64_t d : p.dilations)
      dil.push_back(d - 1);
    dnnl::algorithm alg = p.max          ? dnnl::algorithm::pooling_max
                          : p.includePad ? dnnl::algorithm::pooling_avg_include_padding
                                         : dnnl::algorithm::pooling_avg_exclude_padding;
    dnnl::pooling_v2_forward::desc d(
        dnnl::prop_kind::forward_inference, alg, src, dst, dims(p.strides.begin(), p.strides.end()),
        dims(p.kernel.begin(), p.kernel.end()), dil, padL, dims(p.padR.begin(), p.padR.end()));
    dnnl::pooling_v2_forward::primitive_desc pd(d, ctx.engine);
    PrimitiveRunner r(dnnl::pooling_v2_forward(pd), ctx);
    r.input(DNNL_ARG_SRC, src, 0);
    r.output(DNNL_ARG_DST, dst, 0);
    KernelPtr k = std::make_unique<SinglePrimitiveKernel>(spec, ctx, std::move(r));
    if (p.max)
      k = std::make_unique<MaxPoolNan>(std::move(k), spec.inputs[0].numElements(),
                                       spec.outputs[0].numElements());
    return k;
  });
}

} // namespace dtc::ops::cpu
