// CPU kernels of the ai.dtc optimizer ops (ops/cpu/Optimizer.cpp) against reference formulas
// written from torch.optim 1.13 in double precision, over several steps, with outputs both
// separate from and sharing the bytes of their state inputs; SumSquares, ClipGradNormScale and
// ZeroGradient; spec errors.
#include "ops/OpDef.h"
#include "tests/unit/cpu/KernelTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace dtc::ops::cpu {
namespace {

using test::Buf;
using test::f32;
using test::i64;
using test::randomBuf;

constexpr int64_t kN = 37; // odd: no vector-width multiple

KernelSpec dtcSpec(std::string op, std::vector<TensorDesc> ins, std::vector<TensorDesc> outs,
                   std::map<std::string, ir::Attribute> attrs) {
  KernelSpec s = test::makeSpec(std::move(op), std::move(ins), std::move(outs), std::move(attrs));
  s.domain = "ai.dtc";
  return s;
}

std::vector<double> toDouble(const Buf<float> &b) {
  std::vector<double> v(b.size());
  for (size_t i = 0; i < b.size(); ++i)
    v[i] = b[i];
  return v;
}

void expectClose(const Buf<float> &got, const std::vector<double> &want, double tol, int step,
                 const char *what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * std::max(1.0, std::fabs(want[i])))
        << what << " element " << i << " after step " << step;
}

// ---- SGD -------------------------------------------------------------------------------------

/// torch.optim.SGD (1.13 _single_tensor_sgd, dampening 0): the buffer starts as a clone of the
/// first d_p, as PyTorch does.
struct SgdRef {
  double mu, wd;
  bool nesterov;
  std::vector<double> p, buf;
  bool first = true;
  void step(const Buf<float> &g, double lr, double scale) {
    for (size_t i = 0; i < p.size(); ++i) {
      double d = g[i] * scale + wd * p[i];
      if (mu != 0) {
        buf[i] = first ? d : mu * buf[i] + d;
        d = nesterov ? d + mu * buf[i] : buf[i];
      }
      p[i] -= lr * d;
    }
    first = false;
  }
};

struct SgdCase {
  float mu, wd;
  bool nesterov;
  float scale; // 0: no grad_scale input
  bool inPlace;
};

void runSgd(const SgdCase &c, int steps) {
  const bool withMomentum = c.mu != 0.f;
  std::vector<TensorDesc> ins = {f32({kN}), f32({kN}), f32({})};
  std::vector<TensorDesc> outs = {f32({kN})};
  if (withMomentum) {
    ins.push_back(f32({kN}));
    outs.push_back(f32({kN}));
  } else if (c.scale != 0.f) {
    ins.push_back(TensorDesc{}); // omitted momentum
  }
  if (c.scale != 0.f)
    ins.push_back(f32({}));
  KernelSpec spec = dtcSpec("SGD", ins, outs,
                            {{"momentum", ir::Attribute(c.mu)},
                             {"nesterov", ir::Attribute(int64_t{c.nesterov})},
                             {"weight_decay", ir::Attribute(c.wd)}});
  CpuContext ctx;
  auto k = createKernel(spec, ctx);
  ASSERT_TRUE(k.hasValue()) << k.status().message();

  Buf<float> p = randomBuf(kN, 1), buf(kN), pOut(kN), bufOut(kN);
  SgdRef ref{c.mu, c.wd, c.nesterov, toDouble(p), std::vector<double>(kN, 0.0)};
  Buf<float> lr(std::vector<float>{0.1f}), scale(std::vector<float>{c.scale});
  for (int s = 0; s < steps; ++s) {
    Buf<float> g = randomBuf(kN, 100 + s);
    lr[0] = 0.1f / static_cast<float>(s + 1); // a schedule: lr changes every step
    std::vector<const void *> in = {p.data(), g.data(), lr.data()};
    if (withMomentum)
      in.push_back(buf.data());
    else if (c.scale != 0.f)
      in.push_back(nullptr);
    if (c.scale != 0.f)
      in.push_back(scale.data());
    std::vector<void *> out = {c.inPlace ? p.data() : pOut.data()};
    if (withMomentum)
      out.push_back(c.inPlace ? buf.data() : bufOut.data());
    Status st = (*k)->run({in.data(), in.size(), out.data(), out.size()});
    ASSERT_TRUE(st.isOk()) << st.message();
    if (!c.inPlace) {
      p = pOut;
      buf = bufOut;
    }
    ref.step(g, lr[0], c.scale != 0.f ? c.scale : 1.0);
    expectClose(p, ref.p, 1e-5, s, "param");
    if (withMomentum) {
      expectClose(buf, ref.buf, 1e-5, s, "momentum");
    }
  }
}

