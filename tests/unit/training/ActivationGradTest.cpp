// Gradient rules of the elementwise and activation families (ops/elementwise, ops/activation),
// checked by finite differences, and their documented conventions at kinks and singular points.
// The ActivationGrad kernels are tested in ActivationGradKernelTest.cpp.
#include "tests/unit/training/GradCheck.h"

#include "compiler/plan/Lowering.h"
#include "ops/Gradient.h"
#include "ops/OpDef.h"
#include "passes/Autodiff.h"
#include "runtime/Executor.h"
#include "tests/unit/cpu/KernelTestUtil.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

namespace dtc {
namespace {

using ir::Attribute;
using test::awayFromZero;
using test::GradCheckOptions;
using test::GradInput;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr double kPi = 3.14159265358979323846;

GradInput positive(std::string name, std::vector<int64_t> shape) {
  return GradInput::f32(std::move(name), std::move(shape)).range(0.5f, 2.f);
}

GradInput scalarConst(std::string name, float v) {
  return GradInput::f32(std::move(name), {}, {v}).asConstant();
}

// ---------------------------------------------------------------------------------------------
// A small graph runner for the convention tests: exact analytic gradients for chosen inputs.

struct Feed {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

/// Adds node `op` on `ins`, infers it and returns its output 0.
ir::Value *addNode(ir::Graph &g, const std::string &op, const std::vector<ir::Value *> &ins,
                   const std::map<std::string, Attribute> &attrs = {}, size_t numOutputs = 1,
                   const std::string &domain = "") {
  static int counter = 0;
  std::vector<std::string> outs;
  for (size_t i = 0; i < numOutputs; ++i)
    outs.push_back(g.uniqueName(op + std::to_string(++counter)));
  ir::Node *n = g.addNode(op, ins, outs, domain, outs[0]);
  for (const auto &[k, a] : attrs)
    n->setAttr(k, a);
  Diagnostics diags;
  Status s = ops::inferNode(*n, diags);
  EXPECT_TRUE(s.isOk()) << s.message();
  return n->output(0);
}

using Builder = std::function<ir::Value *(ir::Graph &, const std::vector<ir::Value *> &)>;

/// d sum(y * seed) / d feed for every feed (seed = ones when empty), run on the CPU kernels.
/// `backwardOps` receives the op types of the backward nodes when not null.
std::vector<std::vector<float>> gradientsOf(const std::vector<Feed> &feeds, const Builder &build,
                                            std::vector<float> seed = {},
                                            std::vector<std::string> *backwardOps = nullptr) {
  ir::Graph g;
  g.setOpset("", 21);
  Diagnostics diags;
  std::vector<ir::Value *> ins;
  for (const Feed &f : feeds) {
    ir::Value *v =
        g.createValue(f.name, ir::TensorType{ir::DType::kFloat32, ir::Shape::ofStatic(f.shape)});
    g.addInput(v);
    ins.push_back(v);
  }
  ir::Value *y = build(g, ins);
  std::vector<int64_t> shape = y->shape().staticSizes();
  if (seed.empty())
    seed.assign(static_cast<size_t>(ops::cpu::test::count(shape)), 1.f);
  ir::Value *r = g.addConstant("seed", ir::TensorData::fromFloats("seed", shape, seed));
  ir::Value *m = addNode(g, "Mul", {y, r});
  ir::Value *loss = addNode(g, "ReduceSum", {m}, {{"keepdims", Attribute(int64_t{0})}});
  g.addOutput(loss);
  const size_t forwardNodes = g.nodes().size();
  auto grads = passes::buildGradients(g, loss, ins, diags);
  EXPECT_TRUE(grads.hasValue()) << grads.status().message();
  if (!grads)
    return {};
  if (backwardOps)
    for (size_t i = forwardNodes; i < g.nodes().size(); ++i)
      backwardOps->push_back(g.nodes()[i]->opType());
  for (ir::Value *gv : *grads) {
    EXPECT_NE(gv, nullptr);
    if (!gv)
      return {};
    g.addOutput(gv);
  }
  auto planOr = plan::lowerInference(g, plan::LowerOptions{});
  EXPECT_TRUE(planOr.hasValue()) << planOr.status().message();
  if (!planOr)
    return {};
  auto exOr = rt::Executor::create(std::move(*planOr), rt::ExecutorOptions{});
  EXPECT_TRUE(exOr.hasValue()) << exOr.status().message();
  if (!exOr)
    return {};
  rt::Executor &ex = **exOr;
  for (const Feed &f : feeds) {
    rt::HostArray a;
    a.name = f.name;
    a.dtype = ir::DType::kFloat32;
    a.shape = f.shape;
    a.bytes.assign(reinterpret_cast<const char *>(f.values.data()), f.values.size() * 4);
    Status s = ex.setInput(a);
    EXPECT_TRUE(s.isOk()) << s.message();
  }
  Status s = ex.run();
  EXPECT_TRUE(s.isOk()) << s.message();
  auto outs = ex.outputs();
  EXPECT_TRUE(outs.hasValue()) << outs.status().message();
  if (!s.isOk() || !outs)
    return {};
  std::vector<std::vector<float>> result;
  for (ir::Value *gv : *grads)
    for (const rt::HostArray &a : *outs)
      if (a.name == gv->name()) {
        std::vector<float> v(a.bytes.size() / 4);
        std::memcpy(v.data(), a.bytes.data(), a.bytes.size());
        result.push_back(v);
        break;
      }
  EXPECT_EQ(result.size(), grads->size());
  return result;
}

/// The gradient of sum(op(x) * seed) with respect to x for a one-input op.
std::vector<float> unaryGrad(const std::string &op, const std::vector<float> &x,
                             const std::map<std::string, Attribute> &attrs = {},
                             std::vector<float> seed = {}) {
  auto g = gradientsOf(
      {{"x", {static_cast<int64_t>(x.size())}, x}},
      [&](ir::Graph &gr, const std::vector<ir::Value *> &in) {
        return addNode(gr, op, {in[0]}, attrs);
      },
      std::move(seed));
  return g.empty() ? std::vector<float>{} : g[0];
}

// ---------------------------------------------------------------------------------------------
// Binary elementwise ops.

TEST(ActivationGrad, AddSubWithBroadcasting) {
  for (const char *op : {"Add", "Sub"}) {
    EXPECT_EQ(
        test::gradCheck(op, {GradInput::f32("a", {2, 3, 4}), GradInput::f32("b", {3, 1})}, {}), "")
        << op;
    EXPECT_EQ(test::gradCheck(op, {GradInput::f32("a", {4}), GradInput::f32("b", {2, 3, 4})}, {}),
              "")
        << op;
    EXPECT_EQ(test::gradCheck(op, {GradInput::f32("a", {1}), GradInput::f32("b", {5})}, {}), "")
        << op;
    EXPECT_EQ(test::gradCheck(op, {GradInput::f32("a", {}), GradInput::f32("b", {3, 1, 5})}, {}),
              "")
        << op;
    EXPECT_EQ(test::gradCheck(op, {GradInput::f32("a", {7}), GradInput::f32("b", {7}).fixed()}, {}),
              "")
        << op;
  }
}

TEST(ActivationGrad, SubSignsAreExact) {
  auto g = gradientsOf({{"a", {2}, {1.f, 2.f}}, {"b", {2}, {3.f, 4.f}}},
                       [](ir::Graph &gr, const std::vector<ir::Value *> &in) {
                         return addNode(gr, "Sub", {in[0], in[1]});
                       },
                       {2.f, -3.f});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0], (std::vector<float>{2.f, -3.f}));
  EXPECT_EQ(g[1], (std::vector<float>{-2.f, 3.f}));
}

TEST(ActivationGrad, DivWithBroadcasting) {
  EXPECT_EQ(test::gradCheck("Div", {GradInput::f32("a", {2, 3, 4}), positive("b", {3, 1})}, {}),
            "");
  EXPECT_EQ(test::gradCheck("Div", {GradInput::f32("a", {5}), positive("b", {2, 1, 5})}, {}), "");
  EXPECT_EQ(
      test::gradCheck(
          "Div", {GradInput::f32("a", {3, 3}), GradInput::f32("b", {3}).range(-2.f, -0.5f)}, {}),
      "");
  EXPECT_EQ(test::gradCheck("Div", {GradInput::f32("a", {1}), positive("b", {}).fixed()}, {}), "");
}

TEST(ActivationGrad, DivValues) {
  // C = A / B at A = 3, B = 2: dA = 1/2, dB = -A / B^2 = -0.75.
  auto g = gradientsOf({{"a", {1}, {3.f}}, {"b", {1}, {2.f}}},
                       [](ir::Graph &gr, const std::vector<ir::Value *> &in) {
                         return addNode(gr, "Div", {in[0], in[1]});
                       });
  ASSERT_EQ(g.size(), 2u);
  EXPECT_FLOAT_EQ(g[0][0], 0.5f);
  EXPECT_FLOAT_EQ(g[1][0], -0.75f);
}

TEST(ActivationGrad, PowBaseAndExponent) {
  // Both differentiable, with broadcasting each way.
  EXPECT_EQ(test::gradCheck("Pow", {positive("x", {2, 3}), GradInput::f32("y", {3})}, {}), "");
  EXPECT_EQ(
      test::gradCheck("Pow", {positive("x", {3}), GradInput::f32("y", {2, 3}).range(-2, 2)}, {}),
      "");
  EXPECT_EQ(test::gradCheck("Pow", {positive("x", {1}), GradInput::f32("y", {})}, {}), "");
  // A fixed exponent tensor (general path), constant scalars (folded paths), i64 exponents.
  EXPECT_EQ(
      test::gradCheck("Pow", {positive("x", {2, 3}), GradInput::f32("y", {2, 3}).fixed()}, {}), "");
  for (float c : {0.f, 1.f, 2.f, 3.f, 0.5f, -1.5f})
    EXPECT_EQ(test::gradCheck("Pow", {positive("x", {5}), scalarConst("y", c)}, {}), "") << c;
  EXPECT_EQ(test::gradCheck("Pow", {GradInput::f32("x", {4}), GradInput::i64("y", {}, {3})}, {}),
            "");
  EXPECT_EQ(test::gradCheck(
                "Pow",
                {GradInput::f32("x", {2, 2}), GradInput::i64("y", {2, 2}, {2, 3, 0, -1}).asInput()},
                {}),
            "");
}

TEST(ActivationGrad, PowConventionsAtZero) {
  // dX = 0 where Y == 0 (even at X == 0); dY = 0 where X == 0 and Y >= 0; dY = NaN for X < 0.
  auto g = gradientsOf({{"x", {4}, {0.f, 0.f, 2.f, -2.f}}, {"y", {4}, {0.f, 2.f, 3.f, 0.5f}}},
                       [](ir::Graph &gr, const std::vector<ir::Value *> &in) {
                         return addNode(gr, "Pow", {in[0], in[1]});
                       });
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0][0], 0.f);
  EXPECT_EQ(g[0][1], 0.f); // 2 * 0^1
  EXPECT_FLOAT_EQ(g[0][2], 12.f);
  EXPECT_EQ(g[1][0], 0.f);
  EXPECT_EQ(g[1][1], 0.f);
  EXPECT_FLOAT_EQ(g[1][2], 8.f * std::log(2.f));
  EXPECT_TRUE(std::isnan(g[1][3]));
}

