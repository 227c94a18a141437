// CPU kernel of LayerNormalization (opset 17): X viewed as [outer, inner] (inner = the product of
// X.shape[axis:]) goes through a oneDNN layer_normalization_forward primitive (training kind,
// so that it hands out mean and variance); InvStdDev = 1 / sqrt(variance + epsilon). Scale and B
// that broadcast to X.shape[axis:] without having its full size are expanded on every run.
#include "ops/cpu/OneDnnUtil.h"

#include <cmath>
#include <limits>

namespace dtc::ops::cpu {

namespace {

struct NormShape {
  int64_t axis = 0, outer = 1, inner = 1;
  std::vector<int64_t> tail; ///< X.shape[axis:]
};

NormShape normShape(const KernelSpec &spec) {
  NormShape n;
  const auto &x = spec.inputs[0].shape;
  int64_t rank = static_cast<int64_t>(x.size());
  n.axis = spec.attrInt("axis", -1);
  if (n.axis < 0)
    n.axis += rank;
  for (int64_t i = 0; i < rank; ++i)
    (i < n.axis ? n.outer : n.inner) *= x[static_cast<size_t>(i)];
  n.tail.assign(x.begin() + n.axis, x.end());
  return n;
}

bool outputPresent(const KernelSpec &spec, size_t i) {
  return spec.outputs.size() > i && spec.outputs[i].present();
}

/// For a Scale/B of shape `s` broadcast to `tail`: the source index of each of the tail's
/// elements (row-major).
std::vector<int64_t> broadcastIndex(const std::vector<int64_t> &s,
                                    const std::vector<int64_t> &tail) {
  std::vector<int64_t> padded(tail.size() - s.size(), 1);
  padded.insert(padded.end(), s.begin(), s.end());
  std::vector<int64_t> srcStrides = rowMajorStrides(padded);
  for (size_t d = 0; d < tail.size(); ++d)
    if (padded[d] == 1)
      srcStrides[d] = 0;
  int64_t total = 1;
  for (int64_t d : tail)
    total *= d;
  std::vector<int64_t> index(static_cast<size_t>(total));
  std::vector<int64_t> idx(tail.size(), 0);
  int64_t src = 0;
  for (int64_t o = 0; o < total; ++o) {
    index[static_cast<size_t>(o)] = src;
    for (size_t d = tail.size(); d-- > 0;) {
      src += srcStrides[d];
      if (++idx[d] < tail[d])
        break;
      src -= srcStrides[d] * tail[d];
      idx[d] = 0;
    }
  }
  return index;
}

class LayerNormKernel : public Kernel {
public:
  LayerNormKernel(const KernelSpec &spec, CpuContext &ctx) : where_(spec.where()), ctx_(ctx) {}

  Status run(const KernelArgs &args) override {
    if (inner_ == 0) {
      // Empty normalized part: Y is empty; statistics of an empty set are NaN.
      for (size_t o = 1; o < 3 && o < args.numOutputs; ++o)
        if (args.outputs[o])
          std::fill_n(static_cast<float *>(args.outputs[o]), outer_,
                      std::numeric_limits<float>::quiet_NaN());
      return Status::ok();
    }
    for (Expanded &e : expanded_) {
      const float *src = static_cast<const float *>(args.inputs[e.input]);
      float *dst = static_cast<float *>(e.mem.get_data_handle());
      for (size_t i = 0; i < e.index.size(); ++i)
        dst[i] = src[e.index[i]];
    }
    try {
      runner_.execute(args);
      ctx_.stream.wait();
    } catch (const dnnl::error &e) {
      return Status::error(where_, std::string("oneDNN: ") + e.what());
    }
    if (invStdOutput_ && args.outputs[2]) {
      const float *var = static_cast<const float *>(variance_.get_data_handle());
      float *inv = static_cast<float *>(args.outputs[2]);
      for (int64_t i = 0; i < outer_; ++i)
        inv[i] = 1.0f / std::sqrt(var[i] + epsilon_);
    }
    return Status::ok();
  }

