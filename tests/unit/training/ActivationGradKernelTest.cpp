// The ActivationGrad CPU kernels against reference loops: DropoutTraining's gradient rule and
// its Philox4x32-10 mask generator, DropoutGrad, EltwiseGrad (every algorithm, singular points,
// checks), ClipGrad, SoftmaxGrad and LogSoftmaxGrad. The gradient rules of the elementwise and
// activation ops are in ActivationGradTest.cpp.
#include "tests/unit/training/GradCheck.h"

#include "tests/unit/cpu/KernelTestUtil.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

namespace dtc {
namespace {

using ir::Attribute;
using test::GradInput;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr double kPi = 3.14159265358979323846;

// ---------------------------------------------------------------------------------------------
// DropoutTraining: gradient and mask generator.

TEST(ActivationGrad, DropoutTrainingGradient) {
  for (float ratio : {0.f, 0.3f, 0.75f}) {
    EXPECT_EQ(test::gradCheck("DropoutTraining",
                              {GradInput::f32("x", {6, 7}), GradInput::i64("rng", {3}, {42, 5, 1})},
                              {{"ratio", Attribute(ratio)}, {"stream", Attribute(int64_t{2})}}, 2,
                              {}, "ai.dtc"),
              "")
        << ratio;
  }
  // rng fed at run time (a graph input, as the runtime feeds dtc::rng).
  EXPECT_EQ(
      test::gradCheck("DropoutTraining",
                      {GradInput::f32("x", {9}), GradInput::i64("rng", {3}, {1, 2, 3}).asInput()},
                      {{"ratio", Attribute(0.5f)}}, 2, {}, "ai.dtc"),
      "");
}

/// Philox4x32-10 written from the paper (Salmon et al. 2011, Random123), independent of the
/// kernel's copy.
std::array<uint32_t, 4> philoxRef(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  for (int r = 0; r < 10; ++r) {
    uint64_t a = uint64_t{0xD2511F53} * c[0], b = uint64_t{0xCD9E8D57} * c[2];
    c = {uint32_t(b >> 32) ^ c[1] ^ k[0], uint32_t(b), uint32_t(a >> 32) ^ c[3] ^ k[1],
         uint32_t(a)};
    k[0] += 0x9E3779B9u;
    k[1] += 0xBB67AE85u;
  }
  return c;
}

TEST(ActivationGrad, PhiloxReferenceMatchesKnownAnswers) {
  // Random123's kat_vectors for philox4x32_10.
  EXPECT_EQ(philoxRef({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philoxRef({~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}),
            (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philoxRef({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

using namespace ops::cpu;
using namespace ops::cpu::test;

struct DropoutRun {
  std::vector<float> out;
  std::vector<uint8_t> mask;
};

DropoutRun runDropout(const std::vector<float> &x, std::array<int64_t, 3> rng, float ratio,
                      int64_t stream, bool inPlace = false) {
  const int64_t n = static_cast<int64_t>(x.size());
  KernelSpec spec =
      makeSpec("DropoutTraining", {f32({n}), i64({3})}, {f32({n}), {ir::DType::kBool, {n}}},
               {{"ratio", Attribute(ratio)}, {"stream", Attribute(stream)}});
  spec.domain = "ai.dtc";
  Buf<float> in(x), out(x.size());
  Buf<int64_t> r(std::vector<int64_t>(rng.begin(), rng.end()));
  Buf<uint8_t> mask(x.size());
  runKernel(spec, {in.data(), r.data()}, {inPlace ? in.data() : out.data(), mask.data()});
  return {inPlace ? in.vec() : out.vec(), mask.vec()};
}

TEST(ActivationGradKernel, DropoutTrainingMatchesPhiloxAndScales) {
  const size_t n = 100003; // not a multiple of 4; above the kernel's one-thread grain
  std::vector<float> x = randomBuf(n, 5).vec();
  const int64_t seed = 0x123456789abLL, step = 17, rank = 3, stream = 4;
  const float ratio = 0.3f;
  DropoutRun r = runDropout(x, {seed, step, rank}, ratio, stream);
  const uint64_t thr = static_cast<uint64_t>(std::floor(double(ratio) * 4294967296.0));
  const std::array<uint32_t, 2> key = {uint32_t(seed),
                                       uint32_t(uint64_t(seed) >> 32) ^ uint32_t(rank)};
  for (size_t i = 0; i < n; ++i) {
    const uint64_t b = i / 4;
    auto u = philoxRef({uint32_t(b), uint32_t(b >> 32), uint32_t(stream), uint32_t(step)}, key);
    const bool keep = u[i % 4] >= thr;
    ASSERT_EQ(r.mask[i], keep ? 1 : 0) << i;
    ASSERT_EQ(r.out[i], keep ? x[i] * static_cast<float>(1.0 / (1.0 - ratio)) : 0.f) << i;
  }
  // In place over the data gives the same result.
  DropoutRun again = runDropout(x, {seed, step, rank}, ratio, stream, /*inPlace=*/true);
  EXPECT_EQ(again.out, r.out);
  EXPECT_EQ(again.mask, r.mask);
}

TEST(ActivationGradKernel, DropoutTrainingKeepFractionAndIndependence) {
  const size_t n = 200000;
  std::vector<float> x(n, 1.f);
  for (float ratio : {0.1f, 0.5f, 0.9f}) {
    DropoutRun r = runDropout(x, {7, 0, 0}, ratio, 0);
    double kept = 0;
    for (uint8_t m : r.mask)
      kept += m;
    EXPECT_NEAR(kept / n, 1.0 - ratio, 0.005) << ratio;
  }
  // ratio 0: everything kept, output = data.
  DropoutRun all = runDropout(x, {7, 0, 0}, 0.f, 0);
  EXPECT_EQ(all.mask, std::vector<uint8_t>(n, 1));
  EXPECT_EQ(all.out, x);
  // Same rng and stream: the same mask; another step, stream, rank or seed: another mask, whose
  // agreement with the first is that of independent draws (p^2 + (1-p)^2 = 0.5 at p = 0.5).
  DropoutRun base = runDropout(x, {7, 3, 1}, 0.5f, 2);
  EXPECT_EQ(runDropout(x, {7, 3, 1}, 0.5f, 2).mask, base.mask);
  for (auto [rng, stream] :
       std::vector<std::pair<std::array<int64_t, 3>, int64_t>>{{{7, 4, 1}, 2},
                                                               {{7, 3, 1}, 3},
                                                               {{7, 3, 2}, 2},
                                                               {{8, 3, 1}, 2},
                                                               {{7 + (1LL << 32), 3, 1}, 2}}) {
    DropoutRun other = runDropout(x, rng, 0.5f, stream);
    double same = 0;
    for (size_t i = 0; i < n; ++i)
      same += other.mask[i] == base.mask[i];
    EXPECT_NEAR(same / n, 0.5, 0.01) << rng[0] << " " << rng[1] << " " << rng[2] << " " << stream;
  }
}

TEST(ActivationGradKernel, DropoutGrad) {
  KernelSpec spec = makeSpec("DropoutGrad", {f32({5}), {ir::DType::kBool, {5}}}, {f32({5})},
                             {{"ratio", Attribute(0.2f)}});
  spec.domain = "ai.dtc";
  Buf<float> dy(std::vector<float>{1.f, 2.f, 3.f, 4.f, 5.f}), dx(5);
  Buf<uint8_t> mask(std::vector<uint8_t>{1, 0, 1, 0, 1});
  runKernel(spec, {dy.data(), mask.data()}, {dx.data()});
  const float s = static_cast<float>(1.0 / 0.8);
  EXPECT_EQ(dx.vec(), (std::vector<float>{1.f * s, 0.f, 3.f * s, 0.f, 5.f * s}));
  spec.attrs["ratio"] = Attribute(1.f);
  EXPECT_EQ(checkKernel(spec).message(),
            "node 'n0' (ai.dtc.DropoutGrad): ratio must be in [0, 1), got 1.000000");
}

// ---------------------------------------------------------------------------------------------
// EltwiseGrad, ClipGrad, SoftmaxGrad and LogSoftmaxGrad kernels against reference loops.

double erfPrime(double x) { return 2 / std::sqrt(kPi) * std::exp(-x * x); }
double phi(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2 * kPi); }
double bigPhi(double x) { return 0.5 * (1 + std::erf(x / std::sqrt(2.0))); }
double geluTanhPrime(double x) {
  const double k = std::sqrt(2 / kPi), u = k * (x + 0.044715 * x * x * x), t = std::tanh(u);
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
}

struct EltCase {
  const char *alg;
  float alpha, beta;
  /// T from x (the forward input or output), and dX from (dy, x).
  std::function<double(double)> t;
  std::function<double(double, double)> dx;
  float lo, hi;
};

TEST(ActivationGradKernel, EltwiseGradMatchesReference) {
  const std::vector<EltCase> cases = {
      {"relu", 0.1f, 0, [](double x) { return x; },
       [](double g, double x) { return x > 0 ? g : 0.1 * g; }, -2, 2},
      {"relu", -0.3f, 0, [](double x) { return x; },
       [](double g, double x) { return x > 0 ? g : -0.3 * g; }, -2, 2},
      {"relu_dst", 0.f, 0, [](double x) { return x > 0 ? x : 0; },
       [](double g, double x) { return x > 0 ? g : 0; }, -2, 2},
      {"relu_dst", 0.2f, 0, [](double x) { return x > 0 ? x : 0.2 * x; },
       [](double g, double x) { return x > 0 ? g : 0.2 * g; }, -2, 2},
      {"logistic_dst", 0, 0, [](double x) { return 1 / (1 + std::exp(-x)); },
       [](double g, double x) {
         double s = 1 / (1 + std::exp(-x));
         return g * s * (1 - s);
       },
       -4, 4},
      {"tanh_dst", 0, 0, [](double x) { return std::tanh(x); },
       [](double g, double x) { return g * (1 - std::tanh(x) * std::tanh(x)); }, -3, 3},
      {"exp_dst", 0, 0, [](double x) { return std::exp(x); },
       [](double g, double x) { return g * std::exp(x); }, -3, 3},
      {"sqrt_dst", 0, 0, [](double x) { return std::sqrt(x); },
       [](double g, double x) { return g / (2 * std::sqrt(x)); }, 0.1f, 4},
      {"reciprocal_dst", 0, 0, [](double x) { return 1 / x; },
       [](double g, double x) { return -g / (x * x); }, 0.3f, 3},
      {"log", 0, 0, [](double x) { return x; }, [](double g, double x) { return g / x; }, 0.1f, 4},
      {"abs", 0, 0, [](double x) { return x; },
       [](double g, double x) { return x > 0   ? g
                                       : x < 0 ? -g
                                               : 0; }, -2, 2},
      {"erf", 0, 0, [](double x) { return x; }, [](double g, double x) { return g * erfPrime(x); },
       -3, 3},
      {"gelu_erf", 0, 0, [](double x) { return x; },
       [](double g, double x) { return g * (bigPhi(x) + x * phi(x)); }, -4, 4},
      {"gelu_tanh", 0, 0, [](double x) { return x; },
       [](double g, double x) { return g * geluTanhPrime(x); }, -4, 4},
      {"hardswish", 0, 0, [](double x) { return x; },
       [](double g, double x) { return x < -3   ? 0
                                       : x <= 3 ? g * (x / 3 + 0.5)
                                                : g; }, -5, 5},
      {"hardsigmoid", 0.2f, 0.5f, [](double x) { return x; },
       [](double g, double x) {
         double v = 0.2 * x + 0.5;
         return v > 0 && v < 1 ? 0.2 * g : 0;
       },
       -4, 4},
  };
  const std::vector<int64_t> shape = {3, 5, 67}; // odd sizes: vector tails
  const size_t n = static_cast<size_t>(count(shape));
  for (const EltCase &c : cases) {
    for (bool inPlace : {false, true}) {
      Buf<float> dy = randomBuf(n, 11), x = randomBuf(n, 12), t(n), dx(n);
      for (size_t i = 0; i < n; ++i) {
        x[i] = c.lo + (x[i] + 1) / 2 * (c.hi - c.lo);
        t[i] = static_cast<float>(c.t(x[i]));
      }
      std::vector<float> want(n);
      for (size_t i = 0; i < n; ++i)
        want[i] = static_cast<float>(c.dx(dy[i], x[i]));
      KernelSpec spec = makeSpec("EltwiseGrad", {f32(shape), f32(shape)}, {f32(shape)},
                                 {{"algorithm", Attribute(c.alg)},
                                  {"alpha", Attribute(c.alpha)},
                                  {"beta", Attribute(c.beta)}});
      spec.domain = "ai.dtc";
      runKernel(spec, {dy.data(), t.data()}, {inPlace ? dy.data() : dx.data()});
      SCOPED_TRACE(std::string(c.alg) + (inPlace ? " in place" : ""));
      expectNear(inPlace ? dy.data() : dx.data(), want, 2e-5);
    }
  }
}

TEST(ActivationGradKernel, EltwiseGradSingularPoints) {
  // sqrt_dst at Y = 0 gives +-inf; relu_dst and abs give 0 at 0.
  auto run1 = [](const char *alg, std::vector<float> dyv, std::vector<float> tv) {
    const int64_t n = static_cast<int64_t>(dyv.size());
    KernelSpec spec =
        makeSpec("EltwiseGrad", {f32({n}), f32({n})}, {f32({n})}, {{"algorithm", Attribute(alg)}});
    spec.domain = "ai.dtc";
    Buf<float> dy(dyv), t(tv), dx(dyv.size());
    runKernel(spec, {dy.data(), t.data()}, {dx.data()});
    return dx.vec();
  };
  EXPECT_EQ(run1("sqrt_dst", {1.f, -1.f, 1.f}, {0.f, 0.f, 0.25f}),
            (std::vector<float>{kInf, -kInf, 2.f}));
  EXPECT_EQ(run1("relu_dst", {1.f, 1.f, 1.f}, {0.f, -0.f, 2.f}),
            (std::vector<float>{0.f, 0.f, 1.f}));
  EXPECT_EQ(run1("abs", {1.f, 1.f, 1.f}, {0.f, -3.f, 2.f}), (std::vector<float>{0.f, -1.f, 1.f}));
}

TEST(ActivationGradKernel, EltwiseGradChecks) {
  KernelSpec spec =
      makeSpec("EltwiseGrad", {f32({2}), f32({3})}, {f32({2})}, {{"algorithm", Attribute("relu")}});
  spec.domain = "ai.dtc";
  EXPECT_EQ(checkKernel(spec).message(),
            "node 'n0' (ai.dtc.EltwiseGrad): input 1 has shape [3], expected [2]");
  spec.inputs[1] = f32({2});
  spec.attrs["algorithm"] = Attribute("softplus");
  EXPECT_EQ(checkKernel(spec).message(),
            "node 'n0' (ai.dtc.EltwiseGrad): unknown algorithm 'softplus'");
}

TEST(ActivationGradKernel, ClipGradMatchesReference) {
  const size_t n = 301;
  Buf<float> dy = randomBuf(n, 3), x = randomBuf(n, 4), dx(n);
  x[0] = -0.5f;
  x[1] = 0.25f;
  Buf<float> lo(std::vector<float>{-0.5f}), hi(std::vector<float>{0.25f});
  for (int bounds = 0; bounds < 4; ++bounds) {
    const bool hasLo = bounds & 1, hasHi = bounds & 2;
    std::vector<TensorDesc> ins = {f32({301}), f32({301}), hasLo ? f32({}) : TensorDesc{},
                                   hasHi ? f32({}) : TensorDesc{}};
    KernelSpec spec = makeSpec("ClipGrad", ins, {f32({301})});
    spec.domain = "ai.dtc";
    runKernel(spec, {dy.data(), x.data(), hasLo ? lo.data() : nullptr, hasHi ? hi.data() : nullptr},
              {dx.data()});
    for (size_t i = 0; i < n; ++i) {
      bool in = (!hasLo || x[i] >= -0.5f) && (!hasHi || x[i] <= 0.25f);
      ASSERT_EQ(dx[i], in ? dy[i] : 0.f) << bounds << " " << i;
    }
  }
}

TEST(ActivationGradKernel, SoftmaxGradsMatchReference) {
  const std::vector<int64_t> shape = {3, 4, 5};
  const size_t n = 60;
  for (const char *op : {"SoftmaxGrad", "LogSoftmaxGrad"}) {
    for (int64_t axis : {0, 1, 2, -1}) {
      const int64_t a = axis < 0 ? axis + 3 : axis;
      Buf<float> x = randomBuf(n, 21), dy = randomBuf(n, 22), y(n), dx(n);
      const std::vector<int64_t> strides = {20, 5, 1};
      // Forward reference, then the backward formulas along the axis.
      std::vector<float> want(n);
      for (size_t base = 0; base < n; ++base) {
        int64_t idx[3] = {int64_t(base) / 20, int64_t(base) / 5 % 4, int64_t(base) % 5};
        if (idx[a] != 0)
          continue;
        double mx = -1e30, z = 0, sdy = 0, sdyy = 0;
        for (int64_t k = 0; k < shape[a]; ++k)
          mx = std::max<double>(mx, x[base + k * strides[a]]);
        for (int64_t k = 0; k < shape[a]; ++k)
          z += std::exp(x[base + k * strides[a]] - mx);
        for (int64_t k = 0; k < shape[a]; ++k) {
          size_t e = base + k * strides[a];
          double s = std::exp(x[e] - mx) / z;
          y[e] = static_cast<float>(std::string(op) == "SoftmaxGrad" ? s : std::log(s));
          sdy += dy[e];
          sdyy += dy[e] * s;
        }
        for (int64_t k = 0; k < shape[a]; ++k) {
          size_t e = base + k * strides[a];
          double s = std::exp(x[e] - mx) / z;
          want[e] = static_cast<float>(std::string(op) == "SoftmaxGrad" ? s * (dy[e] - sdyy)
                                                                        : dy[e] - s * sdy);
        }
      }
      KernelSpec spec =
          makeSpec(op, {f32(shape), f32(shape)}, {f32(shape)}, {{"axis", Attribute(axis)}});
      spec.domain = "ai.dtc";
      runKernel(spec, {dy.data(), y.data()}, {dx.data()});
      SCOPED_TRACE(std::string(op) + " axis " + std::to_string(axis));
      expectNear(dx.data(), want, 1e-5);
    }
  }
}

} // namespace
} // namespace dtc
