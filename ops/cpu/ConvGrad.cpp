// CPU kernels of ai.dtc.ConvGradData (oneDNN convolution_backward_data) and
// ai.dtc.ConvGradWeight (convolution_backward_weights, with the bias gradient when asked), the
// backward ops of Conv and ConvTranspose (ops/training/ConvGradOps.cpp). 1-D to 3-D, groups,
// strides, dilations (ONNX d is oneDNN d - 1), asymmetric pads. The primitive descriptors are
// made once per kernel (with a forward_training hint); the primitives pick their layouts
// (format_tag::any) and the row-major operands are reordered through kernel-owned scratch
// memories, as the forward Conv kernel does. f32, or bf16 for mixed precision (every operand bf16,
// f32 accumulation inside oneDNN).
#include "ops/cpu/OneDnnUtil.h"

#include <optional>

namespace dtc::ops::cpu {

namespace {

/// The window and the shapes of one ConvGrad op, in forward terms: src X [N, C, I...], weights
/// W [M, C/group, k...], dst Y [N, M, O...].
struct ConvGradParams {
  size_t spatial = 0;
  int64_t group = 1;
  std::vector<int64_t> x, w, y;
  dnnl::memory::dims strides, dilations, padL, padR;
  dnnl::memory::data_type dt = dnnl::memory::data_type::f32; ///< of every operand
};

/// Reads the window attributes and checks that `x`, `w`, `y` fit them (Y's spatial sizes are
/// floor((I + pads - dilation * (k - 1) - 1) / stride) + 1).
Expected<ConvGradParams> convGradParams(const KernelSpec &spec, std::vector<int64_t> x,
                                        std::vector<int64_t> w, std::vector<int64_t> y) {
  ConvGradParams p;
  p.dt = dnnlFloatType(spec.inputs[0].dtype);
  if (x.size() < 3 || x.size() > 5 || w.size() != x.size() || y.size() != x.size())
    return spec.error("X " + shapeStr(x) + ", W " + shapeStr(w) + " and dY " + shapeStr(y) +
                      " must have one rank in [3, 5]");
  p.spatial = x.size() - 2;
  size_t sp = p.spatial;
  p.group = spec.attrInt("group", 1);
  std::vector<int64_t> kernel = spec.attrInts("kernel_shape");
  std::vector<int64_t> strides = spec.attrInts("strides", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> dilations = spec.attrInts("dilations", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> pads = spec.attrInts("pads", std::vector<int64_t>(2 * sp, 0));
  if (kernel.size() != sp || strides.size() != sp || dilations.size() != sp ||
      pads.size() != 2 * sp)
    return spec.error("kernel_shape, strides, dilations must have " + std::to_string(sp) +
                      " values and pads " + std::to_string(2 * sp));
  if (std::vector<int64_t>(w.begin() + 2, w.end()) != kernel)
    return spec.error("kernel_shape " + shapeStr(kernel) + " differs from the weights " +
                      shapeStr(w));
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] < 1 || w[i] < 1 || y[i] < 1)
      return spec.error("X " + shapeStr(x) + ", W " + shapeStr(w) + " and dY " + shapeStr(y) +
                        " must have no zero dims");
  if (p.group < 1 || x[1] % p.group != 0 || w[0] % p.group != 0 || w[1] * p.group != x[1] ||
      y[1] != w[0] || y[0] != x[0])
    return spec.error("group " + std::to_string(p.group) + " does not fit X " + shapeStr(x) +
                      ", W " + shapeStr(w) + " and dY " + shapeStr(y));
  constexpr int64_t kMax = int64_t(1) << 20;
  for (size_t i = 0; i < sp; ++i) {
    if (strides[i] < 1 || dilations[i] < 1 || pads[i] < 0 || pads[i + sp] < 0 ||
        strides[i] > kMax || dilations[i] > kMax || pads[i] > kMax || pads[i + sp] > kMax)
      return spec.error("strides and dilations must be in [1, 2^20] and pads in [0, 2^20]");
    int64_t span = x[2 + i] + pads[i] + pads[i + sp] - dilations[i] * (kernel[i] - 1) - 1;
    if (span < 0 || span / strides[i] + 1 != y[2 + i])
      return spec.error("dY " + shapeStr(y) + " does not match the window over X " + shapeStr(x) +
                        " on spatial axis " + std::to_string(i));
    p.strides.push_back(strides[i]);
    p.dilations.push_back(dilations[i] - 1);
    p.padL.push_back(pads[i]);
    p.padR.push_back(pads[i + sp]);
  }
  p.x = std::move(x);
  p.w = std::move(w);
  p.y = std::move(y);
  return p;
}

/// ONNX weights [M, C/G, k...] as oneDNN's [G, M/G, C/G, k...] when grouped (the same bytes).
dnnl::memory::desc weightsDesc(const ConvGradParams &p) {
  std::vector<int64_t> dims = p.w;
  if (p.group > 1) {
    dims[0] /= p.group;
    dims.insert(dims.begin(), p.group);
  }
  return plainDesc(dims, p.dt);
}

dnnl::memory::desc anyOf(const dnnl::memory::desc &md) {
  return dnnl::memory::desc(md.dims(), md.data_type(), dnnl::memory::format_tag::any);
}

/// The forward primitive descriptor that the backward ones take as their hint.
dnnl::convolution_forward::primitive_desc
forwardHint(const ConvGradParams &p, const dnnl::memory::desc &bias, CpuContext &ctx) {
  dnnl::convolution_forward::desc d(
      dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
      anyOf(plainDesc(p.x, p.dt)), anyOf(weightsDesc(p)), bias, anyOf(plainDesc(p.y, p.dt)),
      p.strides, p.dilations, p.padL, p.padR);
  return dnnl::convolution_forward::primitive_desc(d, ctx.engine);
}

/// A kernel that runs one backward primitive: input reorders, the primitive, then reorders of
/// the outputs the primitive wrote in its own layout.
class ConvGradKernel : public Kernel {
public:
  ConvGradKernel(const KernelSpec &spec, CpuContext &ctx) : where_(spec.where()), ctx_(ctx) {}