  struct Expanded {
    size_t input;
    std::vector<int64_t> index;
    dnnl::memory mem;
  };
  std::string where_;
  CpuContext &ctx_;
  PrimitiveRunner runner_;
  std::vector<Expanded> expanded_;
  dnnl::memory variance_, meanScratch_;
  int64_t outer_ = 0, inner_ = 0;
  float epsilon_ = 1e-5f;
  bool invStdOutput_ = false;
};

} // namespace

Status checkLayerNorm(const KernelSpec &spec) {
  if (spec.inputs.size() < 2 || spec.inputs.size() > 3 || spec.outputs.empty() ||
      spec.outputs.size() > 3)
    return spec.error("expected 2 to 3 inputs and 1 to 3 outputs, got " +
                      std::to_string(spec.inputs.size()) + " and " +
                      std::to_string(spec.outputs.size()));
  if (!spec.inputs[0].present() || !spec.inputs[1].present() || !spec.outputs[0].present())
    return spec.error("inputs X and Scale and output Y are required");
  for (size_t i = 0; i < spec.inputs.size(); ++i)
    if (spec.inputs[i].present())
      DTC_RETURN_IF_ERROR(checkDType(spec, true, i, {ir::DType::kFloat32}));
  for (size_t i = 0; i < spec.outputs.size(); ++i)
    if (spec.outputs[i].present())
      DTC_RETURN_IF_ERROR(checkDType(spec, false, i, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  int64_t stash = spec.attrInt("stash_type", 1);
  if (stash != 1)
    return spec.error("stash_type " + std::to_string(stash) +
                      " is not supported by the CPU kernel (only 1, float32)");
  float eps = spec.attrFloat("epsilon", 1e-5f);
  if (!(eps >= 0.0f) || !std::isfinite(eps))
    return spec.error("epsilon must be finite and >= 0, got " + std::to_string(eps));
  const auto &x = spec.inputs[0].shape;
  int64_t rank = static_cast<int64_t>(x.size());
  int64_t axis = spec.attrInt("axis", -1);
  if (rank == 0)
    return spec.error("input 0 is a scalar; LayerNormalization needs rank >= 1");
  if (axis < -rank || axis >= rank)
    return spec.error("axis " + std::to_string(axis) + " is out of range for rank " +
                      std::to_string(rank));
  NormShape n = normShape(spec);
  for (size_t i = 1; i < spec.inputs.size(); ++i) {
    if (!spec.inputs[i].present())
      continue;
    std::vector<int64_t> b;
    if (!broadcastShapes(n.tail, spec.inputs[i].shape, b) || b != n.tail)
      return spec.error(std::string(i == 1 ? "Scale " : "B ") + shapeStr(spec.inputs[i].shape) +
                        " does not broadcast to the normalized shape " + shapeStr(n.tail));
  }
  DTC_RETURN_IF_ERROR(checkOutputShape(spec, x));
  std::vector<int64_t> stats = x;
  for (size_t i = static_cast<size_t>(n.axis); i < stats.size(); ++i)
    stats[i] = 1;
  for (size_t i = 1; i < spec.outputs.size(); ++i)
    if (spec.outputs[i].present() && spec.outputs[i].shape != stats)
      return spec.error("output " + std::to_string(i) + " has shape " +
                        shapeStr(spec.outputs[i].shape) + ", expected " + shapeStr(stats));
  return Status::ok();
}

Expected<KernelPtr> createLayerNorm(const KernelSpec &spec, CpuContext &ctx) {
  NormShape n = normShape(spec);
  auto k = std::make_unique<LayerNormKernel>(spec, ctx);
  k->outer_ = n.outer;
  k->inner_ = n.inner;
  k->epsilon_ = spec.attrFloat("epsilon", 1e-5f);
  k->invStdOutput_ = outputPresent(spec, 2);
  if (n.inner == 0)
    return KernelPtr(std::move(k));
  bool hasB = spec.inputs.size() == 3 && spec.inputs[2].present();
  return buildKernel(spec, [&]() -> KernelPtr {
    using dt = dnnl::memory::data_type;
    dnnl::memory::desc data = plainDesc({n.outer, n.inner});
    dnnl::memory::desc stat = plainDesc({n.outer});
    dnnl::memory::desc param = plainDesc({n.inner});
    auto flags = dnnl::normalization_flags::use_scale;
    if (hasB)
      flags |= dnnl::normalization_flags::use_shift;
    float eps = spec.attrFloat("epsilon", 1e-5f);
    dnnl::layer_normalization_forward::desc d(dnnl::prop_kind::forward_training, data, stat, eps,
                                              flags);
    dnnl::layer_normalization_forward::primitive_desc pd(d, ctx.engine);
    k->runner_ = PrimitiveRunner(dnnl::layer_normalization_forward(pd), ctx);
    k->runner_.input(DNNL_ARG_SRC, data, 0);
    k->runner_.output(DNNL_ARG_DST, data, 0);
    auto bindParam = [&](int arg, size_t index) {
      if (spec.inputs[index].numElements() == n.inner) {
        k->runner_.input(arg, param, index);
        return;
      }
      LayerNormKernel::Expanded e{index, broadcastIndex(spec.inputs[index].shape, n.tail),
                                  dnnl::memory(param, ctx.engine)};
      k->runner_.fixed(arg, e.mem);
      k->expanded_.push_back(std::move(e));
    };
    bindParam(DNNL_ARG_SCALE, 1);
    if (hasB)
      bindParam(DNNL_ARG_SHIFT, 2);
    if (outputPresent(spec, 1)) {
      k->runner_.output(DNNL_ARG_MEAN, stat, 1);
    } else {
      k->meanScratch_ = dnnl::memory(stat, ctx.engine);
      k->runner_.fixed(DNNL_ARG_MEAN, k->meanScratch_);
    }
    k->variance_ = dnnl::memory(dnnl::memory::desc({n.outer}, dt::f32, {1}), ctx.engine);
    k->runner_.fixed(DNNL_ARG_VARIANCE, k->variance_);
    return KernelPtr(std::move(k));
  });
}

} // namespace dtc::ops::cpu
