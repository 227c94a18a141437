// NaN semantics of the CPU kernels (issue 13, finding 13): NaN in an input gives NaN where the
// ONNX reference (numpy), onnxruntime and PyTorch give NaN: elementwise activations, fused
// Conv+Relu, MaxPool (a window holding NaN), Softmax/LogSoftmax (a row holding NaN), ReduceMax,
// Clip, Max/Min. Finite entries keep their reference values.
#include "ops/cpu/NanPropagation.h"
#include "tests/unit/cpu/KernelTestUtil.h"

#include <cmath>
#include <limits>
#include <string>

namespace dtc::ops::cpu::test {
namespace {

const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

/// Expects got[i] NaN exactly where want[i] is NaN, and near want[i] elsewhere.
void expectNanPattern(const float *got, const std::vector<float> &want, double tol = 1e-5) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i << " is " << got[i] << ", expected NaN";
    } else {
      ASSERT_FALSE(std::isnan(got[i])) << "element " << i << " is NaN, expected " << want[i];
      double scale = std::max(1.0, std::fabs(static_cast<double>(want[i])));
      if (std::isinf(want[i]))
        EXPECT_EQ(got[i], want[i]) << "element " << i;
      else
        EXPECT_NEAR(got[i], want[i], tol * scale) << "element " << i;
    }
  }
}

TEST(NanPropagation, ScanFindsNanAnywhere) {
  for (int64_t n : {0, 1, 63, 64, 65, 200, 1000}) {
    Buf<float> b = randomBuf(static_cast<size_t>(n), 3);
    EXPECT_FALSE(anyNan(b.data(), n)) << n;
    EXPECT_FALSE(anyNonFinite(b.data(), n)) << n;
    for (int64_t at : {int64_t{0}, n / 2, n - 1}) {
      if (n == 0)
        continue;
      Buf<float> c = b;
      c[static_cast<size_t>(at)] = kNan;
      EXPECT_TRUE(anyNan(c.data(), n)) << n << " at " << at;
      EXPECT_TRUE(anyNonFinite(c.data(), n));
      c[static_cast<size_t>(at)] = -kInf;
      EXPECT_FALSE(anyNan(c.data(), n));
      EXPECT_TRUE(anyNonFinite(c.data(), n));
    }
  }
}

/// Runs a one-input same-shape op on `x` (also in place) and compares with `ref` applied to each
/// element (numpy semantics: NaN in, NaN out).
void checkUnaryNan(const std::string &op, float (*ref)(float),
                   std::map<std::string, ir::Attribute> attrs = {}) {
  std::vector<float> x = {kNan, -2.f, -0.5f, 0.f, 0.5f, 3.f, kNan, kInf, -kInf, 1.f};
  // Long enough for the vector path of the scan, NaN in the middle block too.
  for (int i = 0; i < 150; ++i)
    x.push_back(static_cast<float>(i % 7) - 3.f);
  x[100] = kNan;
  std::vector<float> want;
  for (float v : x)
    want.push_back(std::isnan(v) ? kNan : ref(v));
  const int64_t n = static_cast<int64_t>(x.size());
  KernelSpec spec = makeSpec(op, {f32({n})}, {f32({n})}, attrs);
  Buf<float> in(x), out(x.size());
  runKernel(spec, {in.data()}, {out.data()});
  SCOPED_TRACE(op);
  expectNanPattern(out.data(), want, 1e-4);
  Buf<float> inPlace(x);
  runKernel(spec, {inPlace.data()}, {inPlace.data()});
  expectNanPattern(inPlace.data(), want, 1e-4);
}

TEST(NanSemantics, ActivationsKeepNan) {
  checkUnaryNan("Relu", [](float v) { return v > 0.f ? v : 0.f; });
  checkUnaryNan("Sigmoid", [](float v) { return 1.f / (1.f + std::exp(-v)); });
  checkUnaryNan("Tanh", [](float v) { return std::tanh(v); });
  checkUnaryNan("Exp", [](float v) { return std::exp(v); });
  checkUnaryNan("Abs", [](float v) { return std::fabs(v); });
  checkUnaryNan("Sqrt", [](float v) { return std::sqrt(v); });
  checkUnaryNan("LeakyRelu", [](float v) { return v >= 0.f ? v : 0.01f * v; },
                {{"alpha", ir::Attribute(0.01f)}});
  checkUnaryNan("Log", [](float v) { return std::log(v); });
  checkUnaryNan("Neg", [](float v) { return -v; });
  checkUnaryNan("Floor", [](float v) { return std::floor(v); });
  checkUnaryNan("Sign", [](float v) { return static_cast<float>((v > 0.f) - (v < 0.f)); });
  checkUnaryNan("Softplus", [](float v) { return std::log1p(std::exp(v)); });
  checkUnaryNan("Softsign", [](float v) { return v / (1.f + std::fabs(v)); });
  checkUnaryNan("Elu", [](float v) { return v >= 0.f ? v : std::expm1(v); });
  checkUnaryNan("Selu",
                [](float v) { return 1.05070102f * (v > 0.f ? v : 1.67326319f * std::expm1(v)); });
  checkUnaryNan("Celu", [](float v) { return v > 0.f ? v : std::expm1(v); });
  checkUnaryNan("Mish", [](float v) { return v * std::tanh(std::log1p(std::exp(v))); });
  checkUnaryNan("Sin", [](float v) { return std::sin(v); });
  checkUnaryNan("Cos", [](float v) { return std::cos(v); });
}

