// CPU kernels of Conv (1-D, 2-D, 3-D; groups; optional bias) and ai.dtc.FusedConv (Conv, then
// + Z, then an optional Relu): a oneDNN convolution_forward primitive with sum / eltwise_relu
// post-ops. ONNX dilation d is oneDNN dilation d - 1; pads are [begin..., end...]. Channels-last
// src/dst are passed to oneDNN as nwc/nhwc/ndhwc; row-major ones and the weights may be laid out
// by the primitive (format_tag::any) and are then reordered on every run through reorder
// primitives and scratch memories made once and owned by the kernel. The fused relu would turn
// a NaN pre-activation into 0: FusedConv with activation Relu runs unfused when an input is not
// finite (ReluConvNan), so NaN propagates as in onnxruntime and PyTorch.
#include "ops/cpu/NanPropagation.h"

#include <cstdlib>
#include <cstring>
#include <optional>

namespace dtc::ops::cpu {

namespace {

/// Layout policy: which operands the primitive may lay out itself. Chosen by measurement
/// (see createConv).
enum class ConvLayout { kPlain, kAnyWeights, kAny };

ConvLayout convLayout() {
  // DTC_CPU_CONV_LAYOUT=plain|weights|any overrides the default (for benchmarks).
  const char *env = std::getenv("DTC_CPU_CONV_LAYOUT");
  std::string v = env ? env : "";
  if (v == "plain")
    return ConvLayout::kPlain;
  if (v == "weights")
    return ConvLayout::kAnyWeights;
  if (v == "any")
    return ConvLayout::kAny;
  return ConvLayout::kAny;
}

struct ConvParams {
  size_t spatial = 0;
  int64_t group = 1;
  std::vector<int64_t> kernel, strides, dilations, pads;
};

Expected<ConvParams> convParams(const KernelSpec &spec) {
  ConvParams p;
  const auto &x = spec.inputs[0].shape, &w = spec.inputs[1].shape;
  if (x.size() < 3 || x.size() > 5)
    return spec.error("input 0 has rank " + std::to_string(x.size()) +
                      "; the CPU kernel supports 1-D to 3-D convolutions (rank 3 to 5)");
  if (w.size() != x.size())
    return spec.error("weights " + shapeStr(w) + " and input " + shapeStr(x) +
                      " have different ranks");
  p.spatial = x.size() - 2;
  for (size_t i = 1; i < x.size(); ++i)
    if (x[i] == 0 || w[i] == 0)
      return spec.error("input " + shapeStr(x) + " or weights " + shapeStr(w) +
                        " have a zero-sized channel or spatial dim");
  std::string autoPad = spec.attrString("auto_pad", "NOTSET");
  if (autoPad != "NOTSET")
    return spec.error("auto_pad=" + autoPad +
                      " is not supported by the CPU kernel (expected explicit pads)");
  p.group = spec.attrInt("group", 1);
  p.kernel = spec.attrInts("kernel_shape", std::vector<int64_t>(w.begin() + 2, w.end()));
  p.strides = spec.attrInts("strides", std::vector<int64_t>(p.spatial, 1));
  p.dilations = spec.attrInts("dilations", std::vector<int64_t>(p.spatial, 1));
  p.pads = spec.attrInts("pads", std::vector<int64_t>(2 * p.spatial, 0));
  if (p.kernel != std::vector<int64_t>(w.begin() + 2, w.end()))
    return spec.error("kernel_shape " + shapeStr(p.kernel) + " differs from the weights " +
                      shapeStr(w));
  if (p.strides.size() != p.spatial || p.dilations.size() != p.spatial ||
      p.pads.size() != 2 * p.spatial)
    return spec.error("strides, dilations and pads must have " + std::to_string(p.spatial) + ", " +
                      std::to_string(p.spatial) + " and " + std::to_string(2 * p.spatial) +
                      " values");
  for (size_t i = 0; i < p.spatial; ++i)
    if (p.strides[i] < 1 || p.dilations[i] < 1 || p.pads[i] < 0 || p.pads[i + p.spatial] < 0 ||
        p.strides[i] > (1 << 20) || p.dilations[i] > (1 << 20) || p.pads[i] > (1 << 20) ||
        p.pads[i + p.spatial] > (1 << 20))
      return spec.error("strides and dilations must be in [1, 2^20] and pads in [0, 2^20]");
  if (p.group < 1 || x[1] % p.group != 0 || w[0] % p.group != 0 || w[1] * p.group != x[1])
    return spec.error("group " + std::to_string(p.group) + " does not fit input " + shapeStr(x) +
                      " and weights " + shapeStr(w));
  if (spec.inputs.size() >= 3 && spec.inputs[2].present() &&
      spec.inputs[2].shape != std::vector<int64_t>{w[0]})
    return spec.error("bias has shape " + shapeStr(spec.inputs[2].shape) + ", expected [" +
                      std::to_string(w[0]) + "]");
  std::vector<int64_t> out = {x[0], w[0]};
  for (size_t i = 0; i < p.spatial; ++i) {
    __int128 span = __int128(x[2 + i]) + p.pads[i] + p.pads[i + p.spatial] -
                    __int128(p.dilations[i]) * (p.kernel[i] - 1) - 1;
    if (span < 0)
      return spec.error("the window is larger than the padded input on spatial axis " +
                        std::to_string(i));
    out.push_back(static_cast<int64_t>(span / p.strides[i] + 1));
  }
  DTC_RETURN_IF_ERROR(checkOutputShape(spec, out));
  return p;
}

/// What FusedConv adds to Conv: the input index of Z (-1 without) and the activation.
struct Fusion {
  int zIndex = -1;
  bool relu = false;
};

class ConvKernel : public Kernel {
public:
  ConvKernel(const KernelSpec &spec, CpuContext &ctx) : where_(spec.where()), ctx_(ctx) {}