TEST(ActivationGrad, WhereWithBroadcasting) {
  EXPECT_EQ(test::gradCheck("Where",
                            {GradInput::boolean("c", {2, 3}, {1, 0, 1, 1, 0, 0}),
                             GradInput::f32("x", {2, 3}), GradInput::f32("y", {3})},
                            {}),
            "");
  EXPECT_EQ(test::gradCheck("Where",
                            {GradInput::boolean("c", {3, 1}, {1, 0, 1}), GradInput::f32("x", {}),
                             GradInput::f32("y", {3, 4})},
                            {}),
            "");
}

TEST(ActivationGrad, WhereUnselectedBranchGetsExactlyZero) {
  // The unselected branch holds inf and NaN; its gradient is still exactly 0.
  auto g = gradientsOf(
      {{"x", {4}, {1.f, kInf, 3.f, std::nanf("")}}, {"y", {4}, {kInf, 2.f, std::nanf(""), 4.f}}},
      [](ir::Graph &gr, const std::vector<ir::Value *> &in) {
        std::string bytes = {1, 0, 1, 0};
        ir::Value *c =
            gr.addConstant("c", ir::TensorData::fromBytes("c", ir::DType::kBool, {4}, bytes));
        return addNode(gr, "Where", {c, in[0], in[1]});
      },
      {5.f, 6.f, 7.f, 8.f});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0], (std::vector<float>{5.f, 0.f, 7.f, 0.f}));
  EXPECT_EQ(g[1], (std::vector<float>{0.f, 6.f, 0.f, 8.f}));
}

