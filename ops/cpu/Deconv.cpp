// CPU kernel of ConvTranspose (1-D, 2-D, 3-D; groups; dilations; output_padding; optional bias):
// a oneDNN deconvolution_forward primitive. ONNX weights [C, M/group, k...] are described to
// oneDNN by strides over its logical (G, OC/G, IC/G, k...) dims (the iohw / giohw orders), so no
// weight reorder is needed beyond the one the primitive may ask for (format_tag::any). The
// activations (input 0, output 0) may each be row-major or channels-last (nwc/nhwc/ndhwc); a
// channels-last operand is handed to the primitive as is when oneDNN has a fast (non-reference)
// implementation for it, which avoids the blocked-layout reorders around the primitive.
// Non-overlapping windows (strides == kernel, the UNet upsampling) on channels-last operands run
// as one matmul and a scatter instead (DeconvGemmKernel): oneDNN 2.6's deconvolution took 80 us
// in nhwc (55 us blocked plus two reorders) on 1x64x8x8 -> 1x32x16x16, k2 s2.
#include "ops/cpu/OneDnnUtil.h"

#include <optional>

namespace dtc::ops::cpu {

namespace {

struct DeconvParams {
  size_t spatial = 0;
  int64_t group = 1;
  std::vector<int64_t> kernel, strides, dilations, pads, outputPadding;
};

/// Reads and checks the attributes; resolves auto_pad / output_shape into explicit pads
/// (ONNX ConvTranspose: total_padding = stride * (in - 1) + output_padding + (k - 1) * dilation
/// + 1 - out). An odd total padding is rejected: the ONNX text and onnxruntime put the odd
/// element on different sides, so such a model should carry explicit pads.
Expected<DeconvParams> deconvParams(const KernelSpec &spec) {
  DeconvParams p;
  const auto &x = spec.inputs[0].shape, &w = spec.inputs[1].shape;
  if (x.size() < 3 || x.size() > 5)
    return spec.error("input 0 has rank " + std::to_string(x.size()) +
                      "; the CPU kernel supports 1-D to 3-D transposed convolutions (rank 3 to 5)");
  if (w.size() != x.size())
    return spec.error("weights " + shapeStr(w) + " and input " + shapeStr(x) +
                      " have different ranks");
  p.spatial = x.size() - 2;
  for (size_t i = 1; i < x.size(); ++i)
    if (x[i] == 0 || w[i] == 0)
      return spec.error("input " + shapeStr(x) + " or weights " + shapeStr(w) +
                        " have a zero-sized channel or spatial dim");
  size_t sp = p.spatial;
  p.group = spec.attrInt("group", 1);
  p.kernel = spec.attrInts("kernel_shape", std::vector<int64_t>(w.begin() + 2, w.end()));
  p.strides = spec.attrInts("strides", std::vector<int64_t>(sp, 1));
  p.dilations = spec.attrInts("dilations", std::vector<int64_t>(sp, 1));
  p.pads = spec.attrInts("pads", std::vector<int64_t>(2 * sp, 0));
  p.outputPadding = spec.attrInts("output_padding", std::vector<int64_t>(sp, 0));
  std::vector<int64_t> outputShape = spec.attrInts("output_shape");
  if (outputShape.size() == x.size())
    outputShape.erase(outputShape.begin(), outputShape.begin() + 2);
  if (p.kernel != std::vector<int64_t>(w.begin() + 2, w.end()))
    return spec.error("kernel_shape " + shapeStr(p.kernel) + " differs from the weights " +
                      shapeStr(w));
  if (p.strides.size() != sp || p.dilations.size() != sp || p.pads.size() != 2 * sp ||
      p.outputPadding.size() != sp || (!outputShape.empty() && outputShape.size() != sp))
    return spec.error("strides, dilations, output_padding (and output_shape) must have " +
                      std::to_string(sp) + " values and pads " + std::to_string(2 * sp));
  constexpr int64_t kMax = int64_t(1) << 20;
  for (size_t i = 0; i < sp; ++i) {
    if (p.strides[i] < 1 || p.dilations[i] < 1 || p.pads[i] < 0 || p.pads[i + sp] < 0 ||
        p.strides[i] > kMax || p.dilations[i] > kMax || p.pads[i] > kMax || p.pads[i + sp] > kMax)
      return spec.error("strides and dilations must be in [1, 2^20] and pads in [0, 2^20]");
    if (p.outputPadding[i] < 0 || p.outputPadding[i] >= p.strides[i])
      return spec.error("output_padding " + shapeStr(p.outputPadding) +
                        " must be non-negative and smaller than the strides " +
                        shapeStr(p.strides) + " on the CPU kernel");
  }
  if (p.group < 1 || x[1] != w[0] || w[0] % p.group != 0)
    return spec.error("group " + std::to_string(p.group) + " does not fit input " + shapeStr(x) +
                      " and weights " + shapeStr(w) + " (need C = W.shape[0], divisible by group)");
  int64_t m = w[1] * p.group;
  if (spec.inputs.size() == 3 && spec.inputs[2].present() &&
      spec.inputs[2].shape != std::vector<int64_t>{m})
    return spec.error("bias has shape " + shapeStr(spec.inputs[2].shape) + ", expected [" +
                      std::to_string(m) + "]");

  std::string autoPad = spec.attrString("auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" &&
      autoPad != "SAME_LOWER")
    return spec.error("auto_pad=" + autoPad + " is not one of NOTSET, VALID, SAME_UPPER, " +
                      "SAME_LOWER");
  if (autoPad == "VALID")
    p.pads.assign(2 * sp, 0);
  bool same = autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER";
  std::vector<int64_t> out = {x[0], m};
  for (size_t i = 0; i < sp; ++i) {
    __int128 full = __int128(p.strides[i]) * (x[2 + i] - 1) + p.outputPadding[i] +
                    __int128(p.dilations[i]) * (p.kernel[i] - 1) + 1;
    if (!outputShape.empty() || same) {
      __int128 target =
          !outputShape.empty() ? __int128(outputShape[i]) : __int128(x[2 + i]) * p.strides[i];
      __int128 total = full - target;
      if (target < 1 || total < 0 || total % 2 != 0)
        return spec.error("output size " + std::to_string(static_cast<int64_t>(target)) +
                          " on spatial axis " + std::to_string(i) +
                          " (from output_shape or auto_pad) needs a total padding of " +
                          std::to_string(static_cast<int64_t>(total)) +
                          "; the CPU kernel supports only an even, non-negative one (give "
                          "explicit pads instead)");
      p.pads[i] = p.pads[i + sp] = static_cast<int64_t>(total / 2);
    }
    __int128 size = full - p.pads[i] - p.pads[i + sp];
    if (size < 1 || size > (__int128(1) << 40))
      return spec.error("output size on spatial axis " + std::to_string(i) +
                        " is not in [1, 2^40] (pads too large?)");
    out.push_back(static_cast<int64_t>(size));
  }
  DTC_RETURN_IF_ERROR(checkOutputShape(spec, out));
  return p;
}

class DeconvKernel : public Kernel {
public:
  DeconvKernel(const KernelSpec &spec, CpuContext &ctx) : where_(spec.where()), ctx_(ctx) {}

