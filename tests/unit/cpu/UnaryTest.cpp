// Tests of the CPU kernels of the elementwise math ops (Sqrt ... Gelu, Clip), Pow, Cast and
// LogSoftmax against std:: reference functions computed here in double: values, edge values
// (NaN, +-inf, -0), scalars and empty tensors, broadcasting, in-place runs and check errors.
#include "tests/unit/cpu/KernelTestUtil.h"

#include <cmath>
#include <functional>
#include <limits>

namespace dtc::ops::cpu::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::string checkMsg(const KernelSpec &s) { return checkKernel(s).message(); }

std::string dimsStr(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

/// Runs a one-input f32 op on `x` (shape [n]) and returns the output.
std::vector<float> runUnary(const std::string &op, const std::vector<float> &x,
                            std::map<std::string, ir::Attribute> attrs = {}) {
  Buf<float> in(x), out(x.size());
  int64_t n = static_cast<int64_t>(x.size());
  runKernel(makeSpec(op, {f32({n})}, {f32({n})}, std::move(attrs)), {in.data()}, {out.data()});
  return out.vec();
}

double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double geluTanh(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

struct UnaryCase {
  std::string op;
  std::map<std::string, ir::Attribute> attrs;
  std::function<double(double)> ref;
  bool positive; ///< inputs in (0, 8) rather than (-4, 4)
};

TEST(CpuUnary, F32MatchesStdReference) {
  const std::vector<UnaryCase> cases = {
      {"Sqrt", {}, [](double x) { return std::sqrt(x); }, true},
      {"Log", {}, [](double x) { return std::log(x); }, true},
      {"Exp", {}, [](double x) { return std::exp(x); }, false},
      {"Abs", {}, [](double x) { return std::fabs(x); }, false},
      {"Neg", {}, [](double x) { return -x; }, false},
      {"Reciprocal", {}, [](double x) { return 1.0 / x; }, false},
      {"Erf", {}, [](double x) { return std::erf(x); }, false},
      {"LeakyRelu", {{"alpha", 0.1f}}, [](double x) { return x >= 0 ? x : 0.1 * x; }, false},
      {"LeakyRelu", {}, [](double x) { return x >= 0 ? x : 0.01 * x; }, false},
      {"HardSigmoid",
       {{"alpha", 0.3f}, {"beta", 0.4f}},
       [](double x) { return std::max(0.0, std::min(1.0, 0.3 * x + 0.4)); },
       false},
      {"HardSigmoid",
       {},
       [](double x) { return std::max(0.0, std::min(1.0, 0.2 * x + 0.5)); },
       false},
      {"HardSwish",
       {},
       [](double x) { return x * std::max(0.0, std::min(1.0, x / 6 + 0.5)); },
       false},
      {"Gelu", {}, gelu, false},
      {"Gelu", {{"approximate", "none"}}, gelu, false},
      {"Gelu", {{"approximate", "tanh"}}, geluTanh, false},
      {"Softplus", {}, [](double x) { return std::log1p(std::exp(x)); }, false},
      {"Softsign", {}, [](double x) { return x / (1 + std::fabs(x)); }, false},
      {"Elu", {}, [](double x) { return x >= 0 ? x : std::expm1(x); }, false},
      {"Elu", {{"alpha", 0.5f}}, [](double x) { return x >= 0 ? x : 0.5 * std::expm1(x); }, false},
      {"Selu",
       {},
       [](double x) {
         return 1.0507009873554805 * (x > 0 ? x : 1.6732632423543772 * std::expm1(x));
       },
       false},
      {"Selu",
       {{"alpha", 2.f}, {"gamma", 3.f}},
       [](double x) { return 3 * (x > 0 ? x : 2 * std::expm1(x)); },
       false},
      {"Celu", {}, [](double x) { return x > 0 ? x : std::expm1(x); }, false},
      {"Celu", {{"alpha", 2.f}}, [](double x) { return x > 0 ? x : 2 * std::expm1(x / 2); }, false},
      {"Mish", {}, [](double x) { return x * std::tanh(std::log1p(std::exp(x))); }, false},
      {"Sin", {}, [](double x) { return std::sin(x); }, false},
      {"Cos", {}, [](double x) { return std::cos(x); }, false},
  };
  const std::vector<int64_t> shape = {2, 3, 7};
  for (const UnaryCase &c : cases) {
    SCOPED_TRACE(c.op);
    Buf<float> x = randomBuf(static_cast<size_t>(count(shape)), 7);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = c.positive ? (x[i] + 1.001f) * 4.f : x[i] * 4.f;
    Buf<float> y(x.size());
    runKernel(makeSpec(c.op, {f32(shape)}, {f32(shape)}, c.attrs), {x.data()}, {y.data()});
    std::vector<float> want;
    for (size_t i = 0; i < x.size(); ++i)
      want.push_back(static_cast<float>(c.ref(x[i])));
    expectNear(y.data(), want, 1e-5);
  }
}

TEST(CpuUnary, PReluBroadcastsSlopeUnidirectionally) {
  // X [2, 3, 2] with slope [3, 1] (per channel), [2] (last axis), [] (one slope) and X's shape.
  Buf<float> x(std::vector<float>{-1, 2, -3, 4, -5, 0, 6, -7, 8, -9, 0, -2});
  const std::vector<std::pair<std::vector<int64_t>, std::vector<float>>> slopes = {
      {{3, 1}, {0.5f, 2.f, -1.f}}, {{2}, {0.1f, 0.2f}}, {{}, {0.25f}}};
  for (const auto &[shape, values] : slopes) {
    SCOPED_TRACE(dimsStr(shape));
    Buf<float> s(values), y(12);
    runKernel(makeSpec("PRelu", {f32({2, 3, 2}), f32(shape)}, {f32({2, 3, 2})}),
              {x.data(), s.data()}, {y.data()});
    std::vector<float> want;
    for (int64_t i = 0; i < 12; ++i) {
      float slope =
          shape.empty() ? values[0] : (shape.size() == 1 ? values[i % 2] : values[(i / 2) % 3]);
      want.push_back(x[i] < 0 ? slope * x[i] : x[i]);
    }
    expectNear(y.data(), want, 1e-6);
  }
  EXPECT_EQ(checkMsg(makeSpec("PRelu", {f32({2, 3}), f32({2, 3, 1})}, {f32({2, 3})})),
            "node 'n0' (PRelu): slope [2,3,1] does not broadcast to X [2,3] (unidirectional "
            "broadcasting)");
  EXPECT_EQ(checkMsg(makeSpec("PRelu", {f32({2, 3}), f32({2})}, {f32({2, 3})})),
            "node 'n0' (PRelu): slope [2] does not broadcast to X [2,3] (unidirectional "
            "broadcasting)");
}

TEST(CpuUnary, EdgeValues) {
  auto y = runUnary("Sqrt", {-1.f, 0.f, kInf, 4.f, kNaN});
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], 0.f);
  EXPECT_EQ(y[2], kInf);
  EXPECT_EQ(y[3], 2.f);
  EXPECT_TRUE(std::isnan(y[4]));
  y = runUnary("Log", {0.f, -1.f, kInf, 1.f});
  EXPECT_EQ(y[0], -kInf);
  EXPECT_TRUE(std::isnan(y[1]));
  EXPECT_EQ(y[2], kInf);
  EXPECT_EQ(y[3], 0.f);
  // Near 1 the result is small: relative accuracy matters (why Log is a std::log loop).
  y = runUnary("Log", {1.0001f, 0.9999f});
  EXPECT_NEAR(y[0], std::log(1.0001f), 1e-5 * std::fabs(std::log(1.0001f)));
  EXPECT_NEAR(y[1], std::log(0.9999f), 1e-5 * std::fabs(std::log(0.9999f)));
  y = runUnary("Exp", {-kInf, 100.f, 0.f, -200.f});
  EXPECT_EQ(y[0], 0.f);
  EXPECT_EQ(y[1], kInf);
  EXPECT_EQ(y[2], 1.f);
  EXPECT_EQ(y[3], 0.f);
  y = runUnary("Reciprocal", {0.f, -0.f, 4.f, kInf});
  EXPECT_EQ(y[0], kInf);
  EXPECT_EQ(y[1], -kInf);
  EXPECT_EQ(y[2], 0.25f);
  EXPECT_EQ(y[3], 0.f);
  y = runUnary("Neg", {0.f, -3.f, kNaN});
  EXPECT_TRUE(std::signbit(y[0]));
  EXPECT_EQ(y[1], 3.f);
  EXPECT_TRUE(std::isnan(y[2]));
  y = runUnary("Abs", {-0.f, -kInf, -2.5f});
  EXPECT_FALSE(std::signbit(y[0]));
  EXPECT_EQ(y[1], kInf);
  EXPECT_EQ(y[2], 2.5f);
  y = runUnary("Erf", {kInf, -kInf, 0.f});
  EXPECT_EQ(y[0], 1.f);
  EXPECT_EQ(y[1], -1.f);
  EXPECT_EQ(y[2], 0.f);
  y = runUnary("HardSigmoid", {-100.f, 100.f, kNaN});
  EXPECT_EQ(y[0], 0.f);
  EXPECT_EQ(y[1], 1.f);
  EXPECT_TRUE(std::isnan(y[2]));
  y = runUnary("HardSwish", {-3.f, 3.f, 1.f});
  EXPECT_EQ(y[0], 0.f);
  EXPECT_EQ(y[1], 3.f);
  EXPECT_NEAR(y[2], 1.f * (1.f / 6 + 0.5f), 1e-6);
  y = runUnary("Gelu", {-10.f, 10.f, 0.f});
  EXPECT_NEAR(y[0], 0.f, 1e-5);
  EXPECT_NEAR(y[1], 10.f, 1e-5);
  EXPECT_EQ(y[2], 0.f);
}