// ---------------------------------------------------------------------------------------------
// Variadic Max, Min, Sum, Mean and CastLike.

TEST(ActivationGrad, MaxMinSumMeanWithBroadcasting) {
  // Inputs far apart (no near-ties within the finite-difference step).
  for (const char *op : {"Max", "Min", "Sum", "Mean"}) {
    SCOPED_TRACE(op);
    EXPECT_EQ(test::gradCheck(op,
                              {GradInput::f32("a", {2, 3}, {0.9f, -0.7f, 0.2f, -0.4f, 0.6f, -0.1f}),
                               GradInput::f32("b", {3}, {0.5f, 0.3f, -0.8f})},
                              {}),
              "");
    EXPECT_EQ(test::gradCheck(op,
                              {GradInput::f32("a", {3, 1}, {0.1f, -0.9f, 0.75f}),
                               GradInput::f32("b", {1, 4}, {-0.5f, 0.35f, 0.95f, -0.2f}),
                               GradInput::f32("c", {}, {0.55f})},
                              {}),
              "");
    EXPECT_EQ(test::gradCheck(op, {GradInput::f32("a", {2, 2})}, {}), ""); // one input
  }
}

TEST(ActivationGrad, MaxMinTiesSplitTheGradientEvenly) {
  // Max(a, b, c): element 0 ties all three (1/3 each), element 1 ties a and c (1/2 each),
  // element 2 is b's alone. Min likewise; a NaN output (element 3) sends 0 to every input.
  const float nan = std::nanf("");
  auto g = gradientsOf({{"a", {4}, {1.f, 2.f, 0.f, nan}},
                        {"b", {4}, {1.f, 1.f, 5.f, 1.f}},
                        {"c", {4}, {1.f, 2.f, -1.f, 1.f}}},
                       [](ir::Graph &gr, const std::vector<ir::Value *> &in) {
                         return addNode(gr, "Max", {in[0], in[1], in[2]});
                       },
                       {3.f, 4.f, 5.f, 6.f});
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0], (std::vector<float>{1.f, 2.f, 0.f, 0.f}));
  EXPECT_EQ(g[1], (std::vector<float>{1.f, 0.f, 5.f, 0.f}));
  EXPECT_EQ(g[2], (std::vector<float>{1.f, 2.f, 0.f, 0.f}));
  g = gradientsOf({{"a", {3}, {1.f, 2.f, 0.f}}, {"b", {3}, {1.f, 3.f, 2.f}}},
                  [](ir::Graph &gr, const std::vector<ir::Value *> &in) {
                    return addNode(gr, "Min", {in[0], in[1]});
                  },
                  {2.f, 4.f, 6.f});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0], (std::vector<float>{1.f, 4.f, 6.f}));
  EXPECT_EQ(g[1], (std::vector<float>{1.f, 0.f, 0.f}));
}