  Status run(const KernelArgs &args) override {
    try {
      inputReorders_.run(args, ctx_.stream);
      runner_.execute(args);
      if (dstReorder_) {
        dstReorder_->user.set_data_handle(args.outputs[0]);
        dstReorder_->reorder.execute(ctx_.stream, dstReorder_->scratch, dstReorder_->user);
      }
      ctx_.stream.wait();
    } catch (const dnnl::error &e) {
      return Status::error(where_, std::string("oneDNN: ") + e.what());
    }
    return Status::ok();
  }

  std::string where_;
  CpuContext &ctx_;
  PrimitiveRunner runner_;
  InputReorders inputReorders_;
  std::optional<Reordered> dstReorder_;
};

/// True when every input pixel writes its own block of the output (strides == kernel, no pads,
/// dilations 1, output_padding 0, group 1) and input 0 and output 0 are channels-last: the case
/// of UNet-style 2x upsampling, which DeconvGemmKernel runs as one matmul.
bool nonOverlapping(const KernelSpec &spec, const DeconvParams &p) {
  if (p.group != 1 || spec.inputs[0].layout != Layout::kChannelsLast ||
      spec.outputs[0].layout != Layout::kChannelsLast)
    return false;
  for (size_t i = 0; i < p.spatial; ++i)
    if (p.strides[i] != p.kernel[i] || p.dilations[i] != 1 || p.pads[i] != 0 ||
        p.pads[i + p.spatial] != 0 || p.outputPadding[i] != 0)
      return false;
  return true;
}

/// ConvTranspose with non-overlapping windows on channels-last operands (see nonOverlapping):
/// T[M, K1 * ... * Kk * OC] = X[M, IC] * W'[IC, K1 * ... * Kk * OC] with M = N * D1 * ... * Dk (a
/// oneDNN matmul; X is the channels-last input as is), then each row of T is scattered, with the
/// bias added, into its input pixel's K1 x ... x Kk block of the channels-last output: Kk * OC
/// contiguous values per step. W' is the ONNX weights [IC, OC, K...] reordered to [IC, K..., OC]
/// on every run, or once when the weights are constant (TensorDesc::constant).
class DeconvGemmKernel : public Kernel {
public:
  DeconvGemmKernel(const KernelSpec &spec, CpuContext &ctx, const DeconvParams &p)
      : where_(spec.where()), ctx_(ctx),
        hasBias_(spec.inputs.size() == 3 && spec.inputs[2].present()),
        weightsConstant_(spec.inputs[1].constant) {
    const auto &x = spec.inputs[0].shape, &w = spec.inputs[1].shape;
    size_t sp = p.spatial;
    oc_ = w[1];
    int64_t ic = w[0], kk = 1, m = x[0];
    for (size_t d = 0; d < sp; ++d) {
      kk *= p.kernel[d];
      m *= x[2 + d];
    }
    // Output strides in elements, memory order (N, O1, ..., Ok, C), O_d = D_d * K_d.
    std::vector<int64_t> outStride(sp);
    int64_t step = oc_;
    for (size_t d = sp; d-- > 0;) {
      outStride[d] = step;
      step *= x[2 + d] * p.kernel[d];
    }
    // Odometer over the input pixels (N, D1, ..., Dk): per dim its size and output step.
    pixelDims_.push_back(x[0]);
    pixelSteps_.push_back(step);
    for (size_t d = 0; d < sp; ++d) {
      pixelDims_.push_back(x[2 + d]);
      pixelSteps_.push_back(p.kernel[d] * outStride[d]);
    }
    // Output offset of each kernel position over K1..K(k-1); the last kernel dim is contiguous.
    blockOffsets_ = {0};
    for (size_t d = 0; d + 1 < sp; ++d) {
      std::vector<int64_t> next;
      for (int64_t base : blockOffsets_)
        for (int64_t k = 0; k < p.kernel[d]; ++k)
          next.push_back(base + k * outStride[d]);
      blockOffsets_ = std::move(next);
    }
    blockLen_ = p.kernel[sp - 1] * oc_;
    rows_ = m;

    using dt = dnnl::memory::data_type;
    // Weights reorder: dims (IC, OC, K1..Kk), from ONNX order to memory order (IC, K..., OC).
    dnnl::memory::dims wDims(w.begin(), w.end()), wantStrides(w.size());
    int64_t ws = 1;
    wantStrides[1] = ws;
    ws *= oc_;
    for (size_t d = w.size(); d-- > 2;) {
      wantStrides[d] = ws;
      ws *= w[d];
    }
    wantStrides[0] = ws;
    wUser_ = dnnl::memory(plainDesc(w), ctx.engine, DNNL_MEMORY_NONE);
    wScratch_ = dnnl::memory(dnnl::memory::desc(wDims, dt::f32, wantStrides), ctx.engine);
    wReorder_ = dnnl::reorder(wUser_, wScratch_);
    // The matmul on 2-D views of the same bytes.
    dnnl::memory::desc src({m, ic}, dt::f32, dnnl::memory::format_tag::ab);
    dnnl::memory::desc wei({ic, kk * oc_}, dt::f32, dnnl::memory::format_tag::ab);
    dnnl::memory::desc dst({m, kk * oc_}, dt::f32, dnnl::memory::format_tag::ab);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, wei, dst), ctx.engine);
    matmul_ = dnnl::matmul(pd);
    src_ = dnnl::memory(src, ctx.engine, DNNL_MEMORY_NONE);
    wei_ = dnnl::memory(wei, ctx.engine, wScratch_.get_data_handle());
    t_ = dnnl::memory(dst, ctx.engine);
    biasRow_.assign(static_cast<size_t>(blockLen_), 0.0f);
  }