TEST(CpuUnary, ScalarEmptyAndInPlace) {
  // Rank 0 (oneDNN and loop paths).
  for (std::string op : {"Exp", "Erf"}) {
    Buf<float> x(std::vector<float>{0.5f}), y(1);
    runKernel(makeSpec(op, {f32({})}, {f32({})}), {x.data()}, {y.data()});
    EXPECT_NEAR(y[0], op == "Exp" ? std::exp(0.5f) : std::erf(0.5f), 1e-6) << op;
  }
  // Zero-size: nothing to compute, null buffers are fine.
  CpuContext ctx;
  for (std::string op : {"Sqrt", "Neg", "Clip"}) {
    auto k = createKernel(makeSpec(op, {f32({0, 3})}, {f32({0, 3})}), ctx);
    ASSERT_TRUE(k.hasValue()) << k.status().message();
    const void *in[] = {nullptr};
    void *out[] = {nullptr};
    EXPECT_TRUE((*k)->run({in, 1, out, 1}).isOk()) << op;
  }
  // In place: the output overwrites input 0.
  for (std::string op : {"Exp", "Erf", "HardSigmoid", "Gelu", "Clip"}) {
    KernelSpec s = makeSpec(op, {f32({4, 5})}, {f32({4, 5})});
    EXPECT_EQ(inPlaceInput(s), 0) << op;
    Buf<float> x = randomBuf(20, 11), y(20);
    runKernel(s, {x.data()}, {y.data()});
    runKernel(s, {x.data()}, {x.data()});
    for (size_t i = 0; i < 20; ++i)
      EXPECT_EQ(x[i], y[i]) << op << " at " << i;
  }
}

