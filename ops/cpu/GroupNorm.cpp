// CPU kernels of InstanceNormalization, GroupNormalization (opset 21 form: per-channel scale and
// bias) and ai.dtc.GroupNormGrad: loops over (sample, group) blocks of X (N, C, D1..Dn), each a
// contiguous run of (C / groups) * D1*..*Dn elements; statistics in double from deviations to the
// block's first element (no cancellation). An instance normalization is a group normalization
// with one channel per group. f32, row-major.
#include "ops/cpu/OneDnnUtil.h"

#include <cmath>
#include <vector>

namespace dtc::ops::cpu {

namespace {

/// The blocks of X: batch samples, groups per sample, channels per group, spatial elements.
struct Blocks {
  int64_t batch = 0, channels = 0, groups = 1, perGroup = 0, spatial = 1;
  int64_t size() const { return perGroup * spatial; } ///< elements of one block
  int64_t offset(int64_t n, int64_t g) const { return (n * channels + g * perGroup) * spatial; }
};

/// Groups of the spec: num_groups, or C for InstanceNormalization.
Blocks blocksOf(const KernelSpec &spec, size_t xIndex) {
  const std::vector<int64_t> &x = spec.inputs[xIndex].shape;
  Blocks b;
  b.batch = x[0];
  b.channels = x[1];
  for (size_t i = 2; i < x.size(); ++i)
    b.spatial *= x[i];
  b.groups = spec.op == "InstanceNormalization" ? b.channels : spec.attrInt("num_groups", 0);
  b.perGroup = b.groups > 0 ? b.channels / b.groups : 0;
  return b;
}

/// Mean and 1 / sqrt(biased variance + epsilon) of `len` (>= 1) elements.
std::pair<double, double> moments(const float *x, int64_t len, float epsilon) {
  const double shift = x[0];
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < len; ++i) {
    const double d = static_cast<double>(x[i]) - shift;
    sum += d;
    sq += d * d;
  }
  const double n = static_cast<double>(len);
  const double var = std::max(0.0, (sq - sum * (sum / n)) / n);
  return {shift + sum / n, 1.0 / std::sqrt(var + static_cast<double>(epsilon))};
}

/// Shared checks: f32 operands, X (input xIndex) of rank >= 2 whose channels divide into the
/// groups, inputs before X of X's shape, the inputs after X [C], output 0 of X's shape and
/// outputs 1.. [C].
Status checkGroupNormLike(const KernelSpec &spec, size_t xIndex, size_t numInputs,
                          size_t maxOutputs) {
  if (spec.inputs.size() != numInputs || spec.outputs.empty() || spec.outputs.size() > maxOutputs)
    return spec.error("expected " + std::to_string(numInputs) + " inputs and 1 to " +
                      std::to_string(maxOutputs) + " outputs, got " +
                      std::to_string(spec.inputs.size()) + " and " +
                      std::to_string(spec.outputs.size()));
  for (size_t i = 0; i < numInputs; ++i) {
    if (!spec.inputs[i].present())
      return spec.error("input " + std::to_string(i) + " is required");
    DTC_RETURN_IF_ERROR(checkDType(spec, true, i, {ir::DType::kFloat32}));
  }
  if (!spec.outputs[0].present())
    return spec.error("output 0 is required");
  for (size_t i = 0; i < spec.outputs.size(); ++i)
    if (spec.outputs[i].present())
      DTC_RETURN_IF_ERROR(checkDType(spec, false, i, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  const std::vector<int64_t> &x = spec.inputs[xIndex].shape;
  if (x.size() < 2)
    return spec.error("X has rank " + std::to_string(x.size()) + "; expected (N, C, ...)");
  const Blocks b = blocksOf(spec, xIndex);
  if (b.groups <= 0)
    return spec.error("num_groups must be >= 1, got " + std::to_string(b.groups));
  if (b.channels % b.groups != 0)
    return spec.error("the channel count " + std::to_string(b.channels) +
                      " is not a multiple of num_groups " + std::to_string(b.groups));
  for (size_t i = 0; i < xIndex; ++i)
    if (spec.inputs[i].shape != x)
      return spec.error("input " + std::to_string(i) + " has shape " +
                        shapeStr(spec.inputs[i].shape) + ", expected " + shapeStr(x));
  const std::vector<int64_t> c = {x[1]};
  for (size_t i = xIndex + 1; i < numInputs; ++i)
    if (spec.inputs[i].shape != c)
      return spec.error("input " + std::to_string(i) + " has shape " +
                        shapeStr(spec.inputs[i].shape) + ", expected " + shapeStr(c));
  for (size_t i = 1; i < spec.outputs.size(); ++i)
    if (spec.outputs[i].present() && spec.outputs[i].shape != c)
      return spec.error("output " + std::to_string(i) + " has shape " +
                        shapeStr(spec.outputs[i].shape) + ", expected " + shapeStr(c));
  return checkOutputShape(spec, x);
}

class GroupNormKernel : public Kernel {
public:
  GroupNormKernel(const Blocks &b, float epsilon) : b_(b), epsilon_(epsilon) {}

  Status run(const KernelArgs &args) override {
    const float *x = static_cast<const float *>(args.inputs[0]);
    const float *scale = static_cast<const float *>(args.inputs[1]);
    const float *bias = static_cast<const float *>(args.inputs[2]);
    float *y = static_cast<float *>(args.outputs[0]);
    if (b_.size() == 0)
      return Status::ok();
    for (int64_t n = 0; n < b_.batch; ++n)
      for (int64_t g = 0; g < b_.groups; ++g) {
        const int64_t off = b_.offset(n, g);
        const auto [mean, rstd] = moments(x + off, b_.size(), epsilon_);
        for (int64_t j = 0; j < b_.perGroup; ++j) {
          const int64_t c = g * b_.perGroup + j;
          const float a = static_cast<float>(scale[c] * rstd);
          const float s = static_cast<float>(bias[c] - mean * scale[c] * rstd);
          const float *in = x + off + j * b_.spatial;
          float *out = y + off + j * b_.spatial;
          for (int64_t i = 0; i < b_.spatial; ++i)
            out[i] = in[i] * a + s;
        }
      }
    return Status::ok();
  }

private:
  Blocks b_;
  float epsilon_;
};

class GroupNormGradKernel : public Kernel {
public:
  GroupNormGradKernel(const Blocks &b, float epsilon) : b_(b), epsilon_(epsilon) {}

  Status run(const KernelArgs &args) override {
    const float *dy = static_cast<const float *>(args.inputs[0]);
    const float *x = static_cast<const float *>(args.inputs[1]);
    const float *scale = static_cast<const float *>(args.inputs[2]);
    float *dx = static_cast<float *>(args.outputs[0]);
    float *dscale = args.numOutputs > 1 ? static_cast<float *>(args.outputs[1]) : nullptr;
    float *dbias = args.numOutputs > 2 ? static_cast<float *>(args.outputs[2]) : nullptr;
    std::vector<double> ds(static_cast<size_t>(b_.channels), 0.0);
    std::vector<double> db(static_cast<size_t>(b_.channels), 0.0);
    const int64_t m = b_.size();
    if (m > 0)
      for (int64_t n = 0; n < b_.batch; ++n)
        for (int64_t g = 0; g < b_.groups; ++g) {
          const int64_t off = b_.offset(n, g);
          const auto [mean, rstd] = moments(x + off, m, epsilon_);
          double sumG = 0, sumGX = 0;
          for (int64_t j = 0; j < b_.perGroup; ++j) {
            const int64_t c = g * b_.perGroup + j;
            const float *gy = dy + off + j * b_.spatial;
            const float *in = x + off + j * b_.spatial;
            double sdy = 0, sdyx = 0;
            for (int64_t i = 0; i < b_.spatial; ++i) {
              const double xhat = (static_cast<double>(in[i]) - mean) * rstd;
              sdy += gy[i];
              sdyx += gy[i] * xhat;
            }
            ds[static_cast<size_t>(c)] += sdyx;
            db[static_cast<size_t>(c)] += sdy;
            sumG += sdy * scale[c];
            sumGX += sdyx * scale[c];
          }
          const double meanG = sumG / static_cast<double>(m);
          const double meanGX = sumGX / static_cast<double>(m);
          for (int64_t j = 0; j < b_.perGroup; ++j) {
            const int64_t c = g * b_.perGroup + j;
            const float *gy = dy + off + j * b_.spatial;
            const float *in = x + off + j * b_.spatial;
            float *out = dx + off + j * b_.spatial;
            for (int64_t i = 0; i < b_.spatial; ++i) {
              const double xhat = (static_cast<double>(in[i]) - mean) * rstd;
              out[i] = static_cast<float>(
                  rstd * (static_cast<double>(gy[i]) * scale[c] - meanG - xhat * meanGX));
            }
          }
        }
    for (int64_t c = 0; c < b_.channels; ++c) {
      if (dscale)
        dscale[c] = static_cast<float>(ds[static_cast<size_t>(c)]);
      if (dbias)
        dbias[c] = static_cast<float>(db[static_cast<size_t>(c)]);
    }
    return Status::ok();
  }

private:
  Blocks b_;
  float epsilon_;
};

} // namespace

Status checkGroupNorm(const KernelSpec &spec) { return checkGroupNormLike(spec, 0, 3, 1); }

Expected<KernelPtr> createGroupNorm(const KernelSpec &spec, CpuContext &) {
  DTC_RETURN_IF_ERROR(checkGroupNorm(spec));
  return KernelPtr(
      std::make_unique<GroupNormKernel>(blocksOf(spec, 0), spec.attrFloat("epsilon", 1e-5f)));
}

Status checkGroupNormGrad(const KernelSpec &spec) { return checkGroupNormLike(spec, 1, 3, 3); }

Expected<KernelPtr> createGroupNormGrad(const KernelSpec &spec, CpuContext &) {
  DTC_RETURN_IF_ERROR(checkGroupNormGrad(spec));
  return KernelPtr(
      std::make_unique<GroupNormGradKernel>(blocksOf(spec, 1), spec.attrFloat("epsilon", 1e-5f)));
}

} // namespace dtc::ops::cpu