  Status run(const KernelArgs &args) override {
    try {
      if (!weightsConstant_ || weightsDoneFor_ != args.inputs[1]) {
        wUser_.set_data_handle(const_cast<void *>(args.inputs[1]));
        wReorder_.execute(ctx_.stream, wUser_, wScratch_);
        weightsDoneFor_ = args.inputs[1];
      }
      src_.set_data_handle(const_cast<void *>(args.inputs[0]));
      matmul_.execute(ctx_.stream,
                      {{DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, wei_}, {DNNL_ARG_DST, t_}});
      ctx_.stream.wait();
    } catch (const dnnl::error &e) {
      return Status::error(where_, std::string("oneDNN: ") + e.what());
    }
    if (hasBias_) {
      const float *b = static_cast<const float *>(args.inputs[2]);
      for (size_t j = 0; j < biasRow_.size(); ++j)
        biasRow_[j] = b[j % static_cast<size_t>(oc_)];
    }
    scatter(static_cast<const float *>(t_.get_data_handle()),
            static_cast<float *>(args.outputs[0]));
    return Status::ok();
  }

private:
  void scatter(const float *t, float *y) const {
    size_t dims = pixelDims_.size(), len = static_cast<size_t>(blockLen_);
    std::vector<int64_t> idx(dims, 0);
    int64_t base = 0;
    const float *bias = biasRow_.data();
    for (int64_t r = 0; r < rows_; ++r) {
      for (int64_t off : blockOffsets_) {
        float *out = y + base + off;
        for (size_t j = 0; j < len; ++j)
          out[j] = t[j] + bias[j];
        t += len;
      }
      for (size_t d = dims; d-- > 0;) {
        base += pixelSteps_[d];
        if (++idx[d] < pixelDims_[d])
          break;
        base -= pixelSteps_[d] * pixelDims_[d];
        idx[d] = 0;
      }
    }
  }