std::vector<float> runClip(const std::vector<float> &x, const float *lo, const float *hi) {
  Buf<float> in(x), out(x.size()), blo(1), bhi(1);
  int64_t n = static_cast<int64_t>(x.size());
  std::vector<TensorDesc> ins = {f32({n}), lo ? f32({}) : TensorDesc{},
                                 hi ? f32({}) : TensorDesc{}};
  if (lo)
    blo[0] = *lo;
  if (hi)
    bhi[0] = *hi;
  runKernel(makeSpec("Clip", ins, {f32({n})}),
            {in.data(), lo ? blo.data() : nullptr, hi ? bhi.data() : nullptr}, {out.data()});
  return out.vec();
}

TEST(CpuClip, BoundsOptionalAndMinAboveMax) {
  const std::vector<float> x = {-5.f, -1.f, 0.f, 0.5f, 3.f, -kInf, kInf, kNaN};
  float lo = -1.f, hi = 1.f;
  auto both = runClip(x, &lo, &hi);
  auto onlyLo = runClip(x, &lo, nullptr);
  auto onlyHi = runClip(x, nullptr, &hi);
  auto none = runClip(x, nullptr, nullptr);
  for (size_t i = 0; i + 1 < x.size(); ++i) {
    EXPECT_EQ(both[i], std::min(hi, std::max(lo, x[i]))) << i;
    EXPECT_EQ(onlyLo[i], std::max(lo, x[i])) << i;
    EXPECT_EQ(onlyHi[i], std::min(hi, x[i])) << i;
    EXPECT_EQ(none[i], x[i]) << i;
  }
  EXPECT_TRUE(std::isnan(both.back()) && std::isnan(none.back()));
  // ONNX Clip-13: min > max sets every value to max (like onnxruntime and numpy.clip).
  float lo2 = 2.f, hi2 = -2.f;
  auto inverted = runClip({-5.f, 0.f, 5.f}, &lo2, &hi2);
  EXPECT_EQ(inverted, (std::vector<float>{-2.f, -2.f, -2.f}));
  // Only min given as two inputs (the max input absent from the list).
  Buf<float> in(std::vector<float>{-3.f, 3.f}), out(2), blo(std::vector<float>{0.f});
  runKernel(makeSpec("Clip", {f32({2}), f32({})}, {f32({2})}), {in.data(), blo.data()},
            {out.data()});
  EXPECT_EQ(out.vec(), (std::vector<float>{0.f, 3.f}));
}

