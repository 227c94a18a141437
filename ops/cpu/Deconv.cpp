// CPU kernel of ConvTranspose (1-D, 2-D, 3-D; groups; dilations; output_padding; optional bias):
// a oneDNN deconvolution_forward primitive. ONNX weights [C, M/group, k...] are described to
// oneDNN by strides over its logical (G, OC/G, IC/G, k...) dims (the iohw / giohw orders), so no
// weight reorder is needed beyond the one the primitive may ask for (format_tag::any).
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

/// One operand that the primitive wants in another layout: a scratch memory and a reorder.
struct Reordered {
  dnnl::memory user, scratch;
  dnnl::reorder reorder;
};

class DeconvKernel : public Kernel {
public:
  DeconvKernel(const KernelSpec &spec, CpuContext &ctx) : where_(spec.where()), ctx_(ctx) {}

  Status run(const KernelArgs &args) override {
    try {
      for (auto &[index, r] : inputReorders_) {
        r.user.set_data_handle(const_cast<void *>(args.inputs[index]));
        r.reorder.execute(ctx_.stream, r.user, r.scratch);
      }
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
  std::vector<std::pair<size_t, Reordered>> inputReorders_;
  std::optional<Reordered> dstReorder_;
};

} // namespace

Status checkConvTranspose(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 3, 1));
  for (size_t i = 0; i < spec.inputs.size(); ++i)
    if (spec.inputs[i].present())
      DTC_RETURN_IF_ERROR(checkDType(spec, true, i, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  return deconvParams(spec).status();
}

Expected<KernelPtr> createConvTranspose(const KernelSpec &spec, CpuContext &ctx) {
  DTC_ASSIGN_OR_RETURN(DeconvParams p, deconvParams(spec));
  const auto &x = spec.inputs[0].shape, &w = spec.inputs[1].shape;
  bool hasBias = spec.inputs.size() == 3 && spec.inputs[2].present();
  return buildKernel(spec, [&]() -> KernelPtr {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    dnnl::memory::desc srcUser = plainDesc(x), dstUser = plainDesc(spec.outputs[0].shape);
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
    dnnl::deconvolution_forward::desc d(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct, anyOf(srcUser),
        anyOf(weiUser), biasMd, anyOf(dstUser), strides, dil, padL, padR);
    dnnl::deconvolution_forward::primitive_desc pd(d, ctx.engine);
    auto k = std::make_unique<DeconvKernel>(spec, ctx);
    k->runner_ = PrimitiveRunner(dnnl::deconvolution_forward(pd), ctx);
    auto bindInput = [&](int arg, const dnnl::memory::desc &user, const dnnl::memory::desc &want,
                         size_t index) {
      if (user == want) {
        k->runner_.input(arg, user, index);
        return;
      }
      Reordered r;
      r.user = dnnl::memory(user, ctx.engine, DNNL_MEMORY_NONE);
      r.scratch = dnnl::memory(want, ctx.engine); // owned by the kernel
      r.reorder = dnnl::reorder(r.user, r.scratch);
      k->runner_.fixed(arg, r.scratch);
      k->inputReorders_.emplace_back(index, std::move(r));
    };
    bindInput(DNNL_ARG_SRC, srcUser, pd.src_desc(), 0);
    bindInput(DNNL_ARG_WEIGHTS, weiUser, pd.weights_desc(), 1);
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