TEST(OptimizerKernel, SgdPlainWithWeightDecay) {
  runSgd({0.f, 0.1f, false, 0.f, false}, 3);
  runSgd({0.f, 0.f, false, 0.f, true}, 3);
}

TEST(OptimizerKernel, SgdMomentumInPlaceOverSteps) {
  runSgd({0.9f, 0.f, false, 0.f, true}, 4);
  runSgd({0.9f, 0.01f, false, 0.f, false}, 4);
}

TEST(OptimizerKernel, SgdNesterovWeightDecayAndGradScale) {
  runSgd({0.9f, 0.05f, true, 0.5f, true}, 4);
  runSgd({0.5f, 0.05f, true, 2.f, false}, 3);
  runSgd({0.f, 0.05f, false, 0.25f, true}, 3); // scale without momentum (input 3 omitted)
}

TEST(OptimizerKernel, SgdFirstMomentumStepIsTheGradientItself) {
  // PyTorch's first step sets buf = d_p (a clone); a zero buffer times momentum plus d_p gives
  // the same bits.
  KernelSpec spec =
      dtcSpec("SGD", {f32({kN}), f32({kN}), f32({}), f32({kN})}, {f32({kN}), f32({kN})},
              {{"momentum", ir::Attribute(0.9f)},
               {"nesterov", ir::Attribute(int64_t{0})},
               {"weight_decay", ir::Attribute(0.f)}});
  Buf<float> p = randomBuf(kN, 3), g = randomBuf(kN, 4), buf(kN), lr(std::vector<float>{0.5f});
  Buf<float> p0 = p;
  test::runKernel(spec, {p.data(), g.data(), lr.data(), buf.data()}, {p.data(), buf.data()});
  for (int64_t i = 0; i < kN; ++i) {
    EXPECT_EQ(buf[i], g[i]) << i;
    EXPECT_EQ(p[i], p0[i] + -0.5f * g[i]) << i;
  }
}

// ---- Adam / AdamW ----------------------------------------------------------------------------

/// torch.optim.Adam / AdamW (1.13 _single_tensor_adam(w), amsgrad off), in double.
struct AdamRef {
  double b1, b2, eps, wd;
  bool decoupled;
  std::vector<double> p, m, v;
  void step(const Buf<float> &grad, double lr, double scale, int64_t t) {
    for (size_t i = 0; i < p.size(); ++i) {
      double g = grad[i] * scale;
      if (decoupled)
        p[i] *= 1 - lr * wd;
      else
        g += wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
      p[i] -= lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
    }
  }
};