TEST(CpuClip, Int64) {
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  Buf<int64_t> x(std::vector<int64_t>{kMin, -7, 0, 7, 100}), y(5), lo(std::vector<int64_t>{-5}),
      hi(std::vector<int64_t>{50});
  runKernel(makeSpec("Clip", {i64({5}), i64({}), i64({})}, {i64({5})}),
            {x.data(), lo.data(), hi.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<int64_t>{-5, -5, 0, 7, 50}));
  runKernel(makeSpec("Clip", {i64({5}), {}, i64({})}, {i64({5})}), {x.data(), nullptr, hi.data()},
            {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<int64_t>{kMin, -7, 0, 7, 50}));
}

TEST(CpuUnary, NegAbsInt64Wrap) {
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  Buf<int64_t> x(std::vector<int64_t>{kMin, -3, 0, 5}), y(4);
  runKernel(makeSpec("Neg", {i64({4})}, {i64({4})}), {x.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<int64_t>{kMin, 3, 0, -5}));
  runKernel(makeSpec("Abs", {i64({2, 2})}, {i64({2, 2})}), {x.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<int64_t>{kMin, 3, 0, 5}));
}

TEST(CpuUnary, CheckErrors) {
  EXPECT_EQ(checkMsg(makeSpec("Sqrt", {i64({2})}, {i64({2})})),
            "node 'n0' (Sqrt): input 0 has dtype i64; the CPU kernel supports f32");
  EXPECT_EQ(checkMsg(makeSpec("Neg", {{ir::DType::kInt32, {2}}}, {{ir::DType::kInt32, {2}}})),
            "node 'n0' (Neg): input 0 has dtype i32; the CPU kernel supports f32 or i64");
  EXPECT_EQ(checkMsg(makeSpec("Exp", {f32({2})}, {i64({2})})),
            "node 'n0' (Exp): output 0 has dtype i64; the CPU kernel supports f32");
  EXPECT_EQ(checkMsg(makeSpec("Exp", {f32({2})}, {f32({3})})),
            "node 'n0' (Exp): output 0 has shape [3], expected [2]");
  EXPECT_EQ(checkMsg(makeSpec("Gelu", {f32({2})}, {f32({2})}, {{"approximate", "fast"}})),
            "node 'n0' (Gelu): attribute 'approximate' must be \"none\" or \"tanh\", got \"fast\"");
  EXPECT_EQ(checkMsg(makeSpec("Clip", {f32({2}), f32({2})}, {f32({2})})),
            "node 'n0' (Clip): input 1 (min) has shape [2]; expected a scalar");
  EXPECT_EQ(checkMsg(makeSpec("Clip", {f32({2}), {}, i64({})}, {f32({2})})),
            "node 'n0' (Clip): input 2 has dtype i64; the CPU kernel supports f32");
  EXPECT_EQ(checkMsg(makeSpec("Erf", {f32({2}), f32({2})}, {f32({2})})),
            "node 'n0' (Erf): expected 1 inputs, got 2");
  TensorDesc cl{ir::DType::kFloat32, {1, 2, 3}, Layout::kChannelsLast};
  EXPECT_TRUE(checkKernel(makeSpec("Exp", {cl}, {cl})).isOk());
  EXPECT_EQ(checkMsg(makeSpec("Exp", {cl}, {f32({1, 2, 3})})),
            "node 'n0' (Exp): input 0 is channels-last but output 0 is row-major; the CPU kernel "
            "needs one layout");
}

// ---- Pow ----------------------------------------------------------------------------------------

/// Reference numpy broadcast of a binary op (shapes a, b -> out).
template <typename A, typename B, typename F>
std::vector<float> refBroadcast(const std::vector<A> &a, std::vector<int64_t> sa,
                                const std::vector<B> &b, std::vector<int64_t> sb,
                                const std::vector<int64_t> &out, F fn) {
  size_t r = out.size();
  sa.insert(sa.begin(), r - sa.size(), 1);
  sb.insert(sb.begin(), r - sb.size(), 1);
  std::vector<float> y(static_cast<size_t>(count(out)));
  for (int64_t i = 0; i < count(out); ++i) {
    int64_t rem = i, ia = 0, ib = 0, ma = 1, mb = 1;
    for (size_t d = r; d-- > 0;) {
      int64_t c = rem % out[d];
      rem /= out[d];
      ia += (sa[d] == 1 ? 0 : c) * ma;
      ib += (sb[d] == 1 ? 0 : c) * mb;
      ma *= sa[d];
      mb *= sb[d];
    }
    y[static_cast<size_t>(i)] = fn(a[static_cast<size_t>(ia)], b[static_cast<size_t>(ib)]);
  }
  return y;
}

