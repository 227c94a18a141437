// The CUDA elementwise kernels (ops/cuda/Elementwise.cu): the shared host/device math of
// ElementwiseUtil.cuh against the CPU kernels (runs without a GPU: the host path of the same
// functions), and every op's CUDA kernel against its CPU kernel (skipped without a GPU).
#include "tests/gpu/GpuTestUtil.h"

#include "ops/cuda/ElementwiseUtil.cuh"
#include "ops/kernel/Target.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace dtc::gputest {
namespace {

using ir::DType;
using ops::cuda::BinaryOp;
using ops::cuda::Broadcast;
using ops::cuda::GradAlg;
using ops::cuda::UnaryOp;

HostTensor hostTensor(const ops::TensorDesc &d, std::string bytes) { return {d, std::move(bytes)}; }

/// -8 .. 8 in 257 steps, and the values where the ops have kinks, ties or special results.
std::vector<float> testValues() {
  std::vector<float> v;
  for (int i = 0; i <= 256; ++i)
    v.push_back(-8.f + 16.f * static_cast<float>(i) / 256.f);
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {0.f, -0.f, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 3.f, -3.f, 1e-3f, -1e-3f, 30.f, -30.f,
                  100.f, -100.f, inf, -inf, std::numeric_limits<float>::quiet_NaN()})
    v.push_back(x);
  return v;
}