void runAdam(const std::string &op, float wd, float scale, bool inPlace, int steps) {
  const float b1 = 0.8f, b2 = 0.95f, eps = 1e-6f;
  std::vector<TensorDesc> ins = {f32({kN}), f32({kN}), f32({}), i64({}), f32({kN}), f32({kN})};
  if (scale != 0.f)
    ins.push_back(f32({}));
  KernelSpec spec = dtcSpec(op, ins, {f32({kN}), f32({kN}), f32({kN})},
                            {{"beta1", ir::Attribute(b1)},
                             {"beta2", ir::Attribute(b2)},
                             {"epsilon", ir::Attribute(eps)},
                             {"weight_decay", ir::Attribute(wd)}});
  CpuContext ctx;
  auto k = createKernel(spec, ctx);
  ASSERT_TRUE(k.hasValue()) << k.status().message();
  Buf<float> p = randomBuf(kN, 7), m(kN), v(kN), pOut(kN), mOut(kN), vOut(kN);
  AdamRef ref{b1,
              b2,
              eps,
              wd,
              op == "AdamW",
              toDouble(p),
              std::vector<double>(kN, 0.0),
              std::vector<double>(kN, 0.0)};
  Buf<float> lr(std::vector<float>{0.01f}), sc(std::vector<float>{scale});
  Buf<int64_t> step(1);
  for (int s = 0; s < steps; ++s) {
    Buf<float> g = randomBuf(kN, 200 + s);
    step[0] = s;
    std::vector<const void *> in = {p.data(), g.data(), lr.data(), step.data(), m.data(), v.data()};
    if (scale != 0.f)
      in.push_back(sc.data());
    std::vector<void *> out = inPlace ? std::vector<void *>{p.data(), m.data(), v.data()}
                                      : std::vector<void *>{pOut.data(), mOut.data(), vOut.data()};
    Status st = (*k)->run({in.data(), in.size(), out.data(), out.size()});
    ASSERT_TRUE(st.isOk()) << st.message();
    if (!inPlace) {
      p = pOut;
      m = mOut;
      v = vOut;
    }
    ref.step(g, lr[0], scale != 0.f ? scale : 1.0, s + 1);
    expectClose(m, ref.m, 1e-5, s, "exp_avg");
    expectClose(v, ref.v, 1e-5, s, "exp_avg_sq");
    expectClose(p, ref.p, 2e-6, s, "param");
  }
}

TEST(OptimizerKernel, AdamBiasCorrectionOverSteps) {
  runAdam("Adam", 0.f, 0.f, false, 5);
  runAdam("Adam", 0.f, 0.f, true, 5);
}

TEST(OptimizerKernel, AdamL2WeightDecayAndGradScale) {
  runAdam("Adam", 0.1f, 0.f, true, 4);
  runAdam("Adam", 0.1f, 0.3f, false, 4);
}

TEST(OptimizerKernel, AdamWDecoupledWeightDecay) {
  runAdam("AdamW", 0.1f, 0.f, true, 4);
  runAdam("AdamW", 0.5f, 0.25f, false, 3);
}

TEST(OptimizerKernel, AdamFirstStepMovesEveryParameterByLr) {
  // Step 1: m^ = g and v^ = g^2 after bias correction, so p moves by lr * g / (|g| + eps).
  KernelSpec spec = dtcSpec("Adam", {f32({kN}), f32({kN}), f32({}), i64({}), f32({kN}), f32({kN})},
                            {f32({kN}), f32({kN}), f32({kN})},
                            {{"beta1", ir::Attribute(0.9f)},
                             {"beta2", ir::Attribute(0.999f)},
                             {"epsilon", ir::Attribute(1e-8f)},
                             {"weight_decay", ir::Attribute(0.f)}});
  Buf<float> p = randomBuf(kN, 9), g = randomBuf(kN, 10), m(kN), v(kN);
  Buf<float> lr(std::vector<float>{1e-3f});
  Buf<int64_t> step(std::vector<int64_t>{0});
  Buf<float> p0 = p;
  test::runKernel(spec, {p.data(), g.data(), lr.data(), step.data(), m.data(), v.data()},
                  {p.data(), m.data(), v.data()});
  for (int64_t i = 0; i < kN; ++i)
    EXPECT_NEAR(p[i] - p0[i], g[i] > 0 ? -1e-3 : 1e-3, 1e-6) << i;
}