TEST(ActivationGrad, ModWithBroadcasting) {
  // fmod = 1 (float); operands away from the jumps of the remainder.
  EXPECT_EQ(test::gradCheck("Mod",
                            {GradInput::f32("a", {2, 3}, {2.3f, -2.3f, 5.1f, -0.7f, 3.4f, 1.1f}),
                             GradInput::f32("b", {3}, {1.5f, 2.f, -1.2f})},
                            {{"fmod", Attribute(int64_t{1})}}),
            "");
}

TEST(ActivationGrad, MeanDividesByTheInputCount) {
  auto g = gradientsOf(
      {{"a", {2}, {1.f, 2.f}}, {"b", {2}, {3.f, 4.f}}, {"c", {1}, {0.f}}, {"d", {2}, {0.f, 0.f}}},
      [](ir::Graph &gr, const std::vector<ir::Value *> &in) {
        return addNode(gr, "Mean", {in[0], in[1], in[2], in[3]});
      },
      {4.f, 8.f});
  ASSERT_EQ(g.size(), 4u);
  EXPECT_EQ(g[0], (std::vector<float>{1.f, 2.f}));
  EXPECT_EQ(g[2], (std::vector<float>{3.f})); // broadcast input: summed
}

TEST(ActivationGrad, CastLikeCastsBackAndGivesTheTargetZero) {
  // y = CastLike(CastLike(x, f64 constant), t) with t an f32 input: dx = dy through two casts,
  // dt = 0 (only its dtype is used).
  auto g =
      gradientsOf({{"x", {2}, {1.5f, -2.5f}}, {"t", {3}, {7.f, 8.f, 9.f}}},
                  [](ir::Graph &gr, const std::vector<ir::Value *> &in) {
                    std::string bytes(8, '\0');
                    ir::Value *like = gr.addConstant(
                        "like", ir::TensorData::fromBytes("like", ir::DType::kFloat64, {}, bytes));
                    ir::Value *d = addNode(gr, "CastLike", {in[0], like});
                    ir::Value *back = addNode(gr, "CastLike", {d, in[1]});
                    // t also reaches the loss through CastLike only.
                    return back;
                  },
                  {3.f, 4.f});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0], (std::vector<float>{3.f, 4.f}));
  EXPECT_EQ(g[1], (std::vector<float>{0.f, 0.f, 0.f}));
  EXPECT_EQ(test::gradCheck("CastLike",
                            {GradInput::f32("x", {2, 3}), GradInput::f32("t", {4}).fixed()}, {}),
            "");
}

