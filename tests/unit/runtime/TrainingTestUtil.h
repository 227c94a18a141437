// Helpers for the training-runtime tests: a hand-made training plan (linear regression with
// SGD + momentum written with ONNX ops) and its source model, in a fresh temporary folder.
#pragma once

#include "compiler/plan/Plan.h"
#include "runtime/io/Npy.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace dtc::rt::test {

/// A temporary folder removed at destruction.
struct TempDir {
  std::filesystem::path path;
  TempDir();
  ~TempDir();
  std::string operator/(const std::string &name) const { return (path / name).string(); }
};

/// Settings of the regression plan.
struct RegressionConfig {
  int64_t batch = 4;
  int64_t features = 3;
  float momentum = 0.9f;
  int64_t gradAccumSteps = 1;
  float lr = 0.05f;
  /// Initial weights (features values).
  std::vector<float> w0 = {0.5f, -0.25f, 1.0f};
};

/// Writes model.onnxtxt (initializer "w" = cfg.w0; forward y = ReduceSum(x * w, axis 1)) and
/// returns the plan: inputs x f32[B,F], label f32[B], dtc::lr f32[], dtc::step i64[],
/// dtc::rng i64[3]; outputs pred f32[B], loss f32[] = mean((pred - label)^2); gradient
/// dw = sum_b (2/B)(pred_b - label_b) x_b; optimizer m = momentum * m + dw, w -= lr * m.
plan::Plan makeRegressionPlan(const std::string &dir, const RegressionConfig &cfg = {});

/// An f32 array.
HostArray f32(const std::string &name, std::vector<int64_t> shape, std::vector<float> values);
/// The values of an f32 array.
std::vector<float> values(const HostArray &a);

/// Writes train.npz with n samples: x[i][f] = pseudo-random in [-1, 1], label = x . wTrue.
void writeRegressionData(const std::string &path, int64_t n, int64_t features,
                         const std::vector<float> &wTrue, uint32_t seed = 1);

} // namespace dtc::rt::test