/// Expects `got` within atol + rtol |want| of `want` elementwise (NaN matches NaN; equal
/// infinities match).
void expectFloatsClose(const std::string &what, const std::vector<float> &got,
                       const std::vector<float> &want, const std::vector<float> &in,
                       double rtol = 2e-6, double atol = 1e-6) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size() && reported < 5; ++i) {
    const double a = got[i], b = want[i];
    bool ok = (std::isnan(a) && std::isnan(b)) || a == b ||
              std::fabs(a - b) <= atol + rtol * std::fabs(b);
    if (!ok) {
      ++reported;
      ADD_FAILURE() << what << " element " << i << " (input " << (i < in.size() ? in[i] : 0.f)
                    << "): host/device math " << a << ", CPU kernel " << b;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Host path of the shared math against the CPU kernels (no GPU needed).

struct UnaryCase {
  std::string op;
  std::map<std::string, ir::Attribute> attrs;
};

TEST(CudaElementwiseMath, UnaryF32MatchesCpuKernels) {
  const std::vector<UnaryCase> cases = {
      {"Relu", {}},
      {"Sigmoid", {}},
      {"Tanh", {}},
      {"Sqrt", {}},
      {"Exp", {}},
      {"Log", {}},
      {"Abs", {}},
      {"LeakyRelu", {}},
      {"LeakyRelu", {{"alpha", 0.f}}},
      {"LeakyRelu", {{"alpha", -0.3f}}},
      {"HardSwish", {}},
      {"Gelu", {}},
      {"Gelu", {{"approximate", "tanh"}}},
      {"Neg", {}},
      {"Reciprocal", {}},
      {"Erf", {}},
      {"HardSigmoid", {}},
      {"HardSigmoid", {{"alpha", 0.5f}, {"beta", 0.25f}}},
      {"Floor", {}},
      {"Ceil", {}},
      {"Round", {}},
      {"Sign", {}},
      {"Softplus", {}},
      {"Softsign", {}},
      {"Elu", {}},
      {"Elu", {{"alpha", 0.5f}}},
      {"Selu", {}},
      {"Celu", {{"alpha", 2.f}}},
      {"Mish", {}},
      {"Sin", {}},
      {"Cos", {}},
  };
  const std::vector<float> x = testValues();
  const int64_t n = static_cast<int64_t>(x.size());
  for (const UnaryCase &c : cases) {
    ops::KernelSpec spec = makeSpec(c.op, {{n}}, {{n}});
    spec.attrs = c.attrs;
    std::vector<HostTensor> out = runCpu(spec, {hostTensor(spec.inputs[0], bytesOf(x))});
    ASSERT_EQ(out.size(), 1u) << c.op;
    UnaryOp op;
    ASSERT_TRUE(ops::cuda::unaryOpOf(c.op, spec.attrString("approximate", "none"), op)) << c.op;
    float alpha, beta;
    ops::cuda::unaryAttrs(spec, op, alpha, beta);
    std::vector<float> mine;
    for (float v : x)
      mine.push_back(ops::cuda::unaryF32(op, v, alpha, beta));
    // oneDNN's vectorized exp/tanh/erf are a few ulp off the C library.
    expectFloatsClose(spec.where(), mine, valuesOf<float>(out[0]), x, 1e-5, 1e-6);
  }
}

TEST(CudaElementwiseMath, ClipF32AndI64MatchCpuKernels) {
  const std::vector<float> x = testValues();
  const int64_t n = static_cast<int64_t>(x.size());
  for (auto [lo, hi] : {std::pair<float, float>{-1.5f, 2.f}, {3.f, -3.f}}) {
    ops::KernelSpec spec = makeSpec("Clip", {{n}, {}, {}}, {{n}});
    std::vector<HostTensor> out =
        runCpu(spec, {hostTensor(spec.inputs[0], bytesOf(x)),
                      hostTensor(spec.inputs[1], bytesOf(std::vector<float>{lo})),
                      hostTensor(spec.inputs[2], bytesOf(std::vector<float>{hi}))});
    std::vector<float> mine;
    for (float v : x)
      mine.push_back(ops::cuda::unaryF32(UnaryOp::kClip, v, lo, hi));
    expectFloatsClose("Clip", mine, valuesOf<float>(out[0]), x, 0, 0);
  }
  const std::vector<int64_t> xi = {std::numeric_limits<int64_t>::min(), -7, -1, 0, 1, 9,
                                   std::numeric_limits<int64_t>::max()};
  const int64_t m = static_cast<int64_t>(xi.size());
  for (const char *name : {"Neg", "Abs", "Sign"}) {
    ops::KernelSpec spec = makeSpec(name, {{m}}, {{m}}, DType::kInt64);
    std::vector<HostTensor> out = runCpu(spec, {hostTensor(spec.inputs[0], bytesOf(xi))});
    UnaryOp op;
    ASSERT_TRUE(ops::cuda::unaryOpOf(name, "none", op));
    std::vector<int64_t> want = valuesOf<int64_t>(out[0]);
    for (size_t i = 0; i < xi.size(); ++i)
      EXPECT_EQ(ops::cuda::unaryI64(op, xi[i], 0, 0), want[i]) << name << " " << xi[i];
  }
  ops::KernelSpec spec = makeSpec("Clip", {{m}, {}, {}}, {{m}}, DType::kInt64);
  spec.inputs[1].dtype = DType::kUndefined; // no lower bound
  std::vector<HostTensor> out =
      runCpu(spec, {hostTensor(spec.inputs[0], bytesOf(xi)), hostTensor(spec.inputs[1], ""),
                    hostTensor(spec.inputs[2], bytesOf(std::vector<int64_t>{5}))});
  std::vector<int64_t> want = valuesOf<int64_t>(out[0]);
  for (size_t i = 0; i < xi.size(); ++i)
    EXPECT_EQ(ops::cuda::unaryI64(UnaryOp::kClip, xi[i], std::numeric_limits<int64_t>::min(), 5),
              want[i]);
}

TEST(CudaElementwiseMath, EltwiseGradMatchesCpuKernels) {
  const char *kAlgs[] = {
      "relu",           "relu_dst",    "logistic_dst", "tanh_dst", "exp_dst",  "sqrt_dst",
      "reciprocal_dst", "log",         "abs",          "erf",      "gelu_erf", "gelu_tanh",
      "hardswish",      "hardsigmoid", "soft_relu",    "softsign", "elu",      "selu",
      "celu",           "mish",        "sin",          "cos"};
  std::vector<float> t;
  for (int i = 0; i <= 200; ++i)
    t.push_back(-5.f + 10.f * static_cast<float>(i) / 200.f);
  for (float v : {-3.f, 3.f, 0.f, 1e-3f, -1e-3f})
    t.push_back(v);
  std::vector<float> dy;
  for (size_t i = 0; i < t.size(); ++i)
    dy.push_back(0.25f + 0.01f * static_cast<float>(i % 37) - (i % 2 ? 0.5f : 0.f));
  const int64_t n = static_cast<int64_t>(t.size());
  for (const char *alg : kAlgs) {
    ops::KernelSpec spec = makeSpec("EltwiseGrad", {{n}, {n}}, {{n}}, DType::kFloat32, "ai.dtc");
    spec.attrs["algorithm"] = alg;
    const std::string name = alg;
    // Parameters as the gradient rules set them (LeakyRelu's alpha, Elu's, HardSigmoid's
    // alpha/beta, Selu's alpha/gamma, Celu's alpha).
    float alpha = 0.f, beta = 0.f;
    if (name == "relu")
      alpha = -0.2f;
    else if (name == "relu_dst")
      alpha = 0.1f;
    else if (name == "hardsigmoid")
      alpha = 0.2f, beta = 0.5f;
    else if (name == "elu" || name == "celu")
      alpha = 1.5f;
    else if (name == "selu")
      alpha = 1.6732632f, beta = 1.050701f;
    spec.attrs["alpha"] = alpha;
    spec.attrs["beta"] = beta;
    std::vector<HostTensor> out = runCpu(
        spec, {hostTensor(spec.inputs[0], bytesOf(dy)), hostTensor(spec.inputs[1], bytesOf(t))});
    ASSERT_EQ(out.size(), 1u) << alg;
    GradAlg g;
    ASSERT_TRUE(ops::cuda::gradAlgOf(alg, g)) << alg;
    std::vector<float> mine;
    for (size_t i = 0; i < t.size(); ++i)
      mine.push_back(ops::cuda::eltwiseGradF32(g, dy[i], t[i], alpha, beta));
    expectFloatsClose(spec.where() + " " + alg, mine, valuesOf<float>(out[0]), t, 1e-5, 1e-6);
  }
}

/// Binary ops through the host Broadcast index against the CPU kernels' broadcast loops.
TEST(CudaElementwiseMath, BroadcastBinaryMatchesCpuKernels) {
  struct ShapeCase {
    std::vector<int64_t> a, b;
  };
  const std::vector<ShapeCase> shapes = {{{8, 128}, {128}},
                                         {{2, 3, 4}, {3, 1}},
                                         {{4, 1, 5}, {3, 1}},
                                         {{1}, {2, 7}},
                                         {{}, {3, 5}},
                                         {{6, 1, 4, 1}, {1, 5, 1, 3}},
                                         {{2, 16, 64}, {2, 16, 64}},
                                         {{2, 4, 16, 16}, {16, 16}},
                                         {{3, 1, 2, 1, 2}, {1, 4, 1, 3, 1}}};
  for (const ShapeCase &sc : shapes) {
    std::vector<int64_t> out;
    ASSERT_TRUE(ops::cuda::broadcastShape({sc.a, sc.b}, out));
    Broadcast<2> bc;
    ASSERT_TRUE(ops::cuda::makeBroadcast<2>(out, {sc.a, sc.b}, bc));
    for (const char *name : {"Add", "Sub", "Mul", "Div"}) {
      for (DType dt : {DType::kFloat32, DType::kInt64}) {
        ops::KernelSpec spec = makeSpec(name, {sc.a, sc.b}, {out}, dt);
        Fill nonzero = range(1, 9);
        std::vector<HostTensor> in = randomInputs(spec, 7, {range(-9, 9), nonzero});
        std::vector<HostTensor> cpu = runCpu(spec, in);
        ASSERT_EQ(cpu.size(), 1u);
        const BinaryOp op = std::string(name) == "Add"   ? BinaryOp::kAdd
                            : std::string(name) == "Sub" ? BinaryOp::kSub
                            : std::string(name) == "Mul" ? BinaryOp::kMul
                                                         : BinaryOp::kDiv;
        const int64_t n = spec.outputs[0].numElements();
        if (dt == DType::kFloat32) {
          std::vector<float> a = valuesOf<float>(in[0]), b = valuesOf<float>(in[1]), mine;
          for (int64_t o = 0; o < n; ++o)
            mine.push_back(ops::cuda::binaryF32(op, a[bc.index(0, o)], b[bc.index(1, o)]));
          expectFloatsClose(spec.where() + " " + ops::shapeStr(sc.a) + " " + ops::shapeStr(sc.b),
                            mine, valuesOf<float>(cpu[0]), {}, 0, 0);
        } else {
          std::vector<int64_t> a = valuesOf<int64_t>(in[0]), b = valuesOf<int64_t>(in[1]);
          std::vector<int64_t> want = valuesOf<int64_t>(cpu[0]);
          for (int64_t o = 0; o < n; ++o)
            ASSERT_EQ(ops::cuda::binaryI64(op, a[bc.index(0, o)], b[bc.index(1, o)]),
                      want[static_cast<size_t>(o)])
                << spec.where() << " element " << o;
        }
      }
    }
  }
  // i64 wrap-around and INT64_MIN / -1.
  const int64_t mn = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(ops::cuda::binaryI64(BinaryOp::kDiv, mn, -1), mn);
  EXPECT_EQ(ops::cuda::binaryI64(BinaryOp::kDiv, -7, 2), -3);
  EXPECT_EQ(ops::cuda::binaryI64(BinaryOp::kAdd, std::numeric_limits<int64_t>::max(), 1), mn);
  // Max/Min of the variadic ops: NaN wins.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(ops::cuda::binaryF32(BinaryOp::kMax, 1.f, nan)));
  EXPECT_TRUE(std::isnan(ops::cuda::binaryF32(BinaryOp::kMin, nan, 1.f)));
  EXPECT_EQ(ops::cuda::binaryF32(BinaryOp::kMax, -1.f, 2.f), 2.f);
}

TEST(CudaElementwiseMath, BroadcastCollapsesDims) {
  Broadcast<2> bc;
  ASSERT_TRUE(ops::cuda::makeBroadcast<2>({8, 4, 16}, {{8, 4, 16}, {16}}, bc));
  EXPECT_EQ(bc.rank, 2); // (32, 16): the bias broadcasts over the merged leading dims
  EXPECT_TRUE(bc.flat[0]);
  EXPECT_EQ(bc.index(1, 37), 37 % 16);
  ASSERT_TRUE(ops::cuda::makeBroadcast<2>({2, 3, 4}, {{2, 3, 4}, {2, 3, 4}}, bc));
  EXPECT_EQ(bc.rank, 1);
  // Ten dims where the second operand alternates between kept and broadcast: nothing merges.
  std::vector<int64_t> ten(10, 2), alternating(10, 1);
  for (size_t i = 0; i < 10; i += 2)
    alternating[i] = 2;
  EXPECT_FALSE(ops::cuda::makeBroadcast<2>(ten, {ten, alternating}, bc));
  EXPECT_FALSE(ops::cuda::broadcastShape({{2, 3}, {4, 3}}, ten));
}

TEST(CudaElementwiseMath, ModMatchesCpuKernel) {
  const std::vector<int64_t> xi = {7, -7, 7, -7, 0, 5, std::numeric_limits<int64_t>::min(), 9};
  const std::vector<int64_t> yi = {3, 3, -3, -3, 4, -1, -1, 9};
  const int64_t n = static_cast<int64_t>(xi.size());
  for (int64_t fmod : {0, 1}) {
    ops::KernelSpec spec = makeSpec("Mod", {{n}, {n}}, {{n}}, DType::kInt64);
    spec.attrs["fmod"] = fmod;
    std::vector<HostTensor> out = runCpu(
        spec, {hostTensor(spec.inputs[0], bytesOf(xi)), hostTensor(spec.inputs[1], bytesOf(yi))});
    std::vector<int64_t> want = valuesOf<int64_t>(out[0]);
    for (size_t i = 0; i < xi.size(); ++i)
      EXPECT_EQ(ops::cuda::modValue<int64_t>(xi[i], yi[i], fmod != 0), want[i])
          << xi[i] << " mod " << yi[i] << " fmod " << fmod;
    ops::KernelSpec spec32 = makeSpec("Mod", {{n}, {n}}, {{n}}, DType::kInt32);
    spec32.attrs["fmod"] = fmod;
    const std::vector<int32_t> x32 = {7, -7, 7, -7, 0, 5, std::numeric_limits<int32_t>::min(), 9};
    const std::vector<int32_t> y32(yi.begin(), yi.end());
    out = runCpu(spec32, {hostTensor(spec32.inputs[0], bytesOf(x32)),
                          hostTensor(spec32.inputs[1], bytesOf(y32))});
    std::vector<int32_t> want32 = valuesOf<int32_t>(out[0]);
    for (size_t i = 0; i < x32.size(); ++i)
      EXPECT_EQ(ops::cuda::modValue<int32_t>(x32[i], y32[i], fmod != 0), want32[i]) << i;
  }
  const std::vector<float> xf = {5.5f, -5.5f, 5.5f, 0.f, 1.f};
  const std::vector<float> yf = {2.f, 2.f, -2.f, 3.f, 0.f};
  ops::KernelSpec specf = makeSpec("Mod", {{5}, {5}}, {{5}});
  specf.attrs["fmod"] = int64_t{1};
  std::vector<HostTensor> out = runCpu(
      specf, {hostTensor(specf.inputs[0], bytesOf(xf)), hostTensor(specf.inputs[1], bytesOf(yf))});
  std::vector<float> mine;
  for (size_t i = 0; i < xf.size(); ++i)
    mine.push_back(ops::cuda::modValue<float>(xf[i], yf[i], true));
  expectFloatsClose("Mod f32", mine, valuesOf<float>(out[0]), xf, 0, 0);
}

TEST(CudaElementwiseMath, PReluMatchesCpuKernel) {
  for (const std::vector<int64_t> &slope :
       {std::vector<int64_t>{3, 1, 1}, std::vector<int64_t>{5}, std::vector<int64_t>{1}}) {
    ops::KernelSpec spec = makeSpec("PRelu", {{2, 3, 4, 5}, slope}, {{2, 3, 4, 5}});
    std::vector<HostTensor> in = randomInputs(spec, 4, {range(-2, 2), range(-0.5, 0.5)});
    std::vector<HostTensor> cpu = runCpu(spec, in);
    ASSERT_EQ(cpu.size(), 1u);
    Broadcast<2> bc;
    ASSERT_TRUE(ops::cuda::makeBroadcast<2>({2, 3, 4, 5}, {{2, 3, 4, 5}, slope}, bc));
    const std::vector<float> x = valuesOf<float>(in[0]), a = valuesOf<float>(in[1]);
    std::vector<float> mine;
    for (int64_t o = 0; o < 120; ++o)
      mine.push_back(ops::cuda::binaryF32(BinaryOp::kPRelu, x[bc.index(0, o)], a[bc.index(1, o)]));
    expectFloatsClose("PRelu " + ops::shapeStr(slope), mine, valuesOf<float>(cpu[0]), x, 0, 0);
  }
}

TEST(CudaElementwiseMath, PowIntExponentMatchesCpuKernel) {
  ops::KernelSpec spec = makeSpec("Pow", {{6}, {6}}, {{6}});
  spec.inputs[1].dtype = DType::kInt64;
  const std::vector<float> x = {-2.f, -2.f, 3.f, -0.f, 0.5f, -1.5f};
  const std::vector<int64_t> e = {3, 2, -2, 3, 4, 5};
  std::vector<HostTensor> out = runCpu(
      spec, {hostTensor(spec.inputs[0], bytesOf(x)), hostTensor(spec.inputs[1], bytesOf(e))});
  std::vector<float> want = valuesOf<float>(out[0]);
  for (size_t i = 0; i < x.size(); ++i) {
    const float got = ops::cuda::powIntExponent(x[i], e[i]);
    EXPECT_EQ(got, want[i]) << i;
    EXPECT_EQ(std::signbit(got), std::signbit(want[i])) << i;
  }
}

TEST(CudaElementwiseTarget, ChecksWithoutAGpu) {
  const ops::Target &t = ops::cudaTarget();
  ops::KernelSpec add = makeSpec("Add", {{8, 128}, {128}}, {{8, 128}});
  EXPECT_TRUE(t.checkKernel(add).isOk()) << t.checkKernel(add).message();
  EXPECT_EQ(t.inPlaceInput(add), 0);
  ops::KernelSpec addRev = makeSpec("Add", {{128}, {8, 128}}, {{8, 128}});
  EXPECT_EQ(t.inPlaceInput(addRev), 1);
  ops::KernelSpec sqrt64 = makeSpec("Sqrt", {{4}}, {{4}}, DType::kInt64);
  EXPECT_FALSE(t.checkKernel(sqrt64).isOk());
  ops::KernelSpec neg64 = makeSpec("Neg", {{4}}, {{4}}, DType::kInt64);
  EXPECT_TRUE(t.checkKernel(neg64).isOk()) << t.checkKernel(neg64).message();
  ops::KernelSpec grad = makeSpec("EltwiseGrad", {{4}, {4}}, {{4}}, DType::kFloat32, "ai.dtc");
  grad.attrs["algorithm"] = "relu_dst";
  EXPECT_TRUE(t.checkKernel(grad).isOk()) << t.checkKernel(grad).message();
  grad.attrs["algorithm"] = "nope";
  EXPECT_NE(t.checkKernel(grad).message().find("unknown algorithm"), std::string::npos);
  ops::KernelSpec eq = makeSpec("Equal", {{3}, {3}}, {{3}}, DType::kInt64);
  eq.outputs[0].dtype = DType::kBool;
  EXPECT_TRUE(t.checkKernel(eq).isOk()) << t.checkKernel(eq).message();
  EXPECT_EQ(t.inPlaceInput(eq), -1);
  ops::KernelSpec mean64 = makeSpec("Mean", {{3}, {3}}, {{3}}, DType::kFloat64);
  EXPECT_FALSE(t.checkKernel(mean64).isOk());
}

// ---------------------------------------------------------------------------------------------
// CUDA kernels against the CPU kernels (skipped without a GPU).

TEST(CudaElementwise, BinaryBroadcastShapes) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{8, 128}, {128}},          {{2, 16, 64}, {64}}, {{2, 4, 16, 16}, {4, 1, 1}},
      {{1}, {3, 1000}},           {{}, {257}},         {{5, 1, 7}, {1, 3, 1}},
      {{2, 16, 64}, {2, 16, 64}}, {{1, 1}, {1}},       {{0, 4}, {4}}};
  for (const auto &[a, b] : shapes) {
    std::vector<int64_t> out;
    ASSERT_TRUE(ops::cuda::broadcastShape({a, b}, out));
    for (const char *op : {"Add", "Sub", "Mul", "Div"}) {
      expectParity(makeSpec(op, {a, b}, {out}), {range(-2, 2), range(0.5, 2)});
      expectParity(makeSpec(op, {a, b}, {out}, DType::kInt64), {range(-50, 50), range(1, 9)});
    }
  }
}