TEST(CpuPow, F32Broadcasting) {
  struct Case {
    std::vector<int64_t> a, b, out;
  };
  const std::vector<Case> cases = {{{2, 3, 4}, {2, 3, 4}, {2, 3, 4}},
                                   {{2, 3, 4}, {4}, {2, 3, 4}},
                                   {{3, 1}, {2, 1, 4}, {2, 3, 4}},
                                   {{}, {2, 3}, {2, 3}},
                                   {{2, 3}, {}, {2, 3}},
                                   {{1}, {}, {1}}};
  for (const Case &c : cases) {
    Buf<float> a = randomBuf(static_cast<size_t>(count(c.a)), 3);
    Buf<float> b = randomBuf(static_cast<size_t>(count(c.b)), 4);
    for (size_t i = 0; i < a.size(); ++i)
      a[i] = std::fabs(a[i]) * 3.f + 0.1f;
    for (size_t i = 0; i < b.size(); ++i)
      b[i] *= 3.f;
    Buf<float> y(static_cast<size_t>(count(c.out)));
    runKernel(makeSpec("Pow", {f32(c.a), f32(c.b)}, {f32(c.out)}), {a.data(), b.data()},
              {y.data()});
    auto want = refBroadcast<float, float>(a.vec(), c.a, b.vec(), c.b, c.out, [](float x, float e) {
      return static_cast<float>(std::pow(static_cast<double>(x), static_cast<double>(e)));
    });
    SCOPED_TRACE(dimsStr(c.a) + " ** " + dimsStr(c.b));
    expectNear(y.data(), want);
  }
}

TEST(CpuPow, NegativeBaseAndIntExponent) {
  // f32 exponents: an integral exponent keeps the sign; a fractional one gives NaN.
  Buf<float> x(std::vector<float>{-2.f, -2.f, -2.f, -2.f, 0.f, 0.f}),
      e(std::vector<float>{3.f, 2.f, 0.f, 0.5f, -1.f, 0.f}), y(6);
  runKernel(makeSpec("Pow", {f32({6}), f32({6})}, {f32({6})}), {x.data(), e.data()}, {y.data()});
  EXPECT_EQ(y[0], -8.f);
  EXPECT_EQ(y[1], 4.f);
  EXPECT_EQ(y[2], 1.f);
  EXPECT_TRUE(std::isnan(y[3]));
  EXPECT_EQ(y[4], kInf);
  EXPECT_EQ(y[5], 1.f);
  // i64 exponents, broadcast over rows.
  Buf<float> b(std::vector<float>{-2.f, 3.f, -0.5f, 2.f, 10.f, -1.f}), z(6);
  Buf<int64_t> n(std::vector<int64_t>{3, -2, 0});
  runKernel(makeSpec("Pow", {f32({2, 3}), i64({3})}, {f32({2, 3})}), {b.data(), n.data()},
            {z.data()});
  EXPECT_EQ(z.vec(), (std::vector<float>{-8.f, 1.f / 9.f, 1.f, 8.f, 0.01f, 1.f}));
  // (-1) ** (2^53 + 1) is exact in double: an odd exponent keeps the sign.
  Buf<float> m1(std::vector<float>{-1.f});
  Buf<int64_t> big(std::vector<int64_t>{(int64_t{1} << 53) + 1});
  Buf<float> r(1);
  runKernel(makeSpec("Pow", {f32({}), i64({})}, {f32({})}), {m1.data(), big.data()}, {r.data()});
  EXPECT_EQ(r[0], -1.f);
  // -0 and -inf bases with odd/even negative and positive i64 exponents (IEEE pow rules).
  Buf<float> b2(std::vector<float>{-0.f, -0.f, -kInf, -kInf, -2.f}), z2(5);
  Buf<int64_t> n2(std::vector<int64_t>{-1, -2, 3, 2, (int64_t{1} << 62) + 1});
  runKernel(makeSpec("Pow", {f32({5}), i64({5})}, {f32({5})}), {b2.data(), n2.data()}, {z2.data()});
  EXPECT_EQ(z2.vec(), (std::vector<float>{-kInf, kInf, -kInf, kInf, -kInf}));
}