// ---------------------------------------------------------------------------------------------
// Unary math.

TEST(ActivationGrad, SqrtExpLogReciprocalErfNeg) {
  for (std::vector<int64_t> shape : {std::vector<int64_t>{2, 3, 5}, {1}, {7}, {}}) {
    EXPECT_EQ(test::gradCheck("Sqrt", {positive("x", shape)}, {}), "");
    EXPECT_EQ(test::gradCheck("Exp", {GradInput::f32("x", shape)}, {}), "");
    EXPECT_EQ(test::gradCheck("Log", {positive("x", shape)}, {}), "");
    EXPECT_EQ(test::gradCheck("Reciprocal", {positive("x", shape)}, {}), "");
    EXPECT_EQ(test::gradCheck("Reciprocal", {GradInput::f32("x", shape).range(-2.f, -0.5f)}, {}),
              "");
    EXPECT_EQ(test::gradCheck("Erf", {GradInput::f32("x", shape).range(-2.f, 2.f)}, {}), "");
    EXPECT_EQ(test::gradCheck("Neg", {GradInput::f32("x", shape)}, {}), "");
  }
}

TEST(ActivationGrad, UnaryMathValues) {
  std::vector<float> g = unaryGrad("Exp", {0.f, 1.f});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_FLOAT_EQ(g[0], 1.f);
  EXPECT_NEAR(g[1], std::exp(1.f), 1e-5);
  g = unaryGrad("Log", {0.5f, 4.f});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_FLOAT_EQ(g[0], 2.f);
  EXPECT_FLOAT_EQ(g[1], 0.25f);
  g = unaryGrad("Reciprocal", {2.f, -0.5f});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_FLOAT_EQ(g[0], -0.25f);
  EXPECT_FLOAT_EQ(g[1], -4.f);
  g = unaryGrad("Erf", {0.f, 1.f});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_NEAR(g[0], 2.f / std::sqrt(static_cast<float>(kPi)), 1e-6);
  EXPECT_NEAR(g[1], 2.f / std::sqrt(static_cast<float>(kPi)) * std::exp(-1.f), 1e-6);
  g = unaryGrad("Neg", {3.f}, {}, {2.f});
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0], -2.f);
}

TEST(ActivationGrad, SqrtAtZeroIsInfinity) {
  // dX = dY / (2 sqrt(X)): +inf at 0 for dY > 0 and -inf for dY < 0, as PyTorch.
  std::vector<float> g = unaryGrad("Sqrt", {0.f, 4.f, 0.f}, {}, {1.f, 1.f, -1.f});
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0], kInf);
  EXPECT_FLOAT_EQ(g[1], 0.25f);
  EXPECT_EQ(g[2], -kInf);
}

TEST(ActivationGrad, AbsAwayFromZeroAndAtZero) {
  EXPECT_EQ(test::gradCheck("Abs", {GradInput::f32("x", {4, 6}, awayFromZero(24))}, {}), "");
  std::vector<float> g = unaryGrad("Abs", {-2.f, 0.f, 3.f, -0.f}, {}, {5.f, 5.f, 5.f, 5.f});
  EXPECT_EQ(g, (std::vector<float>{-5.f, 0.f, 5.f, 0.f}));
}

// ---------------------------------------------------------------------------------------------
// Activations.

TEST(ActivationGrad, ReluAndLeakyRelu) {
  for (std::vector<int64_t> shape : {std::vector<int64_t>{3, 7}, {1}, {5}}) {
    const size_t n = static_cast<size_t>(ops::cpu::test::count(shape));
    EXPECT_EQ(test::gradCheck("Relu", {GradInput::f32("x", shape, awayFromZero(n))}, {}), "");
    for (float alpha : {0.01f, 0.3f, -0.2f, 1.5f})
      EXPECT_EQ(test::gradCheck("LeakyRelu", {GradInput::f32("x", shape, awayFromZero(n, 3))},
                                {{"alpha", Attribute(alpha)}}),
                "")
          << alpha;
  }
}