TEST(CudaElementwise, PowScalarAndIntExponents) {
  expectParity(makeSpec("Pow", {{2, 16, 64}, {}}, {{2, 16, 64}}),
               {range(0.1, 3), given(bytesOf(std::vector<float>{2.f}))});
  expectParity(makeSpec("Pow", {{33, 7}, {7}}, {{33, 7}}), {range(0.1, 3), range(-2, 2)});
  ops::KernelSpec spec = makeSpec("Pow", {{100}, {100}}, {{100}});
  spec.inputs[1].dtype = DType::kInt64;
  expectParity(spec, {range(-3, 3), range(-3, 4)});
}

TEST(CudaElementwise, PRelu) {
  expectParity(makeSpec("PRelu", {{2, 16, 8, 8}, {16, 1, 1}}, {{2, 16, 8, 8}}));
  expectParity(makeSpec("PRelu", {{1001}, {1}}, {{1001}}));
}

TEST(CudaElementwise, Mod) {
  for (int64_t fmod : {0, 1})
    for (DType dt : {DType::kInt64, DType::kInt32}) {
      ops::KernelSpec spec = makeSpec("Mod", {{4, 300}, {300}}, {{4, 300}}, dt);
      spec.attrs["fmod"] = fmod;
      expectParity(spec, {range(-100, 100), range(1, 9)});
    }
  ops::KernelSpec spec = makeSpec("Mod", {{3, 1, 50}, {7, 1}}, {{3, 7, 50}});
  spec.attrs["fmod"] = int64_t{1};
  expectParity(spec, {range(-10, 10), range(0.5, 3)});
}