TEST(CpuPow, ScalarExponentFastPathAndInPlace) {
  Buf<float> x = randomBuf(12, 5);
  for (float p : {2.f, 3.f, 0.5f}) {
    Buf<float> base(x), e(std::vector<float>{p}), y(12);
    KernelSpec s = makeSpec("Pow", {f32({3, 4}), f32({})}, {f32({3, 4})});
    runKernel(s, {base.data(), e.data()}, {y.data()});
    for (size_t i = 0; i < 12; ++i) {
      float want = std::pow(x[i], p);
      if (std::isnan(want))
        EXPECT_TRUE(std::isnan(y[i])) << p << " at " << i;
      else
        EXPECT_FLOAT_EQ(y[i], want) << p << " at " << i;
    }
    EXPECT_EQ(inPlaceInput(s), 0);
    runKernel(s, {base.data(), e.data()}, {base.data()});
    for (size_t i = 0; i < 12; ++i)
      EXPECT_TRUE(base[i] == y[i] || (std::isnan(base[i]) && std::isnan(y[i])));
  }
  // In place on the exponent (f32, output's shape); never on an i64 exponent.
  KernelSpec s1 = makeSpec("Pow", {f32({}), f32({3})}, {f32({3})});
  EXPECT_EQ(inPlaceInput(s1), 1);
  Buf<float> two(std::vector<float>{2.f}), ex(std::vector<float>{1.f, 2.f, 3.f});
  runKernel(s1, {two.data(), ex.data()}, {ex.data()});
  EXPECT_EQ(ex.vec(), (std::vector<float>{2.f, 4.f, 8.f}));
  EXPECT_EQ(inPlaceInput(makeSpec("Pow", {f32({}), i64({3})}, {f32({3})})), -1);
}

TEST(CpuPow, CheckErrors) {
  EXPECT_EQ(checkMsg(makeSpec("Pow", {f32({2, 3}), f32({4})}, {f32({2, 3})})),
            "node 'n0' (Pow): input shapes [2,3] and [4] do not broadcast");
  EXPECT_EQ(checkMsg(makeSpec("Pow", {i64({2}), i64({2})}, {i64({2})})),
            "node 'n0' (Pow): input 0 has dtype i64; the CPU kernel supports f32");
  EXPECT_EQ(checkMsg(makeSpec("Pow", {f32({2}), {ir::DType::kFloat64, {2}}}, {f32({2})})),
            "node 'n0' (Pow): input 1 has dtype f64; the CPU kernel supports f32 or i64");
  EXPECT_EQ(checkMsg(makeSpec("Pow", {f32({2}), f32({1})}, {f32({1})})),
            "node 'n0' (Pow): output 0 has shape [1], expected [2]");
}

// ---- Cast ---------------------------------------------------------------------------------------

template <typename To, typename From>
std::vector<To> runCast(const std::vector<From> &x, ir::DType from, ir::DType to) {
  Buf<From> in(x);
  Buf<To> out(x.size());
  int64_t n = static_cast<int64_t>(x.size());
  runKernel(makeSpec("Cast", {{from, {n}}}, {{to, {n}}},
                     {{"to", static_cast<int64_t>(to)}, {"saturate", int64_t{1}}}),
            {in.data()}, {out.data()});
  return out.vec();
}

TEST(CpuCast, FloatToIntTruncatesAndSaturates) {
  using D = ir::DType;
  const std::vector<float> x = {1.7f, -1.7f, 2.5f,  -0.5f, 0.f,   kNaN,
                                kInf, -kInf, 1e20f, 300.f, -300.f};
  const int64_t kMax64 = std::numeric_limits<int64_t>::max(), kMin64 = -kMax64 - 1;
  EXPECT_EQ((runCast<int64_t>(x, D::kFloat32, D::kInt64)),
            (std::vector<int64_t>{1, -1, 2, 0, 0, 0, kMax64, kMin64, kMax64, 300, -300}));
  EXPECT_EQ((runCast<int32_t>(x, D::kFloat32, D::kInt32)),
            (std::vector<int32_t>{1, -1, 2, 0, 0, 0, INT32_MAX, INT32_MIN, INT32_MAX, 300, -300}));
  EXPECT_EQ((runCast<int8_t>(x, D::kFloat32, D::kInt8)),
            (std::vector<int8_t>{1, -1, 2, 0, 0, 0, 127, -128, 127, 127, -128}));
  EXPECT_EQ((runCast<uint8_t>(x, D::kFloat32, D::kUInt8)),
            (std::vector<uint8_t>{1, 0, 2, 0, 0, 0, 255, 0, 255, 255, 0}));
  // f64 -> i64 at the edge of the range: 2^63 saturates, -2^63 is exact.
  EXPECT_EQ(
      (runCast<int64_t>(std::vector<double>{9223372036854775808.0, -9223372036854775808.0, -2.9},
                        D::kFloat64, D::kInt64)),
      (std::vector<int64_t>{kMax64, kMin64, -2}));
}

