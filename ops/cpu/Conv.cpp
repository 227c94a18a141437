// CPU kernel of Conv (1-D, 2-D, 3-D; groups; optional bias): a oneDNN convolution_forward
// primitive. ONNX dilation d is oneDNN dilation d - 1; pads are [begin..., end...]. The
// primitive may pick blocked layouts (format_tag::any); operands are then reordered on every
// run through reorder primitives and scratch memories made once and owned by the kernel.
#include "ops/cpu/OneDnnUtil.h"

#include <cstdlib>
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
  if (spec.inputs.size() == 3 && spec.inputs[2].present() &&
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

/// One operand that the primitive wants in another layout: a scratch memory and a reorder.
struct Reordered {
  dnnl::memory user, scratch;
  dnnl::reorder reorder;
};

class ConvKernel : public Kernel {
public:
  ConvKernel(const KernelSpec &spec, CpuContext &ctx) : where_(spec.where()), ctx_(ctx) {}

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

Status checkConv(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 3, 1));
  for (size_t i = 0; i < spec.inputs.size(); ++i)
    if (spec.inputs[i].present())
      DTC_RETURN_IF_ERROR(checkDType(spec, true, i, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  return convParams(spec).status();
}

Expected<KernelPtr> createConv(const KernelSpec &spec, CpuContext &ctx) {
  DTC_ASSIGN_OR_RETURN(ConvParams p, convParams(spec));
  const auto &x = spec.inputs[0].shape, &w = spec.inputs[1].shape;
  bool hasBias = spec.inputs.size() == 3 && spec.inputs[2].present();
  ConvLayout layout = convLayout();
  return buildKernel(spec, [&]() -> KernelPtr {
    using dims = dnnl::memory::dims;
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    dnnl::memory::desc srcUser = plainDesc(x), dstUser = plainDesc(spec.outputs[0].shape);
    // Grouped weights are [G, M/G, C/G, k...], the same bytes as ONNX's [M, C/G, k...].
    std::vector<int64_t> wDims = w;
    if (p.group > 1) {
      wDims[0] = w[0] / p.group;
      wDims.insert(wDims.begin(), p.group);
    }
    dnnl::memory::desc weiUser = plainDesc(wDims);
    dnnl::memory::desc biasMd = hasBias ? plainDesc(spec.inputs[2].shape) : dnnl::memory::desc();
    auto anyOf = [](const dnnl::memory::desc &md) {
      return dnnl::memory::desc(md.dims(), dt::f32, tag::any);
    };
    bool anyAct = layout == ConvLayout::kAny, anyWei = layout != ConvLayout::kPlain;
    dims strides(p.strides.begin(), p.strides.end()), dil, padL, padR;
    for (size_t i = 0; i < p.spatial; ++i) {
      dil.push_back(p.dilations[i] - 1);
      padL.push_back(p.pads[i]);
      padR.push_back(p.pads[i + p.spatial]);
    }
    dnnl::convolution_forward::desc d(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
        anyAct ? anyOf(srcUser) : srcUser, anyWei ? anyOf(weiUser) : weiUser, biasMd,
        anyAct ? anyOf(dstUser) : dstUser, strides, dil, padL, padR);
    dnnl::convolution_forward::primitive_desc pd(d, ctx.engine);
    auto k = std::make_unique<ConvKernel>(spec, ctx);
    k->runner_ = PrimitiveRunner(dnnl::convolution_forward(pd), ctx);
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