TEST(CudaElementwise, VariadicOps) {
  for (const char *op : {"Sum", "Mean", "Max", "Min"}) {
    expectParity(makeSpec(op, {{4, 5}, {5}, {4, 1}}, {{4, 5}}));
    expectParity(makeSpec(op, {{1000}}, {{1000}}));
  }
  for (const char *op : {"Max", "Min"}) {
    expectParity(makeSpec(op, {{3, 300}, {300}}, {{3, 300}}, DType::kInt64),
                 {range(-100, 100), range(-100, 100)});
    expectParity(makeSpec(op, {{3, 300}, {3, 1}}, {{3, 300}}, DType::kInt32),
                 {range(-100, 100), range(-100, 100)});
  }
}

TEST(CudaElementwise, Comparisons) {
  for (const char *op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}) {
    for (DType dt : {DType::kFloat32, DType::kInt64, DType::kInt32}) {
      ops::KernelSpec spec = makeSpec(op, {{4, 257}, {257}}, {{4, 257}}, dt);
      spec.outputs[0].dtype = DType::kBool;
      // Small integer ranges so that Equal sees ties.
      expectParity(spec, {range(-3, 3), range(-3, 3)});
    }
  }
  ops::KernelSpec eq = makeSpec("Equal", {{9, 1}, {1, 11}}, {{9, 11}}, DType::kBool);
  expectParity(eq);
}