TEST(CpuCast, IntegersWrapAndBools) {
  using D = ir::DType;
  EXPECT_EQ(
      (runCast<int32_t>(std::vector<int64_t>{(int64_t{1} << 32) + 5, -1, 7}, D::kInt64, D::kInt32)),
      (std::vector<int32_t>{5, -1, 7}));
  EXPECT_EQ((runCast<uint8_t>(std::vector<int64_t>{-1, 256, 3}, D::kInt64, D::kUInt8)),
            (std::vector<uint8_t>{255, 0, 3}));
  EXPECT_EQ((runCast<int64_t>(std::vector<uint8_t>{255, 0}, D::kUInt8, D::kInt64)),
            (std::vector<int64_t>{255, 0}));
  EXPECT_EQ((runCast<int64_t>(std::vector<int8_t>{-128, 5}, D::kInt8, D::kInt64)),
            (std::vector<int64_t>{-128, 5}));
  // To bool: x != 0 (NaN is true, -0 is false); from bool: 0 or 1 (any nonzero byte is true).
  EXPECT_EQ(
      (runCast<uint8_t>(std::vector<float>{0.f, -0.f, 0.5f, kNaN, -3.f}, D::kFloat32, D::kBool)),
      (std::vector<uint8_t>{0, 0, 1, 1, 1}));
  EXPECT_EQ((runCast<uint8_t>(std::vector<int64_t>{0, 256, -1}, D::kInt64, D::kBool)),
            (std::vector<uint8_t>{0, 1, 1}));
  EXPECT_EQ((runCast<float>(std::vector<uint8_t>{0, 1, 2}, D::kBool, D::kFloat32)),
            (std::vector<float>{0.f, 1.f, 1.f}));
  EXPECT_EQ((runCast<int64_t>(std::vector<uint8_t>{0, 1, 7}, D::kBool, D::kInt64)),
            (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ((runCast<uint8_t>(std::vector<uint8_t>{0, 9}, D::kBool, D::kBool)),
            (std::vector<uint8_t>{0, 1}));
}

TEST(CpuCast, RoundTrips) {
  using D = ir::DType;
  const std::vector<int64_t> ints = {0, -1, (int64_t{1} << 53), -(int64_t{1} << 53) + 1, 123456789};
  auto d = runCast<double>(ints, D::kInt64, D::kFloat64);
  EXPECT_EQ((runCast<int64_t>(d, D::kFloat64, D::kInt64)), ints);
  const std::vector<float> fs = {0.1f, -3.25f, 1e30f, -1e-30f, kInf};
  auto fd = runCast<double>(fs, D::kFloat32, D::kFloat64);
  EXPECT_EQ(fd[0], static_cast<double>(0.1f));
  EXPECT_EQ((runCast<float>(fd, D::kFloat64, D::kFloat32)), fs);
  // f64 -> f32 rounds to nearest; out of range becomes inf.
  EXPECT_EQ((runCast<float>(std::vector<double>{0.1, 1e300, -1e300}, D::kFloat64, D::kFloat32)),
            (std::vector<float>{0.1f, kInf, -kInf}));
  const std::vector<int32_t> i32 = {-7, 16777216, 5};
  EXPECT_EQ((runCast<float>(i32, D::kInt32, D::kFloat32)),
            (std::vector<float>{-7.f, 16777216.f, 5.f}));
}

TEST(CpuCast, ChecksAndInPlace) {
  using D = ir::DType;
  EXPECT_EQ(checkMsg(makeSpec("Cast", {{D::kInt16, {2}}}, {f32({2})}, {{"to", int64_t{1}}})),
            "node 'n0' (Cast): input 0 has dtype i16; the CPU kernel supports f32, f64, i32, i64, "
            "i8, u8, bool, bf16 or f16");
  EXPECT_EQ(checkMsg(makeSpec("Cast", {f32({2})}, {i64({2})}, {{"to", int64_t{6}}})),
            "node 'n0' (Cast): attribute 'to' = 6 does not match output 0's dtype i64");
  EXPECT_EQ(checkMsg(makeSpec("Cast", {f32({2})}, {i64({3})}, {{"to", int64_t{7}}})),
            "node 'n0' (Cast): output 0 has shape [3], expected [2]");
  EXPECT_EQ(inPlaceInput(makeSpec("Cast", {f32({2})}, {{D::kInt32, {2}}}, {{"to", int64_t{6}}})),
            0);
  EXPECT_EQ(inPlaceInput(makeSpec("Cast", {f32({2})}, {i64({2})}, {{"to", int64_t{7}}})), -1);
  // In place f32 -> i32 over the same bytes.
  Buf<float> x(std::vector<float>{1.5f, -2.5f, 3.9f});
  KernelSpec s = makeSpec("Cast", {f32({3})}, {{D::kInt32, {3}}}, {{"to", int64_t{6}}});
  runKernel(s, {x.data()}, {x.data()});
  int32_t got[3];
  std::memcpy(got, x.data(), sizeof got);
  EXPECT_EQ(std::vector<int32_t>(got, got + 3), (std::vector<int32_t>{1, -2, 3}));
}

// ---- LogSoftmax ---------------------------------------------------------------------------------

/// log_softmax of x (row-major `shape`) along `axis`, in double.
std::vector<float> refLogSoftmax(const std::vector<float> &x, const std::vector<int64_t> &shape,
                                 size_t axis) {
  int64_t outer = 1, inner = 1, n = shape[axis];
  for (size_t d = 0; d < axis; ++d)
    outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d)
    inner *= shape[d];
  std::vector<float> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return static_cast<size_t>((o * n + k) * inner + i); };
      double m = -INFINITY, s = 0;
      for (int64_t k = 0; k < n; ++k)
        m = std::max(m, static_cast<double>(x[at(k)]));
      for (int64_t k = 0; k < n; ++k)
        s += std::exp(x[at(k)] - m);
      for (int64_t k = 0; k < n; ++k)
        y[at(k)] = static_cast<float>(x[at(k)] - m - std::log(s));
    }
  return y;
}