TEST(NanSemantics, ClipKeepsNan) {
  std::vector<float> x = {kNan, -5.f, 0.25f, 5.f};
  KernelSpec spec = makeSpec("Clip", {f32({4}), f32({}), f32({})}, {f32({4})});
  Buf<float> in(x), lo(std::vector<float>{-1.f}), hi(std::vector<float>{1.f}), out(4);
  runKernel(spec, {in.data(), lo.data(), hi.data()}, {out.data()});
  expectNanPattern(out.data(), {kNan, -1.f, 0.25f, 1.f}); // np.clip
}

TEST(NanSemantics, MaxMinKeepNan) {
  for (const char *op : {"Max", "Min"}) {
    KernelSpec spec = makeSpec(op, {f32({3}), f32({3})}, {f32({3})});
    Buf<float> a(std::vector<float>{kNan, 1.f, 2.f}), b(std::vector<float>{0.f, kNan, 3.f}), y(3);
    runKernel(spec, {a.data(), b.data()}, {y.data()});
    bool max = std::string(op) == "Max";
    expectNanPattern(y.data(), {kNan, kNan, max ? 3.f : 2.f}); // np.maximum / np.minimum
  }
}

TEST(NanSemantics, SoftmaxRowWithNanIsAllNan) {
  // [2, 3, 2] over axis 1: rows are (outer, inner) pairs; NaN at (0, 1, 1) spoils row (0, 1)
  // only, as np.exp(x - x.max(axis)) / sum does.
  for (const char *op : {"Softmax", "LogSoftmax"}) {
    std::vector<float> x = {1, 2, 3, kNan, 5, 6, 0, 1, 2, 3, 4, 5};
    KernelSpec spec =
        makeSpec(op, {f32({2, 3, 2})}, {f32({2, 3, 2})}, {{"axis", ir::Attribute(int64_t{1})}});
    Buf<float> in(x), out(x.size());
    runKernel(spec, {in.data()}, {out.data()});
    std::vector<float> want(x.size());
    for (int o = 0; o < 2; ++o)
      for (int i = 0; i < 2; ++i) {
        bool nan = false;
        double m = -1e30, s = 0;
        for (int l = 0; l < 3; ++l) {
          float v = x[static_cast<size_t>((o * 3 + l) * 2 + i)];
          nan = nan || std::isnan(v);
          m = std::max(m, static_cast<double>(v));
        }
        for (int l = 0; l < 3; ++l)
          s += std::exp(x[static_cast<size_t>((o * 3 + l) * 2 + i)] - m);
        for (int l = 0; l < 3; ++l) {
          double e = x[static_cast<size_t>((o * 3 + l) * 2 + i)] - m;
          double v = std::string(op) == "Softmax" ? std::exp(e) / s : e - std::log(s);
          want[static_cast<size_t>((o * 3 + l) * 2 + i)] = nan ? kNan : static_cast<float>(v);
        }
      }
    SCOPED_TRACE(op);
    expectNanPattern(out.data(), want);
  }
}