  Status run(const KernelArgs &args) override {
    try {
      inputReorders_.run(args, ctx_.stream);
      runner_.execute(args);
      for (auto &[index, r] : outputReorders_) {
        r.user.set_data_handle(args.outputs[index]);
        r.reorder.execute(ctx_.stream, r.scratch, r.user);
      }
      ctx_.stream.wait();
    } catch (const dnnl::error &e) {
      return Status::error(where_, std::string("oneDNN: ") + e.what());
    }
    return Status::ok();
  }

  /// Binds oneDNN output `arg` (laid out as `want`) to kernel output `index` (`user`).
  void bindOutput(int arg, const dnnl::memory::desc &user, const dnnl::memory::desc &want,
                  size_t index) {
    if (want == user) {
      runner_.output(arg, user, index);
      return;
    }
    Reordered r;
    r.user = dnnl::memory(user, ctx_.engine, DNNL_MEMORY_NONE);
    r.scratch = dnnl::memory(want, ctx_.engine);
    r.reorder = dnnl::reorder(r.scratch, r.user);
    runner_.fixed(arg, r.scratch);
    outputReorders_.emplace_back(index, std::move(r));
  }

  std::string where_;
  CpuContext &ctx_;
  PrimitiveRunner runner_;
  InputReorders inputReorders_;
  std::vector<std::pair<size_t, Reordered>> outputReorders_;
};

Status checkCommon(const KernelSpec &spec, size_t minOut, size_t maxOut) {
  if (spec.outputs.size() < minOut || spec.outputs.size() > maxOut)
    return spec.error("expected " + std::to_string(minOut) +
                      (minOut == maxOut ? "" : " or " + std::to_string(maxOut)) + " outputs, got " +
                      std::to_string(spec.outputs.size()));
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, spec.outputs.size()));
  DTC_RETURN_IF_ERROR(checkDenseFloatDTypes(spec));
  for (size_t i = 0; i < 2; ++i)
    if (spec.inputs[i].layout != Layout::kRowMajor)
      return spec.error("input " + std::to_string(i) + " must be row-major");
  return checkShapes(spec);
}

Expected<ConvGradParams> dataParams(const KernelSpec &spec) {
  std::vector<int64_t> x = spec.attrInts("input_shape");
  if (x != spec.outputs[0].shape)
    return spec.error("input_shape " + shapeStr(x) + " differs from output 0 " +
                      shapeStr(spec.outputs[0].shape));
  return convGradParams(spec, x, spec.inputs[1].shape, spec.inputs[0].shape);
}