  Status run(const KernelArgs &args) override {
    try {
      inputReorders_.run(args, ctx_.stream);
      if (zIndex_ >= 0) {
        // The sum post-op adds what dst holds: put Z there first (a no-op when the plan made
        // the output overwrite Z in place).
        const void *z = args.inputs[static_cast<size_t>(zIndex_)];
        if (dstReorder_) {
          zUser_.set_data_handle(const_cast<void *>(z));
          zReorder_.execute(ctx_.stream, zUser_, dstReorder_->scratch);
        } else if (z != args.outputs[0]) {
          std::memmove(args.outputs[0], z, outBytes_);
        }
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
  InputReorders inputReorders_;
  std::optional<Reordered> dstReorder_;
  int zIndex_ = -1;
  size_t outBytes_ = 0;
  dnnl::memory zUser_;     ///< Z in its own layout (used with dstReorder_)
  dnnl::reorder zReorder_; ///< Z -> dstReorder_->scratch
};

/// Checks shared by Conv and FusedConv: dtypes, the weights and bias row-major (the registry
/// already limits channels-last to rank >= 3), the attributes and shapes.
Status checkConvCommon(const KernelSpec &spec, size_t maxIn) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, maxIn, 1));
  DTC_RETURN_IF_ERROR(checkDenseFloatDTypes(spec));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  if (spec.inputs[1].layout != Layout::kRowMajor)
    return spec.error("input 1 (weights) is " + std::string(layoutName(spec.inputs[1].layout)) +
                      "; the CPU kernel takes row-major weights");
  return convParams(spec).status();
}

Expected<KernelPtr> createConvKernel(const KernelSpec &spec, CpuContext &ctx,
                                     const Fusion &fusion) {
  DTC_ASSIGN_OR_RETURN(ConvParams p, convParams(spec));
  const auto &w = spec.inputs[1].shape;
  bool hasBias = spec.inputs.size() >= 3 && spec.inputs[2].present();
  ConvLayout layout = convLayout();
  return buildKernel(spec, [&]() -> KernelPtr {
    using dims = dnnl::memory::dims;
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    const TensorDesc &xDesc = spec.inputs[0], &yDesc = spec.outputs[0];
    const dt type = dnnlFloatType(xDesc.dtype);
    dnnl::memory::desc srcUser = layoutDesc(xDesc, type), dstUser = layoutDesc(yDesc, type);
    // Grouped weights are [G, M/G, C/G, k...], the same bytes as ONNX's [M, C/G, k...].
    std::vector<int64_t> wDims = w;
    if (p.group > 1) {
      wDims[0] = w[0] / p.group;
      wDims.insert(wDims.begin(), p.group);
    }
    dnnl::memory::desc weiUser = plainDesc(wDims, type);
    dnnl::memory::desc biasMd =
        hasBias ? plainDesc(spec.inputs[2].shape, type) : dnnl::memory::desc();
    auto anyOf = [](const dnnl::memory::desc &md) {
      return dnnl::memory::desc(md.dims(), md.data_type(), tag::any);
    };
    // Channels-last operands are what the fast convolutions use: pass them as they are, so
    // nothing is reordered. Row-major ones follow the policy.
    bool anyAct = layout == ConvLayout::kAny, anyWei = layout != ConvLayout::kPlain;
    bool anySrc = anyAct && xDesc.layout == Layout::kRowMajor;
    bool anyDst = anyAct && yDesc.layout == Layout::kRowMajor;
    dims strides(p.strides.begin(), p.strides.end()), dil, padL, padR;
    for (size_t i = 0; i < p.spatial; ++i) {
      dil.push_back(p.dilations[i] - 1);
      padL.push_back(p.pads[i]);
      padR.push_back(p.pads[i + p.spatial]);
    }
    dnnl::convolution_forward::desc d(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
        anySrc ? anyOf(srcUser) : srcUser, anyWei ? anyOf(weiUser) : weiUser, biasMd,
        anyDst ? anyOf(dstUser) : dstUser, strides, dil, padL, padR);
    dnnl::post_ops ops;
    if (fusion.zIndex >= 0)
      ops.append_sum(1.f);
    if (fusion.relu)
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    dnnl::convolution_forward::primitive_desc pd(d, attr, ctx.engine);
    auto k = std::make_unique<ConvKernel>(spec, ctx);
    k->runner_ = PrimitiveRunner(dnnl::convolution_forward(pd), ctx);
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
      if (fusion.zIndex >= 0) {
        // Z has the output's layout (checked), so the same user descriptor reads it.
        k->zUser_ = dnnl::memory(dstUser, ctx.engine, DNNL_MEMORY_NONE);
        k->zReorder_ = dnnl::reorder(k->zUser_, r.scratch);
      }
      k->dstReorder_ = std::move(r);
    }
    k->zIndex_ = fusion.zIndex;
    k->outBytes_ = static_cast<size_t>(yDesc.byteSize());
    return k;
  });
}

/// The FusedConv operands and attributes beyond Conv's.
Expected<Fusion> fusion(const KernelSpec &spec) {
  Fusion f;
  auto it = spec.attrs.find("activation");
  if (it != spec.attrs.end() && it->second.kind() != ir::AttrKind::kString)
    return spec.error("attribute 'activation' must be a string");
  std::string act = spec.attrString("activation", "");
  if (act != "" && act != "Relu")
    return spec.error("activation '" + act +
                      "' is not supported by the CPU kernel (expected \"\" or \"Relu\")");
  f.relu = act == "Relu";
  if (spec.inputs.size() == 4 && spec.inputs[3].present()) {
    const TensorDesc &z = spec.inputs[3], &y = spec.outputs[0];
    if (z.shape != y.shape || z.layout != y.layout)
      return spec.error("input 3 (Z) is " + z.str() + "; expected the output's " + y.str());
    f.zIndex = 3;
  }
  return f;
}

/// FusedConv with a fused relu. oneDNN's relu post-op maps NaN to 0, so when X, W, B or Z holds
/// a NaN or an infinity (inf * 0 and inf - inf make NaN inside the sum), the convolution runs
/// without the relu (a second kernel, made on first need) and a NaN-keeping relu follows.
class ReluConvNan : public Kernel {
public:
  ReluConvNan(const KernelSpec &spec, CpuContext &ctx, KernelPtr fused, Fusion unfused)
      : spec_(spec), ctx_(ctx), fused_(std::move(fused)), unfusedFusion_(unfused) {}