TEST(CudaElementwise, LogicalAndNot) {
  for (const char *op : {"And", "Or", "Xor"})
    expectParity(makeSpec(op, {{6, 1, 5}, {3, 1}}, {{6, 3, 5}}, DType::kBool));
  expectParity(makeSpec("Not", {{1001}}, {{1001}}, DType::kBool));
}

TEST(CudaElementwise, IsNaNIsInf) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {0.f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1.f};
  for (const char *op : {"IsNaN", "IsInf"}) {
    ops::KernelSpec spec = makeSpec(op, {{5}}, {{5}});
    spec.outputs[0].dtype = DType::kBool;
    expectParity(spec, {given(bytesOf(x))});
    spec.attrs["detect_negative"] = int64_t{0};
    if (std::string(op) == "IsInf")
      expectParity(spec, {given(bytesOf(x))});
  }
}

TEST(CudaElementwise, UnaryOps) {
  const std::vector<UnaryCase> cases = {{"Relu", {}},
                                        {"Sigmoid", {}},
                                        {"Tanh", {}},
                                        {"Sqrt", {}},
                                        {"Exp", {}},
                                        {"Log", {}},
                                        {"Abs", {}},
                                        {"LeakyRelu", {}},
                                        {"HardSwish", {}},
                                        {"Gelu", {}},
                                        {"Gelu", {{"approximate", "tanh"}}},
                                        {"Neg", {}},
                                        {"Reciprocal", {}},
                                        {"Erf", {}},
                                        {"HardSigmoid", {}},
                                        {"Floor", {}},
                                        {"Ceil", {}},
                                        {"Round", {}},
                                        {"Sign", {}},
                                        {"Softplus", {}},
                                        {"Softsign", {}},
                                        {"Elu", {}},
                                        {"Selu", {}},
                                        {"Celu", {}},
                                        {"Mish", {}},
                                        {"Sin", {}},
                                        {"Cos", {}}};
  const std::vector<float> values = testValues();
  for (const UnaryCase &c : cases) {
    for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{2 * 16 * 64 + 3}}) {
      ops::KernelSpec spec = makeSpec(c.op, {{n}}, {{n}});
      spec.attrs = c.attrs;
      expectParity(spec, {range(-6, 6)}, 1e-5, 1e-6);
    }
    ops::KernelSpec special = makeSpec(c.op, {{static_cast<int64_t>(values.size())}},
                                       {{static_cast<int64_t>(values.size())}});
    special.attrs = c.attrs;
    expectParity(special, {given(bytesOf(values))}, 1e-5, 1e-6);
  }
  for (const char *op : {"Neg", "Abs", "Sign"})
    expectParity(makeSpec(op, {{300}}, {{300}}, DType::kInt64), {range(-1000, 1000)});
}