TEST(OptimizerKernel, AdamWWithZeroGradientOnlyDecays) {
  KernelSpec spec = dtcSpec("AdamW", {f32({kN}), f32({kN}), f32({}), i64({}), f32({kN}), f32({kN})},
                            {f32({kN}), f32({kN}), f32({kN})},
                            {{"beta1", ir::Attribute(0.9f)},
                             {"beta2", ir::Attribute(0.999f)},
                             {"epsilon", ir::Attribute(1e-8f)},
                             {"weight_decay", ir::Attribute(0.1f)}});
  Buf<float> p = randomBuf(kN, 11), g(kN), m(kN), v(kN), lr(std::vector<float>{0.5f});
  Buf<int64_t> step(std::vector<int64_t>{3});
  Buf<float> p0 = p;
  test::runKernel(spec, {p.data(), g.data(), lr.data(), step.data(), m.data(), v.data()},
                  {p.data(), m.data(), v.data()});
  for (int64_t i = 0; i < kN; ++i)
    EXPECT_FLOAT_EQ(p[i], p0[i] * 0.95f) << i;
}

TEST(OptimizerKernel, LargeTensorsMatchOnEveryThread) {
  // Above the parallel grain: the split loop must give the same values as the reference.
  const int64_t n = (1 << 16) + 3;
  KernelSpec spec = dtcSpec("SGD", {f32({n}), f32({n}), f32({}), f32({n})}, {f32({n}), f32({n})},
                            {{"momentum", ir::Attribute(0.9f)},
                             {"nesterov", ir::Attribute(int64_t{1})},
                             {"weight_decay", ir::Attribute(0.01f)}});
  Buf<float> p = randomBuf(n, 12), g = randomBuf(n, 13), buf = randomBuf(n, 14);
  Buf<float> lr(std::vector<float>{0.1f});
  std::vector<float> wantP(n), wantB(n);
  for (int64_t i = 0; i < n; ++i) {
    const float d = g[i] * 1.f + 0.01f * p[i];
    wantB[i] = buf[i] * 0.9f + d;
    wantP[i] = p[i] + -0.1f * (d + 0.9f * wantB[i]);
  }
  test::runKernel(spec, {p.data(), g.data(), lr.data(), buf.data()}, {p.data(), buf.data()});
  test::expectNear(p.data(), wantP, 1e-6);
  test::expectNear(buf.data(), wantB, 1e-6);
}

// ---- clipping and accumulation helpers -------------------------------------------------------

TEST(OptimizerKernel, SumSquaresOverSeveralTensors) {
  const int64_t big = 3 * (1 << 15) + 7; // the parallel path
  Buf<float> a = randomBuf(big, 20), b = randomBuf(5, 21), out(1);
  b[0] = 3.f; // values > 1 too
  double want = 0.0;
  for (size_t i = 0; i < a.size(); ++i)
    want += static_cast<double>(a[i]) * a[i];
  for (size_t i = 0; i < b.size(); ++i)
    want += static_cast<double>(b[i]) * b[i];
  KernelSpec spec = dtcSpec("SumSquares", {f32({big}), f32({5})}, {f32({})}, {});
  test::runKernel(spec, {a.data(), b.data()}, {out.data()});
  EXPECT_NEAR(out[0], want, 1e-6 * want);

  KernelSpec one = dtcSpec("SumSquares", {f32({2, 2})}, {f32({})}, {});
  Buf<float> x(std::vector<float>{1.f, -2.f, 3.f, 0.5f});
  test::runKernel(one, {x.data()}, {out.data()});
  EXPECT_FLOAT_EQ(out[0], 14.25f);
}

float clipScale(std::vector<float> sums, float maxNorm, float inputScale = 1.f) {
  std::vector<TensorDesc> ins(sums.size(), f32({}));
  KernelSpec spec =
      dtcSpec("ClipGradNormScale", ins, {f32({})},
              {{"max_norm", ir::Attribute(maxNorm)}, {"input_scale", ir::Attribute(inputScale)}});
  std::vector<Buf<float>> bufs;
  for (float s : sums)
    bufs.emplace_back(std::vector<float>{s});
  std::vector<const void *> in;
  for (auto &b : bufs)
    in.push_back(b.data());
  Buf<float> out(1);
  test::runKernel(spec, in, {out.data()});
  return out[0];
}