TEST(ActivationGrad, ReluAtZeroIsZero) {
  std::vector<float> g = unaryGrad("Relu", {-1.f, 0.f, 2.f, -0.f}, {}, {3.f, 3.f, 3.f, 3.f});
  EXPECT_EQ(g, (std::vector<float>{0.f, 0.f, 3.f, 0.f}));
  // LeakyRelu: alpha * dY at 0 (PyTorch: x > 0 ? dY : alpha dY), both signs of alpha.
  g = unaryGrad("LeakyRelu", {-1.f, 0.f, 2.f}, {{"alpha", Attribute(0.25f)}}, {4.f, 4.f, 4.f});
  EXPECT_EQ(g, (std::vector<float>{1.f, 1.f, 4.f}));
  g = unaryGrad("LeakyRelu", {-1.f, 0.f, 2.f}, {{"alpha", Attribute(-0.5f)}}, {4.f, 4.f, 4.f});
  EXPECT_EQ(g, (std::vector<float>{-2.f, -2.f, 4.f}));
}

TEST(ActivationGrad, SigmoidTanhGelu) {
  for (std::vector<int64_t> shape : {std::vector<int64_t>{4, 5}, {1}, {3, 1, 3}}) {
    EXPECT_EQ(test::gradCheck("Sigmoid", {GradInput::f32("x", shape).range(-3, 3)}, {}), "");
    EXPECT_EQ(test::gradCheck("Tanh", {GradInput::f32("x", shape).range(-2, 2)}, {}), "");
    EXPECT_EQ(test::gradCheck("Gelu", {GradInput::f32("x", shape).range(-3, 3)}, {}), "");
    EXPECT_EQ(test::gradCheck("Gelu", {GradInput::f32("x", shape).range(-3, 3)},
                              {{"approximate", Attribute("tanh")}}),
              "");
  }
}

TEST(ActivationGrad, SigmoidTanhGeluValues) {
  std::vector<float> g = unaryGrad("Sigmoid", {0.f});
  ASSERT_EQ(g.size(), 1u);
  EXPECT_NEAR(g[0], 0.25f, 1e-6);
  g = unaryGrad("Tanh", {0.f, 1.f});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_NEAR(g[0], 1.f, 1e-6);
  EXPECT_NEAR(g[1], 1.f - std::tanh(1.f) * std::tanh(1.f), 1e-5);
  // Gelu'(x) = Phi(x) + x phi(x); tanh form at 1 from PyTorch's formula.
  g = unaryGrad("Gelu", {0.f, 1.f});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_NEAR(g[0], 0.5f, 1e-6);
  const double phi1 = std::exp(-0.5) / std::sqrt(2 * kPi);
  EXPECT_NEAR(g[1], 0.5 * (1 + std::erf(1 / std::sqrt(2.0))) + phi1, 1e-5);
  g = unaryGrad("Gelu", {1.f}, {{"approximate", Attribute("tanh")}});
  ASSERT_EQ(g.size(), 1u);
  const double k = std::sqrt(2 / kPi), inner = k * (1 + 0.044715), t = std::tanh(inner);
  EXPECT_NEAR(g[0], 0.5 * (1 + t) + 0.5 * (1 - t * t) * k * (1 + 3 * 0.044715), 1e-5);
}

TEST(ActivationGrad, HardSigmoidAndHardSwish) {
  // Away from the kinks (HardSigmoid at (0 or 1 - beta) / alpha, HardSwish at +-3).
  std::vector<float> hs = {-4.f, -2.9f, -1.f, 0.3f, 2.9f, 4.f, -0.7f, 1.2f};
  EXPECT_EQ(test::gradCheck("HardSwish", {GradInput::f32("x", {8}, hs)}, {}), "");
  EXPECT_EQ(test::gradCheck("HardSigmoid", {GradInput::f32("x", {2, 4}, hs)}, {}), "");
  EXPECT_EQ(test::gradCheck("HardSigmoid", {GradInput::f32("x", {8}, hs)},
                            {{"alpha", Attribute(0.5f)}, {"beta", Attribute(0.6f)}}),
            "");
  // Kinks: HardSwish gives 0 below -3 and (x/3 + 1/2) dY on [-3, 3] inclusive; HardSigmoid gives 0
  // at both kinks (PyTorch).
  std::vector<float> g = unaryGrad("HardSwish", {-3.5f, -3.f, 3.f, 3.5f, 0.f});
  EXPECT_EQ(g, (std::vector<float>{0.f, -0.5f, 1.5f, 1.f, 0.5f}));
  g = unaryGrad("HardSigmoid", {-2.5f, 2.5f, 0.f, -3.f});
  EXPECT_EQ(g, (std::vector<float>{0.f, 0.f, 0.2f, 0.f}));
}