TEST(CudaElementwise, ClipWithAndWithoutBounds) {
  expectParity(makeSpec("Clip", {{500}, {}, {}}, {{500}}),
               {range(-3, 3), given(bytesOf(std::vector<float>{-1.f})),
                given(bytesOf(std::vector<float>{0.5f}))});
  ops::KernelSpec upper = makeSpec("Clip", {{500}, {}, {}}, {{500}});
  upper.inputs[1].dtype = DType::kUndefined;
  expectParity(upper, {range(-3, 3), Fill{}, given(bytesOf(std::vector<float>{1.f}))});
  ops::KernelSpec i64 = makeSpec("Clip", {{500}, {}, {}}, {{500}}, DType::kInt64);
  expectParity(i64, {range(-100, 100), given(bytesOf(std::vector<int64_t>{-5})),
                     given(bytesOf(std::vector<int64_t>{7}))});
}

TEST(CudaElementwise, EltwiseGradAlgorithms) {
  for (const char *alg :
       {"relu",           "relu_dst",    "logistic_dst", "tanh_dst", "exp_dst",  "sqrt_dst",
        "reciprocal_dst", "log",         "abs",          "erf",      "gelu_erf", "gelu_tanh",
        "hardswish",      "hardsigmoid", "soft_relu",    "softsign", "elu",      "selu",
        "celu",           "mish",        "sin",          "cos"}) {
    for (int64_t n : {int64_t{8 * 128}, int64_t{1001}}) {
      ops::KernelSpec spec = makeSpec("EltwiseGrad", {{n}, {n}}, {{n}}, DType::kFloat32, "ai.dtc");
      spec.attrs["algorithm"] = alg;
      spec.attrs["alpha"] = std::string(alg) == "hardsigmoid" ? 0.2f : 0.5f;
      spec.attrs["beta"] = std::string(alg) == "hardsigmoid" ? 0.5f : 1.05f;
      const bool positive = std::string(alg) == "sqrt_dst" || std::string(alg) == "log";
      expectParity(spec, {range(-1, 1), positive ? range(0.1, 4) : range(-4, 4)}, 1e-5, 1e-6);
    }
  }
}

TEST(CudaElementwise, ClipGrad) {
  ops::KernelSpec spec =
      makeSpec("ClipGrad", {{700}, {700}, {}, {}}, {{700}}, DType::kFloat32, "ai.dtc");
  expectParity(spec, {range(-1, 1), range(-2, 2), given(bytesOf(std::vector<float>{-1})),
                      given(bytesOf(std::vector<float>{1}))});
  spec.inputs[2].dtype = DType::kUndefined;
  expectParity(spec,
               {range(-1, 1), range(-2, 2), Fill{}, given(bytesOf(std::vector<float>{0.5f}))});
}

} // namespace
} // namespace dtc::gputest