TEST(NanSemantics, MaxPoolWindowWithNanIsNan) {
  // 1x1x4x4, 2x2 windows stride 1 (3x3 out): NaN at (1, 1) reaches the four windows that hold
  // it, as torch.nn.functional.max_pool2d; AveragePool's sum gives NaN there on its own.
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i)
    x[static_cast<size_t>(i)] = static_cast<float>(i);
  x[5] = kNan;
  for (const char *op : {"MaxPool", "AveragePool"}) {
    KernelSpec spec = makeSpec(op, {f32({1, 1, 4, 4})}, {f32({1, 1, 3, 3})},
                               {{"kernel_shape", ir::Attribute(std::vector<int64_t>{2, 2})}});
    Buf<float> in(x), out(9);
    runKernel(spec, {in.data()}, {out.data()});
    std::vector<float> want(9);
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 3; ++c) {
        float a = x[static_cast<size_t>(r * 4 + c)], b = x[static_cast<size_t>(r * 4 + c + 1)];
        float d = x[static_cast<size_t>(r * 4 + c + 4)], e = x[static_cast<size_t>(r * 4 + c + 5)];
        bool nan = std::isnan(a) || std::isnan(b) || std::isnan(d) || std::isnan(e);
        float v = std::string(op) == "MaxPool" ? std::max(std::max(a, b), std::max(d, e))
                                               : (a + b + d + e) / 4.f;
        want[static_cast<size_t>(r * 3 + c)] = nan ? kNan : v;
      }
    SCOPED_TRACE(op);
    expectNanPattern(out.data(), want);
  }
}

TEST(NanSemantics, ReduceMaxWithNanIsNan) {
  // [2, 3] over axis 1 (keepdims 0): np.max gives NaN for the row holding one.
  KernelSpec spec = makeSpec("ReduceMax", {f32({2, 3}), i64({1})}, {f32({2})},
                             {{"keepdims", ir::Attribute(int64_t{0})}});
  Buf<float> x(std::vector<float>{1.f, kNan, 3.f, 4.f, 6.f, 5.f}), y(2);
  Buf<int64_t> axes(std::vector<int64_t>{1});
  runKernel(spec, {x.data(), axes.data()}, {y.data()});
  expectNanPattern(y.data(), {kNan, 6.f});
  // Without NaN the primitive's answer stands.
  Buf<float> clean(std::vector<float>{1.f, 2.f, 3.f, 4.f, 6.f, 5.f});
  runKernel(spec, {clean.data(), axes.data()}, {y.data()});
  expectNanPattern(y.data(), {3.f, 6.f});
}

/// Conv 1x1x3x3 input, one 2x2 filter of ones, optional bias, then Relu (FusedConv) or not.
TEST(NanSemantics, FusedConvReluKeepsNan) {
  std::vector<float> x = {1, -2, 3, -4, kNan, -6, 7, -8, 9};
  std::vector<float> w = {1, 1, 1, 1};
  for (bool nanInput : {true, false}) {
    std::vector<float> xs = x;
    if (!nanInput)
      xs[4] = -5.f;
    // Windows: [0,1,3,4], [1,2,4,5], [3,4,6,7], [4,5,7,8] all hold element 4.
    std::vector<float> want(4);
    int tl[4] = {0, 1, 3, 4};
    for (int o = 0; o < 4; ++o) {
      float s = xs[static_cast<size_t>(tl[o])] + xs[static_cast<size_t>(tl[o] + 1)] +
                xs[static_cast<size_t>(tl[o] + 3)] + xs[static_cast<size_t>(tl[o] + 4)] - 1.f;
      want[static_cast<size_t>(o)] = std::isnan(s) ? kNan : std::max(s, 0.f);
    }
    KernelSpec spec =
        makeSpec("FusedConv", {f32({1, 1, 3, 3}), f32({1, 1, 2, 2}), f32({1})}, {f32({1, 1, 2, 2})},
                 {{"kernel_shape", ir::Attribute(std::vector<int64_t>{2, 2})},
                  {"activation", ir::Attribute(std::string("Relu"))}});
    spec.domain = "ai.dtc";
    Buf<float> in(xs), wb(w), b(std::vector<float>{-1.f}), out(4);
    // Two runs: the second reuses the kernel's unfused path (or the fused one).
    CpuContext ctx;
    auto k = createKernel(spec, ctx);
    ASSERT_TRUE(k.hasValue()) << k.status().message();
    for (int run = 0; run < 2; ++run) {
      const void *ins[3] = {in.data(), wb.data(), b.data()};
      void *outs[1] = {out.data()};
      ASSERT_TRUE((*k)->run({ins, 3, outs, 1}).isOk());
      SCOPED_TRACE(nanInput ? "NaN input" : "finite input");
      expectNanPattern(out.data(), want);
    }
  }
}

// The gradients follow PyTorch's backward formulas, which do not force NaN either way (relu's
// threshold_backward gives 0 where x <= 0 whatever dY is): no NaN wrapper there. A NaN forward
// already makes the loss NaN, which dtc-run reports (issue 13, finding 12).

} // namespace
} // namespace dtc::ops::cpu::test
