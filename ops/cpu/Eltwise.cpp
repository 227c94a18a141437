// CPU kernels of the unary activations Relu, Sigmoid and Tanh, f32 only: Relu is a hand loop
// (reluKeepNan, NanPropagation.h: oneDNN's eltwise_relu with alpha 0 turns NaN into 0, the loop
// keeps it as onnxruntime and PyTorch, at the same speed), Sigmoid and Tanh one oneDNN
// eltwise_forward primitive each (eltwise_logistic, eltwise_tanh; both keep NaN). All run in
// place. Input and output share one layout (either: an elementwise op reads its operands as flat
// arrays).
#include "ops/cpu/NanPropagation.h"

namespace dtc::ops::cpu {

namespace {

dnnl::algorithm eltwiseAlgorithm(const std::string &op) {
  if (op == "Sigmoid")
    return dnnl::algorithm::eltwise_logistic;
  return dnnl::algorithm::eltwise_tanh;
}

class ReluKernel : public Kernel {
public:
  explicit ReluKernel(const KernelSpec &spec) : n_(spec.inputs[0].numElements()) {}
  Status run(const KernelArgs &args) override {
    reluKeepNan(static_cast<const float *>(args.inputs[0]), static_cast<float *>(args.outputs[0]),
                n_);
    return Status::ok();
  }

private:
  int64_t n_;
};

} // namespace

Status checkEltwise(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  DTC_RETURN_IF_ERROR(checkSameLayout(spec, true, 0, false, 0));
  return checkOutputShape(spec, spec.inputs[0].shape);
}

Expected<KernelPtr> createEltwise(const KernelSpec &spec, CpuContext &ctx) {
  if (spec.op == "Relu")
    return KernelPtr(std::make_unique<ReluKernel>(spec));
  return buildKernel(spec, [&]() -> KernelPtr {
    // Same layout for both operands, so the flat (row-major) view computes the same thing.
    dnnl::memory::desc md = plainDesc(spec.inputs[0].shape);
    dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, eltwiseAlgorithm(spec.op), md,
                                  0.f, 0.f);
    dnnl::eltwise_forward::primitive_desc pd(d, ctx.engine);
    PrimitiveRunner r(dnnl::eltwise_forward(pd), ctx);
    r.input(DNNL_ARG_SRC, md, 0);
    r.output(DNNL_ARG_DST, md, 0);
    return std::make_unique<SinglePrimitiveKernel>(spec, ctx, std::move(r));
  });
}

int inPlaceEltwise(const KernelSpec &) { return 0; }

} // namespace dtc::ops::cpu