Expected<ConvGradParams> weightParams(const KernelSpec &spec) {
  DTC_ASSIGN_OR_RETURN(
      ConvGradParams p,
      convGradParams(spec, spec.inputs[1].shape, spec.outputs[0].shape, spec.inputs[0].shape));
  if (spec.outputs.size() == 2 && spec.outputs[1].shape != std::vector<int64_t>{p.w[0]})
    return spec.error("output 1 (dB) has shape " + shapeStr(spec.outputs[1].shape) +
                      ", expected [" + std::to_string(p.w[0]) + "]");
  return p;
}

} // namespace

Status checkConvGradData(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkCommon(spec, 1, 1));
  return dataParams(spec).status();
}

Expected<KernelPtr> createConvGradData(const KernelSpec &spec, CpuContext &ctx) {
  DTC_ASSIGN_OR_RETURN(ConvGradParams p, dataParams(spec));
  return buildKernel(spec, [&]() -> KernelPtr {
    dnnl::memory::desc xUser = plainDesc(p.x, p.dt), wUser = weightsDesc(p),
                       yUser = plainDesc(p.y, p.dt);
    auto hint = forwardHint(p, dnnl::memory::desc(), ctx);
    dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, anyOf(xUser),
                                            anyOf(wUser), anyOf(yUser), p.strides, p.dilations,
                                            p.padL, p.padR);
    dnnl::convolution_backward_data::primitive_desc pd(d, ctx.engine, hint);
    auto k = std::make_unique<ConvGradKernel>(spec, ctx);
    k->runner_ = PrimitiveRunner(dnnl::convolution_backward_data(pd), ctx);
    k->inputReorders_.bind(k->runner_, ctx, DNNL_ARG_DIFF_DST, yUser, pd.diff_dst_desc(), 0,
                           spec.inputs[0].constant);
    k->inputReorders_.bind(k->runner_, ctx, DNNL_ARG_WEIGHTS, wUser, pd.weights_desc(), 1,
                           spec.inputs[1].constant);
    k->bindOutput(DNNL_ARG_DIFF_SRC, xUser, pd.diff_src_desc(), 0);
    return k;
  });
}

Status checkConvGradWeight(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkCommon(spec, 1, 2));
  return weightParams(spec).status();
}

Expected<KernelPtr> createConvGradWeight(const KernelSpec &spec, CpuContext &ctx) {
  DTC_ASSIGN_OR_RETURN(ConvGradParams p, weightParams(spec));
  bool hasBias = spec.outputs.size() == 2;
  return buildKernel(spec, [&]() -> KernelPtr {
    dnnl::memory::desc xUser = plainDesc(p.x, p.dt), wUser = weightsDesc(p),
                       yUser = plainDesc(p.y, p.dt);
    dnnl::memory::desc bias = hasBias ? plainDesc({p.w[0]}, p.dt) : dnnl::memory::desc();
    auto hint = forwardHint(p, bias, ctx);
    dnnl::convolution_backward_weights::desc d(dnnl::algorithm::convolution_direct, anyOf(xUser),
                                               anyOf(wUser), bias, anyOf(yUser), p.strides,
                                               p.dilations, p.padL, p.padR);
    dnnl::convolution_backward_weights::primitive_desc pd(d, ctx.engine, hint);
    auto k = std::make_unique<ConvGradKernel>(spec, ctx);
    k->runner_ = PrimitiveRunner(dnnl::convolution_backward_weights(pd), ctx);
    k->inputReorders_.bind(k->runner_, ctx, DNNL_ARG_DIFF_DST, yUser, pd.diff_dst_desc(), 0,
                           spec.inputs[0].constant);
    k->inputReorders_.bind(k->runner_, ctx, DNNL_ARG_SRC, xUser, pd.src_desc(), 1,
                           spec.inputs[1].constant);
    k->bindOutput(DNNL_ARG_DIFF_WEIGHTS, wUser, pd.diff_weights_desc(), 0);
    if (hasBias)
      k->bindOutput(DNNL_ARG_DIFF_BIAS, bias, pd.diff_bias_desc(), 1);
    return k;
  });
}

} // namespace dtc::ops::cpu