TEST(ActivationGrad, Clip) {
  std::vector<float> x = {-0.9f, -0.6f, -0.3f, 0.f, 0.2f, 0.45f, 0.7f, 1.3f, -0.1f};
  EXPECT_EQ(test::gradCheck("Clip",
                            {GradInput::f32("x", {3, 3}, x), scalarConst("min", -0.5f),
                             scalarConst("max", 0.6f)},
                            {}),
            "");
  EXPECT_EQ(test::gradCheck("Clip", {GradInput::f32("x", {9}, x), scalarConst("min", -0.5f)}, {}),
            "");
  EXPECT_EQ(test::gradCheck(
                "Clip",
                {GradInput::f32("x", {9}, x), GradInput::omitted(), scalarConst("max", 0.1f)}, {}),
            "");
  EXPECT_EQ(test::gradCheck("Clip", {GradInput::f32("x", {9}, x)}, {}), "");
}

TEST(ActivationGrad, ClipBoundsAreInclusive) {
  // Gradient flows where min <= x <= max (PyTorch's clamp backward), bounds included.
  auto g = gradientsOf({{"x", {6}, {-1.f, 1.f, -1.5f, 1.5f, 0.f, std::nanf("")}}},
                       [](ir::Graph &gr, const std::vector<ir::Value *> &in) {
                         ir::Value *lo =
                             gr.addConstant("lo", ir::TensorData::fromFloats("lo", {}, {-1.f}));
                         ir::Value *hi =
                             gr.addConstant("hi", ir::TensorData::fromFloats("hi", {}, {1.f}));
                         return addNode(gr, "Clip", {in[0], lo, hi});
                       },
                       {2.f, 2.f, 2.f, 2.f, 2.f, 2.f});
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0], (std::vector<float>{2.f, 2.f, 0.f, 0.f, 2.f, 0.f}));
}

TEST(ActivationGrad, SoftmaxAndLogSoftmaxAnyAxis) {
  for (const char *op : {"Softmax", "LogSoftmax"}) {
    for (int64_t axis : {0, 1, 2, -1, -2})
      EXPECT_EQ(test::gradCheck(op, {GradInput::f32("x", {3, 4, 5}).range(-2, 2)},
                                {{"axis", Attribute(axis)}}),
                "")
          << op << " axis " << axis;
    EXPECT_EQ(test::gradCheck(op, {GradInput::f32("x", {7})}, {}), "") << op;
    EXPECT_EQ(test::gradCheck(op, {GradInput::f32("x", {2, 1})}, {{"axis", Attribute(int64_t{1})}}),
              "")
        << op;
  }
}

TEST(ActivationGrad, SoftmaxOfConstantSeedHasZeroGradient) {
  // sum(softmax(x)) = 1 along the axis: a constant seed gives dX = 0.
  std::vector<float> g = unaryGrad("Softmax", {0.3f, -1.f, 2.f}, {}, {2.f, 2.f, 2.f});
  ASSERT_EQ(g.size(), 3u);
  for (float v : g)
    EXPECT_NEAR(v, 0.f, 1e-6);
  // LogSoftmax with seed e_0: dX = e_0 - softmax(x).
  std::vector<float> x = {0.3f, -1.f, 2.f};
  g = unaryGrad("LogSoftmax", x, {}, {1.f, 0.f, 0.f});
  ASSERT_EQ(g.size(), 3u);
  double z = 0;
  for (float v : x)
    z += std::exp(v);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_NEAR(g[i], (i == 0 ? 1.0 : 0.0) - std::exp(x[i]) / z, 1e-6);
}