TEST(CpuLogSoftmax, Axes) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t axis;
    size_t pos;
  };
  for (const Case &c : std::vector<Case>{{{3, 4}, 0, 0},
                                         {{3, 4}, -1, 1},
                                         {{3, 4}, 1, 1},
                                         {{2, 3, 4}, 1, 1},
                                         {{2, 3, 4}, -3, 0},
                                         {{5}, 0, 0}}) {
    SCOPED_TRACE(dimsStr(c.shape) + " axis " + std::to_string(c.axis));
    Buf<float> x = randomBuf(static_cast<size_t>(count(c.shape)), 9);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] *= 10.f;
    Buf<float> y(x.size());
    runKernel(makeSpec("LogSoftmax", {f32(c.shape)}, {f32(c.shape)}, {{"axis", c.axis}}),
              {x.data()}, {y.data()});
    expectNear(y.data(), refLogSoftmax(x.vec(), c.shape, c.pos));
  }
  // Default axis is -1; large values do not overflow.
  Buf<float> x(std::vector<float>{1000.f, 1000.f, -1000.f}), y(3);
  runKernel(makeSpec("LogSoftmax", {f32({1, 3})}, {f32({1, 3})}), {x.data()}, {y.data()});
  EXPECT_NEAR(y[0], -std::log(2.f), 1e-5);
  EXPECT_NEAR(y[1], -std::log(2.f), 1e-5);
  EXPECT_LT(y[2], -1999.f);
}

TEST(CpuLogSoftmax, CheckErrors) {
  EXPECT_EQ(checkMsg(makeSpec("LogSoftmax", {f32({2, 3})}, {f32({2, 3})}, {{"axis", int64_t{2}}})),
            "node 'n0' (LogSoftmax): axis 2 is out of range for rank 2");
  EXPECT_EQ(checkMsg(makeSpec("LogSoftmax", {f32({})}, {f32({})})),
            "node 'n0' (LogSoftmax): input 0 is a scalar; LogSoftmax needs rank >= 1");
  EXPECT_EQ(checkMsg(makeSpec("LogSoftmax", {i64({2})}, {i64({2})})),
            "node 'n0' (LogSoftmax): input 0 has dtype i64; the CPU kernel supports f32");
  EXPECT_EQ(inPlaceInput(makeSpec("LogSoftmax", {f32({2})}, {f32({2})})), -1);
}

} // namespace
} // namespace dtc::ops::cpu::test