  std::string where_;
  CpuContext &ctx_;
  bool hasBias_;
  bool weightsConstant_;
  const void *weightsDoneFor_ = nullptr; ///< constant weights already reordered from here
  int64_t oc_ = 0, blockLen_ = 0, rows_ = 0;
  std::vector<int64_t> pixelDims_, pixelSteps_, blockOffsets_;
  std::vector<float> biasRow_;
  dnnl::memory wUser_, wScratch_, src_, wei_, t_;
  dnnl::reorder wReorder_;
  dnnl::matmul matmul_;
};

} // namespace

Status checkConvTranspose(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 3, 1));
  for (size_t i = 0; i < spec.inputs.size(); ++i)
    if (spec.inputs[i].present())
      DTC_RETURN_IF_ERROR(checkDType(spec, true, i, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  for (size_t i = 1; i < spec.inputs.size(); ++i)
    if (spec.inputs[i].layout != Layout::kRowMajor)
      return spec.error("input " + std::to_string(i) +
                        " (weights or bias) is channels-last; the CPU kernel needs it row-major");
  return deconvParams(spec).status();
}

Expected<KernelPtr> createConvTranspose(const KernelSpec &spec, CpuContext &ctx) {
  DTC_ASSIGN_OR_RETURN(DeconvParams p, deconvParams(spec));
  const auto &w = spec.inputs[1].shape;
  bool hasBias = spec.inputs.size() == 3 && spec.inputs[2].present();
  if (nonOverlapping(spec, p))
    return buildKernel(
        spec, [&]() -> KernelPtr { return std::make_unique<DeconvGemmKernel>(spec, ctx, p); });
  return buildKernel(spec, [&]() -> KernelPtr {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    dnnl::memory::desc srcUser = layoutDesc(spec.inputs[0]), dstUser = layoutDesc(spec.outputs[0]);
    // ONNX W is [G * IC/G, OC/G, k...] in memory; oneDNN's logical weights are
    // (G, OC/G, IC/G, k...) (without G when group = 1): describe the ONNX bytes by strides.
    int64_t icg = w[0] / p.group, ocg = w[1], kSize = 1;
    for (size_t i = 2; i < w.size(); ++i)
      kSize *= w[i];
    dnnl::memory::dims wDims = {ocg, icg}, wStrides = {kSize, ocg * kSize};
    if (p.group > 1) {
      wDims.insert(wDims.begin(), p.group);
      wStrides.insert(wStrides.begin(), icg * ocg * kSize);
    }
    std::vector<int64_t> kStrides = rowMajorStrides(p.kernel);
    for (size_t i = 0; i < p.spatial; ++i) {
      wDims.push_back(p.kernel[i]);
      wStrides.push_back(kStrides[i]);
    }
    dnnl::memory::desc weiUser(wDims, dt::f32, wStrides);
    dnnl::memory::desc biasMd = hasBias ? plainDesc(spec.inputs[2].shape) : dnnl::memory::desc();
    auto anyOf = [](const dnnl::memory::desc &md) {
      return dnnl::memory::desc(md.dims(), dt::f32, tag::any);
    };
    dnnl::memory::dims strides(p.strides.begin(), p.strides.end()), dil, padL, padR;
    for (size_t i = 0; i < p.spatial; ++i) {
      dil.push_back(p.dilations[i] - 1);
      padL.push_back(p.pads[i]);
      padR.push_back(p.pads[i + p.spatial]);
    }
    auto makePd = [&](const dnnl::memory::desc &src, const dnnl::memory::desc &dst) {
      dnnl::deconvolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                          dnnl::algorithm::deconvolution_direct, src,
                                          anyOf(weiUser), biasMd, dst, strides, dil, padL, padR);
      return dnnl::deconvolution_forward::primitive_desc(d, ctx.engine);
    };
    // Channels-last activations go to the primitive as they are unless only oneDNN's reference
    // code takes them; otherwise (and for row-major) oneDNN picks its layout and we reorder.
    std::optional<dnnl::deconvolution_forward::primitive_desc> direct;
    if (spec.inputs[0].layout == Layout::kChannelsLast ||
        spec.outputs[0].layout == Layout::kChannelsLast) {
      try {
        direct = makePd(srcUser, dstUser);
        if (std::string(direct->impl_info_str()).find("ref") != std::string::npos)
          direct.reset();
      } catch (const dnnl::error &) {
        direct.reset();
      }
    }
    dnnl::deconvolution_forward::primitive_desc pd =
        direct ? *direct : makePd(anyOf(srcUser), anyOf(dstUser));
    auto k = std::make_unique<DeconvKernel>(spec, ctx);
    k->runner_ = PrimitiveRunner(dnnl::deconvolution_forward(pd), ctx);
    k->inputReorders_.bind(k->runner_, ctx, DNNL_ARG_SRC, srcUser, pd.src_desc(), 0,
                           spec.inputs[0].constant);
    k->inputReorders_.bind(k->runner_, ctx, DNNL_ARG_WEIGHTS, weiUser, pd.weights_desc(), 1,
                           spec.inputs[1].constant);
    if (hasBias)
      k->runner_.input(DNNL_ARG_BIAS, biasMd, 2);
    if (pd.dst_desc() == dstUser) {
      k->runner_.output(DNNL_ARG_DST, dstUser, 0);
    } else {
      Reordered r;
      r.user = dnnl::memory(dstUser, ctx.engine, DNNL_MEMORY_NONE);
      r.scratch = dnnl::memory(pd.dst_desc(), ctx.engine);
      r.reorder = dnnl::reorder(r.scratch, r.user);
      k->runner_.fixed(DNNL_ARG_DST, r.scratch);
      k->dstReorder_ = std::move(r);
    }
    return k;
  });
}

} // namespace dtc::ops::cpu