  Status run(const KernelArgs &args) override {
    bool finite = true;
    for (size_t i = 0; finite && i < args.numInputs && i < spec_.inputs.size(); ++i)
      if (args.inputs[i] && spec_.inputs[i].present())
        finite = !anyNonFinite(static_cast<const float *>(args.inputs[i]),
                               spec_.inputs[i].numElements());
    if (finite)
      return fused_->run(args);
    if (!unfused_) {
      DTC_ASSIGN_OR_RETURN(unfused_, createConvKernel(spec_, ctx_, unfusedFusion_));
    }
    DTC_RETURN_IF_ERROR(unfused_->run(args));
    float *y = static_cast<float *>(args.outputs[0]);
    reluKeepNan(y, y, spec_.outputs[0].numElements());
    return Status::ok();
  }

private:
  KernelSpec spec_;
  CpuContext &ctx_;
  KernelPtr fused_, unfused_;
  Fusion unfusedFusion_;
};

} // namespace

Status checkConv(const KernelSpec &spec) { return checkConvCommon(spec, 3); }

Expected<KernelPtr> createConv(const KernelSpec &spec, CpuContext &ctx) {
  return createConvKernel(spec, ctx, Fusion{});
}

Status checkFusedConv(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkConvCommon(spec, 4));
  // The NaN-keeping relu fallback (ReluConvNan) reads f32; mixed precision never fuses a bf16
  // Conv (its output goes to a Cast).
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32}));
  return fusion(spec).status();
}

Expected<KernelPtr> createFusedConv(const KernelSpec &spec, CpuContext &ctx) {
  DTC_ASSIGN_OR_RETURN(Fusion f, fusion(spec));
  DTC_ASSIGN_OR_RETURN(KernelPtr k, createConvKernel(spec, ctx, f));
  if (!f.relu)
    return k;
  Fusion unfused = f;
  unfused.relu = false;
  return KernelPtr(std::make_unique<ReluConvNan>(spec, ctx, std::move(k), unfused));
}

int inPlaceFusedConv(const KernelSpec &spec) {
  // Output 0 overwrites Z: the kernel then skips copying Z into dst (see ConvKernel::run).
  if (spec.inputs.size() < 4 || !spec.inputs[3].present())
    return -1;
  const TensorDesc &z = spec.inputs[3], &y = spec.outputs.at(0);
  return z.dtype == y.dtype && z.shape == y.shape && z.layout == y.layout ? 3 : -1;
}

} // namespace dtc::ops::cpu