TEST(OptimizerKernel, ClipGradNormScaleClipsOnlyAboveMaxNorm) {
  // total norm sqrt(9 + 7) = 4 > max_norm 1: coefficient 1 / (4 + 1e-6).
  EXPECT_FLOAT_EQ(clipScale({9.f, 7.f}, 1.f), static_cast<float>(1.0 / (4.0 + 1e-6)));
  // norm 0.5 < max_norm 1: max_norm / (norm + 1e-6) > 1 is clamped to 1 (no clipping).
  EXPECT_EQ(clipScale({0.25f}, 1.f), 1.f);
  // Gradients carrying a factor 1/4 (4 accumulated micro-batches): norm = 0.25 * sqrt(64) = 2,
  // coefficient 1.5 / (2 + 1e-6), times the 1/4 itself.
  EXPECT_FLOAT_EQ(clipScale({64.f}, 1.5f, 0.25f), static_cast<float>(0.25 * 1.5 / (2.0 + 1e-6)));
  EXPECT_EQ(clipScale({1.f}, 5.f, 0.25f), 0.25f); // not clipped: just the 1/4
  EXPECT_TRUE(std::isnan(clipScale({std::numeric_limits<float>::quiet_NaN()}, 1.f)));
  EXPECT_EQ(clipScale({std::numeric_limits<float>::infinity()}, 1.f), 0.f);
}

TEST(OptimizerKernel, ZeroGradientInPlace) {
  KernelSpec spec = dtcSpec("ZeroGradient", {f32({3, 5}), f32({4})}, {f32({3, 5})}, {});
  Buf<float> x = randomBuf(15, 30), after(4);
  test::runKernel(spec, {x.data(), after.data()}, {x.data()});
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(x[i], 0.f);
  EXPECT_EQ(inPlaceInput(spec), 0);
}

// ---- registry and spec errors ----------------------------------------------------------------

TEST(OptimizerKernel, EveryOptimizerOpHasADefinitionAndAKernel) {
  for (const char *op :
       {"SGD", "Adam", "AdamW", "SumSquares", "ClipGradNormScale", "ZeroGradient"}) {
    EXPECT_NE(lookupOp("ai.dtc", op), nullptr) << op;
    EXPECT_TRUE(hasKernel("ai.dtc", op)) << op;
  }
  KernelSpec sgd = dtcSpec("SGD", {f32({2}), f32({2}), f32({})}, {f32({2})}, {});
  EXPECT_EQ(inPlaceInput(sgd), 0);
}

TEST(OptimizerKernel, SpecErrorsNameTheNode) {
  auto err = [](const KernelSpec &s) { return checkKernel(s).message(); };
  EXPECT_EQ(err(dtcSpec("SGD", {f32({2, 3}), f32({3, 2}), f32({})}, {f32({2, 3})}, {})),
            "node 'n0' (ai.dtc.SGD): grad (input 1) has shape [3,2], the parameter [2,3]");
  EXPECT_EQ(err(dtcSpec("SGD", {f32({2}), f32({2}), f32({})}, {f32({2})},
                        {{"momentum", ir::Attribute(0.9f)}})),
            "node 'n0' (ai.dtc.SGD): expected 4 to 5 inputs, got 3");
  EXPECT_EQ(err(dtcSpec("SGD", {f32({2}), f32({2}), f32({2})}, {f32({2})}, {})),
            "node 'n0' (ai.dtc.SGD): lr (input 2) must hold one element, got [2]");
  EXPECT_EQ(err(dtcSpec("Adam", {f32({2}), f32({2}), f32({}), f32({}), f32({2}), f32({2})},
                        {f32({2}), f32({2}), f32({2})}, {})),
            "node 'n0' (ai.dtc.Adam): input 3 has dtype f32; the CPU kernel supports i64");
  EXPECT_EQ(err(dtcSpec("ClipGradNormScale", {f32({})}, {f32({})}, {})),
            "node 'n0' (ai.dtc.ClipGradNormScale): max_norm must be > 0");
}

} // namespace
} // namespace dtc::ops::cpu