TEST(ActivationGrad, IdentityDropoutAndCast) {
  EXPECT_EQ(test::gradCheck("Identity", {GradInput::f32("x", {2, 3})}, {}), "");
  EXPECT_EQ(test::gradCheck("Dropout", {GradInput::f32("x", {4, 3})}, {}), "");
  EXPECT_EQ(
      test::gradCheck("Dropout", {GradInput::f32("x", {4, 3}), scalarConst("ratio", 0.3f)}, {}, 2),
      "");
  EXPECT_EQ(test::gradCheck("Cast", {GradInput::f32("x", {2, 3})},
                            {{"to", Attribute(static_cast<int64_t>(ir::DType::kFloat32))}}),
            "");
}

TEST(ActivationGrad, DropoutInferenceIsIdentity) {
  auto g = gradientsOf({{"x", {3}, {1.f, 2.f, 3.f}}},
                       [](ir::Graph &gr, const std::vector<ir::Value *> &in) {
                         ir::Value *r = gr.addConstant(
                             "ratio", ir::TensorData::fromFloats("ratio", {}, {0.5f}));
                         return addNode(gr, "Dropout", {in[0], r});
                       },
                       {4.f, 5.f, 6.f});
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0], (std::vector<float>{4.f, 5.f, 6.f}));
}

TEST(ActivationGrad, TrainingModeDropoutNeedsRewriting) {
  ir::Graph g;
  Diagnostics diags;
  ir::Value *x = g.createValue("x", {ir::DType::kFloat32, ir::Shape::ofStatic({3})});
  g.addInput(x);
  ir::Value *mode = g.addConstant(
      "mode", ir::TensorData::fromBytes("mode", ir::DType::kBool, {}, std::string(1, '\1')));
  ir::Node *n = g.addNode("Dropout", {x, nullptr, mode}, {"y"}, "", "drop");
  ASSERT_TRUE(ops::inferNode(*n, diags).isOk());
  auto grads = passes::buildGradients(g, n->output(0), {x}, diags);
  ASSERT_FALSE(grads);
  EXPECT_EQ(grads.status().message(),
            "node 'drop' (Dropout): training-mode Dropout has no gradient rule: rewrite it to "
            "ai.dtc.DropoutTraining before autodiff");
}

TEST(ActivationGrad, CastFloatRoundTripAndIntegerCastCarriesNone) {
  // x -> f64 -> f32: the gradient is cast back through f64 (two backward Casts).
  std::vector<std::string> bwd;
  auto g = gradientsOf(
      {{"x", {2}, {1.5f, -2.5f}}},
      [](ir::Graph &gr, const std::vector<ir::Value *> &in) {
        ir::Value *d = addNode(gr, "Cast", {in[0]},
                               {{"to", Attribute(static_cast<int64_t>(ir::DType::kFloat64))}});
        return addNode(gr, "Cast", {d},
                       {{"to", Attribute(static_cast<int64_t>(ir::DType::kFloat32))}});
      },
      {3.f, 4.f}, &bwd);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0], (std::vector<float>{3.f, 4.f}));
  EXPECT_EQ(std::count(bwd.begin(), bwd.end(), "Cast"), 2);
  // y = x * float(int(x)): the integer path carries no gradient, so dy/dx = float(int(x)).
  g = gradientsOf({{"x", {2}, {1.5f, -2.5f}}}, [](ir::Graph &gr,
                                                  const std::vector<ir::Value *> &in) {
    ir::Value *i =
        addNode(gr, "Cast", {in[0]}, {{"to", Attribute(static_cast<int64_t>(ir::DType::kInt64))}});
    ir::Value *f =
        addNode(gr, "Cast", {i}, {{"to", Attribute(static_cast<int64_t>(ir::DType::kFloat32))}});
    return addNode(gr, "Mul", {in[0], f});
  });
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0], (std::vector<float>{1.f, -2.f}));
}

TEST(ActivationGrad, RulesEmitTheFusedOps) {
  std::vector<std::string> bwd;
  gradientsOf(
      {{"x", {4}, {1.f, 2.f, 3.f, 4.f}}},
      [](ir::Graph &gr, const std::vector<ir::Value *> &in) {
        ir::Value *s = addNode(gr, "Softmax", {in[0]});
        ir::Value *r = addNode(gr, "Relu", {s});
        return addNode(gr, "Sigmoid", {r});
      },
      {}, &bwd);
  // The loss's own backward (ReduceSum, Mul) comes first; then one fused op per activation.
  ASSERT_GE(bwd.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(bwd.end() - 3, bwd.end()),
            (std::vector<std::string>{"EltwiseGrad", "EltwiseGrad", "SoftmaxGrad"}));
}

} // namespace
} // namespace dtc
