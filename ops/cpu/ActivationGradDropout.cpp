// CPU kernels of ai.dtc.DropoutTraining and ai.dtc.DropoutGrad (ops/training/
// ActivationGradOps.cpp), f32 data and bool (one byte) masks. The mask comes from Philox4x32-10
// (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC 2011; the
// constants and round function of Random123's philox.h): each element's bits depend only on
// (seed, rank, step, stream, element index), so a run is reproducible whatever the threading.
// Built with OpenMP where available (activation_grad.cmake): large tensors split over threads.
#include "ops/cpu/OneDnnUtil.h"

#include <array>
#include <cmath>
#include <cstring>

namespace dtc::ops::cpu {

namespace {

/// Elements below which the loops stay on one thread.
constexpr int64_t kParallelGrain = 1 << 15;

/// Philox4x32 with 10 rounds: the four 32-bit words of block `ctr` under `key`.
inline std::array<uint32_t, 4> philox4x32x10(std::array<uint32_t, 4> ctr,
                                             std::array<uint32_t, 2> key) {
  constexpr uint64_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kW0;
      key[1] += kW1;
    }
    const uint64_t p0 = kM0 * ctr[0], p1 = kM1 * ctr[2];
    ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(p0)};
  }
  return ctr;
}

/// output = keep ? data / (1 - ratio) : 0, mask = keep, where keep = u >= threshold for the
/// element's Philox word u (ActivationGradOps.cpp, DropoutTraining). Reads data[i] before writing
/// output[i]: correct in place.
class DropoutTrainingKernel : public Kernel {
public:
  explicit DropoutTrainingKernel(const KernelSpec &spec)
      : n_(spec.inputs[0].numElements()), stream_(spec.attrInt("stream", 0)) {
    const double ratio = spec.attrFloat("ratio", 0.5f);
    threshold_ = static_cast<uint64_t>(std::floor(ratio * 4294967296.0));
    scale_ = static_cast<float>(1.0 / (1.0 - ratio));
  }

  Status run(const KernelArgs &args) override {
    const float *x = static_cast<const float *>(args.inputs[0]);
    const int64_t *rng = static_cast<const int64_t *>(args.inputs[1]);
    float *y = static_cast<float *>(args.outputs[0]);
    uint8_t *mask = static_cast<uint8_t *>(args.outputs[1]);
    const uint64_t seed = static_cast<uint64_t>(rng[0]);
    const uint32_t step = static_cast<uint32_t>(rng[1]), rank = static_cast<uint32_t>(rng[2]);
    const std::array<uint32_t, 2> key = {static_cast<uint32_t>(seed),
                                         static_cast<uint32_t>(seed >> 32) ^ rank};
    const uint32_t stream = static_cast<uint32_t>(stream_);
    const int64_t blocks = (n_ + 3) / 4;
    // Each block depends only on its index: any split over threads gives the same bits.
#pragma omp parallel for if (n_ >= kParallelGrain) schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      const uint64_t ub = static_cast<uint64_t>(b);
      const std::array<uint32_t, 4> u = philox4x32x10(
          {static_cast<uint32_t>(ub), static_cast<uint32_t>(ub >> 32), stream, step}, key);
      const int64_t base = 4 * b, lanes = n_ - base < 4 ? n_ - base : 4;
      for (int64_t l = 0; l < lanes; ++l) {
        const bool keep = u[l] >= threshold_;
        mask[base + l] = keep ? 1 : 0;
        y[base + l] = keep ? x[base + l] * scale_ : 0.f;
      }
    }
    return Status::ok();
  }

private:
  int64_t n_;
  int64_t stream_;
  uint64_t threshold_;
  float scale_;
};

/// dX = mask ? dY / (1 - ratio) : 0. Correct in place over dY.
class DropoutGradKernel : public Kernel {
public:
  explicit DropoutGradKernel(const KernelSpec &spec)
      : n_(spec.inputs[0].numElements()),
        scale_(static_cast<float>(1.0 / (1.0 - spec.attrFloat("ratio", 0.5f)))) {}

  Status run(const KernelArgs &args) override {
    const float *dy = static_cast<const float *>(args.inputs[0]);
    const uint8_t *mask = static_cast<const uint8_t *>(args.inputs[1]);
    float *dx = static_cast<float *>(args.outputs[0]);
#pragma omp parallel for if (n_ >= kParallelGrain) schedule(static)
    for (int64_t i = 0; i < n_; ++i)
      dx[i] = mask[i] ? dy[i] * scale_ : 0.f;
    return Status::ok();
  }

private:
  int64_t n_;
  float scale_;
};

Status checkRatio(const KernelSpec &spec) {
  const float ratio = spec.attrFloat("ratio", 0.5f);
  if (!(ratio >= 0.f && ratio < 1.f))
    return spec.error("ratio must be in [0, 1), got " + std::to_string(ratio));
  return Status::ok();
}

} // namespace

Status checkDropoutTraining(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, 2));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, {ir::DType::kInt64}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 1, {ir::DType::kBool}));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  if (spec.inputs[1].shape != std::vector<int64_t>{3})
    return spec.error("rng has shape " + shapeStr(spec.inputs[1].shape) +
                      ", expected [3] = {seed, step, rank}");
  DTC_RETURN_IF_ERROR(checkOutputShape(spec, spec.inputs[0].shape));
  if (spec.outputs[1].shape != spec.inputs[0].shape)
    return spec.error("mask has shape " + shapeStr(spec.outputs[1].shape) + ", expected " +
                      shapeStr(spec.inputs[0].shape));
  return checkRatio(spec);
}

Expected<KernelPtr> createDropoutTraining(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<DropoutTrainingKernel>(spec));
}

int inPlaceDropoutTraining(const KernelSpec &) { return 0; }

Status checkDropoutGrad(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, {ir::DType::kBool}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  if (spec.inputs[1].shape != spec.inputs[0].shape)
    return spec.error("mask has shape " + shapeStr(spec.inputs[1].shape) + ", expected " +
                      shapeStr(spec.inputs[0].shape));
  DTC_RETURN_IF_ERROR(checkOutputShape(spec, spec.inputs[0].shape));
  return checkRatio(spec);
}

Expected<KernelPtr> createDropoutGrad(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<DropoutGradKernel>(spec));
}

int inPlaceDropoutGrad(const KernelSpec &) { return 0; }

} // namespace dtc::ops::cpu
