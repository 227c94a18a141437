// Gradient rules of the reduction, loss and tensor/shape/index ops (ops/reduction, ops/tensor):
// finite differences through the real kernels for every rule in several configurations, and the
// documented conventions (ReduceMax ties split evenly, Gather's repeated indices accumulate,
// ignored labels get no gradient, unsupported Pad modes are errors naming the node).
#include "tests/unit/training/GradCheck.h"

#include "compiler/plan/Lowering.h"
#include "ops/OpDef.h"
#include "passes/Autodiff.h"
#include "runtime/Executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

namespace dtc {
namespace {

using test::distinct;
using test::gradCheck;
using test::GradCheckOptions;
using test::GradInput;
using Attrs = std::map<std::string, ir::Attribute>;

Attrs keep(int64_t k) { return {{"keepdims", ir::Attribute(k)}}; }

// ---- Analytic gradients for convention tests ------------------------------------------------

/// One node `op` on an f32 input x (values xs) and constant inputs `consts` (nullptr = omitted),
/// loss = sum(Y_0 * weights) (weights all 1 when empty); returns dloss/dx computed by autodiff
/// and the CPU kernels, or fails the test. `graphOut` receives the op types of backward nodes.
std::vector<float> gradOf(const std::string &op, const std::vector<int64_t> &shape,
                          const std::vector<float> &xs,
                          const std::vector<ir::TensorDataPtr> &consts, const Attrs &attrs,
                          std::vector<float> weights = {},
                          std::vector<std::string> *backwardOps = nullptr, size_t numOutputs = 1) {
  ir::Graph g;
  g.setOpset("", 21);
  Diagnostics diags;
  ir::Value *x = g.createValue("x", {ir::DType::kFloat32, ir::Shape::ofStatic(shape)});
  g.addInput(x);
  std::vector<ir::Value *> ins = {x};
  for (const ir::TensorDataPtr &c : consts)
    ins.push_back(c ? g.addConstant(c->name(), c) : nullptr);
  std::vector<std::string> outs;
  for (size_t o = 0; o < numOutputs; ++o)
    outs.push_back("y" + std::to_string(o));
  ir::Node *n = g.addNode(op, ins, outs, "", "op");
  for (const auto &[k, a] : attrs)
    n->setAttr(k, a);
  EXPECT_TRUE(ops::inferNode(*n, diags).isOk());
  ir::Value *y = n->output(0);
  if (!weights.empty()) {
    ir::Value *w =
        g.addConstant("w", ir::TensorData::fromFloats("w", y->shape().staticSizes(), weights));
    ir::Node *m = g.addNode("Mul", {y, w}, {"yw"});
    EXPECT_TRUE(ops::inferNode(*m, diags).isOk());
    y = m->output(0);
  }
  ir::Node *s = g.addNode("ReduceSum", {y}, {"loss"});
  s->setAttr("keepdims", ir::Attribute(int64_t{0}));
  EXPECT_TRUE(ops::inferNode(*s, diags).isOk());
  g.addOutput(s->output(0));
  auto grads = passes::buildGradients(g, s->output(0), {x}, diags);
  EXPECT_TRUE(grads) << grads.status().message();
  if (!grads || !(*grads)[0])
    return {};
  g.addOutput((*grads)[0]);
  if (backwardOps)
    for (const ir::Node *bn : g.nodes())
      if (bn->phase() == ir::Phase::kBackward)
        backwardOps->push_back(bn->opType());
  auto plan = plan::lowerInference(g, plan::LowerOptions{});
  EXPECT_TRUE(plan) << plan.status().message();
  if (!plan)
    return {};
  auto ex = rt::Executor::create(std::move(*plan), rt::ExecutorOptions{});
  EXPECT_TRUE(ex) << ex.status().message();
  if (!ex)
    return {};
  rt::HostArray in;
  in.name = "x";
  in.dtype = ir::DType::kFloat32;
  in.shape = shape;
  in.bytes.assign(reinterpret_cast<const char *>(xs.data()), xs.size() * sizeof(float));
  EXPECT_TRUE((*ex)->setInput(in).isOk());
  Status st = (*ex)->run();
  EXPECT_TRUE(st.isOk()) << st.message();
  auto o = (*ex)->outputs();
  EXPECT_TRUE(o);
  if (!o)
    return {};
  for (const rt::HostArray &a : *o)
    if (a.name == (*grads)[0]->name()) {
      std::vector<float> r(a.bytes.size() / sizeof(float));
      std::memcpy(r.data(), a.bytes.data(), a.bytes.size());
      return r;
    }
  ADD_FAILURE() << "gradient output not found";
  return {};
}

ir::TensorDataPtr i64s(const std::string &name, std::vector<int64_t> dims, std::vector<int64_t> v) {
  return ir::TensorData::fromInt64s(name, dims, v);
}

/// The autodiff error for a one-node graph on x (for rules that must refuse).
std::string gradError(const std::string &op, const std::vector<int64_t> &shape,
                      const std::vector<ir::TensorDataPtr> &consts, const Attrs &attrs) {
  ir::Graph g;
  g.setOpset("", 21);
  Diagnostics diags;
  ir::Value *x = g.createValue("x", {ir::DType::kFloat32, ir::Shape::ofStatic(shape)});
  g.addInput(x);
  std::vector<ir::Value *> ins = {x};
  for (const ir::TensorDataPtr &c : consts)
    ins.push_back(c ? g.addConstant(c->name(), c) : nullptr);
  ir::Node *n = g.addNode(op, ins, {"y"}, "", "op");
  for (const auto &[k, a] : attrs)
    n->setAttr(k, a);
  EXPECT_TRUE(ops::inferNode(*n, diags).isOk());
  ir::Node *s = g.addNode("ReduceSum", {n->output(0)}, {"loss"});
  s->setAttr("keepdims", ir::Attribute(int64_t{0}));
  EXPECT_TRUE(ops::inferNode(*s, diags).isOk());
  auto grads = passes::buildGradients(g, s->output(0), {x}, diags);
  return grads ? "" : grads.status().message();
}

// ---- ReduceMean / ReduceMax ------------------------------------------------------------------

TEST(TensorGrad, ReduceMean) {
  EXPECT_EQ(gradCheck("ReduceMean", {GradInput::f32("x", {2, 3, 4}), GradInput::i64("a", {1}, {1})},
                      keep(1)),
            "");
  EXPECT_EQ(gradCheck("ReduceMean",
                      {GradInput::f32("x", {3, 5, 2}), GradInput::i64("a", {2}, {0, -1})}, keep(0)),
            "");
  EXPECT_EQ(gradCheck("ReduceMean", {GradInput::f32("x", {3, 1, 5})}, keep(0)), ""); // all axes
  EXPECT_EQ(gradCheck("ReduceMean", {GradInput::f32("x", {3, 1, 2}), GradInput::i64("a", {1}, {1})},
                      keep(1)),
            "");
  EXPECT_EQ(
      gradCheck("ReduceMean", {GradInput::f32("x", {7}), GradInput::i64("a", {1}, {0})}, keep(0)),
      "");
}

TEST(TensorGrad, ReduceMeanScalesByCount) {
  // d mean / dx = 1/6 everywhere.
  std::vector<float> g = gradOf("ReduceMean", {2, 3}, {1, 2, 3, 4, 5, 6}, {}, keep(0));
  ASSERT_EQ(g.size(), 6u);
  for (float v : g)
    EXPECT_FLOAT_EQ(v, 1.0f / 6);
}

TEST(TensorGrad, ReduceMax) {
  EXPECT_EQ(gradCheck("ReduceMax",
                      {GradInput::f32("x", {3, 4, 5}, distinct(60)), GradInput::i64("a", {1}, {1})},
                      keep(0)),
            "");
  EXPECT_EQ(
      gradCheck("ReduceMax",
                {GradInput::f32("x", {2, 3, 4}, distinct(24)), GradInput::i64("a", {2}, {0, 2})},
                keep(1)),
      "");
  EXPECT_EQ(gradCheck("ReduceMax", {GradInput::f32("x", {4, 3}, distinct(12))}, keep(0)), "");
  EXPECT_EQ(gradCheck("ReduceMax",
                      {GradInput::f32("x", {5, 1}, distinct(5)), GradInput::i64("a", {1}, {-1})},
                      keep(1)),
            "");
}

TEST(TensorGrad, ReduceMaxTiesSplitTheGradientEvenly) {
  // Rows: [3, 1, 3, 3] (three tied maxima), [2, 5, 0, 5] (two), [7, 1, 2, 3] (one).
  // Loss = sum(Y * [1, 2, 3]): each tied maximum gets weight / count (PyTorch's amax).
  std::vector<float> x = {3, 1, 3, 3, 2, 5, 0, 5, 7, 1, 2, 3};
  std::vector<float> g =
      gradOf("ReduceMax", {3, 4}, x, {i64s("a", {1}, {1})}, keep(0), {1.f, 2.f, 3.f});
  std::vector<float> want = {1.f / 3, 0, 1.f / 3, 1.f / 3, 0, 1, 0, 1, 3, 0, 0, 0};
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_FLOAT_EQ(g[i], want[i]) << "element " << i;
  // Over every axis: the two 7s share the gradient.
  std::vector<float> g2 = gradOf("ReduceMax", {2, 2}, {7, 1, 7, 2}, {}, keep(1));
  EXPECT_EQ(g2, (std::vector<float>{0.5f, 0, 0.5f, 0}));
}

// ---- Losses ----------------------------------------------------------------------------------

Attrs lossAttrs(const std::string &reduction) { return {{"reduction", ir::Attribute(reduction)}}; }
Attrs lossAttrs(const std::string &reduction, int64_t ignore) {
  return {{"reduction", ir::Attribute(reduction)}, {"ignore_index", ir::Attribute(ignore)}};
}

TEST(TensorGrad, SoftmaxCrossEntropyLoss2D) {
  GradCheckOptions o;
  o.maxElements = 64;
  for (const char *red : {"mean", "sum", "none"}) {
    SCOPED_TRACE(red);
    EXPECT_EQ(gradCheck("SoftmaxCrossEntropyLoss",
                        {GradInput::f32("s", {5, 4}).range(-2, 2),
                         GradInput::i64("l", {5}, {0, 3, 1, 1, 2})},
                        lossAttrs(red), 1, o),
              "");
    // Class weights.
    EXPECT_EQ(gradCheck("SoftmaxCrossEntropyLoss",
                        {GradInput::f32("s", {6, 3}).range(-2, 2),
                         GradInput::i64("l", {6}, {0, 2, 1, 1, 2, 0}),
                         GradInput::f32("w", {3}, {0.5f, 2.0f, 1.25f}).fixed()},
                        lossAttrs(red), 1, o),
              "");
    // ignore_index present in the labels (negative, as PyTorch's -100, and a class id).
    EXPECT_EQ(gradCheck("SoftmaxCrossEntropyLoss",
                        {GradInput::f32("s", {5, 3}).range(-2, 2),
                         GradInput::i64("l", {5}, {0, -100, 2, -100, 1}),
                         GradInput::f32("w", {3}, {0.5f, 2.0f, 1.25f}).fixed()},
                        lossAttrs(red, -100), 1, o),
              "");
    EXPECT_EQ(gradCheck("SoftmaxCrossEntropyLoss",
                        {GradInput::f32("s", {4, 3}).range(-2, 2),
                         GradInput::i64("l", {4}, {1, 2, 2, 0})},
                        lossAttrs(red, 2), 1, o),
              "");
  }
  // One class, one sample (edge sizes).
  EXPECT_EQ(gradCheck("SoftmaxCrossEntropyLoss",
                      {GradInput::f32("s", {1, 1}), GradInput::i64("l", {1}, {0})},
                      lossAttrs("mean")),
            "");
}

TEST(TensorGrad, SoftmaxCrossEntropyLossSegmentation4D) {
  GradCheckOptions o;
  o.maxElements = 72;
  // (N, C, H, W) = (2, 3, 2, 3), labels (2, 2, 3) with ignored pixels and class weights.
  std::vector<int64_t> labels = {0, 1, 2, 255, 1, 0, 2, 2, 255, 0, 1, 1};
  for (const char *red : {"mean", "sum", "none"}) {
    SCOPED_TRACE(red);
    EXPECT_EQ(gradCheck("SoftmaxCrossEntropyLoss",
                        {GradInput::f32("s", {2, 3, 2, 3}).range(-2, 2),
                         GradInput::i64("l", {2, 2, 3}, labels),
                         GradInput::f32("w", {3}, {1.5f, 0.5f, 1.0f}).fixed()},
                        lossAttrs(red, 255), 1, o),
              "");
    EXPECT_EQ(gradCheck("SoftmaxCrossEntropyLoss",
                        {GradInput::f32("s", {2, 4, 3}).range(-2, 2),
                         GradInput::i64("l", {2, 3}, {3, 0, 1, 2, 2, 3})},
                        lossAttrs(red), 1, o),
              "");
  }
}

TEST(TensorGrad, SoftmaxCrossEntropyLossLogProbOutput) {
  GradCheckOptions o;
  o.maxElements = 64;
  // Both outputs in the loss, then log_prob alone.
  EXPECT_EQ(
      gradCheck("SoftmaxCrossEntropyLoss",
                {GradInput::f32("s", {3, 4, 2}), GradInput::i64("l", {3, 2}, {0, 1, 3, 3, 2, -1})},
                lossAttrs("mean", -1), 2, o),
      "");
  o.lossOutputs = {1};
  EXPECT_EQ(gradCheck("SoftmaxCrossEntropyLoss",
                      {GradInput::f32("s", {4, 5}), GradInput::i64("l", {4}, {0, 1, 4, 2})},
                      lossAttrs("sum"), 2, o),
            "");
}

TEST(TensorGrad, SoftmaxCrossEntropyLossIgnoredSamplesGetZero) {
  // Sample 1 is ignored: its row of dscores is exactly 0; the mean divides by 2 samples.
  std::vector<float> s = {1, 2, 3, 0, 0, 0, -1, 0.5f, 2};
  std::vector<float> g = gradOf("SoftmaxCrossEntropyLoss", {3, 3}, s, {i64s("l", {3}, {2, 7, 0})},
                                lossAttrs("mean", 7));
  ASSERT_EQ(g.size(), 9u);
  for (int c = 0; c < 3; ++c)
    EXPECT_EQ(g[3 + c], 0.f);
  // Row 0: (softmax - onehot(2)) / 2.
  double e0 = std::exp(1.0), e1 = std::exp(2.0), e2 = std::exp(3.0), z = e0 + e1 + e2;
  EXPECT_NEAR(g[0], e0 / z / 2, 1e-6);
  EXPECT_NEAR(g[1], e1 / z / 2, 1e-6);
  EXPECT_NEAR(g[2], (e2 / z - 1) / 2, 1e-6);
}

TEST(TensorGrad, NegativeLogLikelihoodLoss) {
  GradCheckOptions o;
  o.maxElements = 64;
  for (const char *red : {"mean", "sum", "none"}) {
    SCOPED_TRACE(red);
    EXPECT_EQ(gradCheck("NegativeLogLikelihoodLoss",
                        {GradInput::f32("x", {4, 3}), GradInput::i64("t", {4}, {0, 2, 1, 2})},
                        lossAttrs(red), 1, o),
              "");
    EXPECT_EQ(gradCheck("NegativeLogLikelihoodLoss",
                        {GradInput::f32("x", {2, 3, 2, 2}),
                         GradInput::i64("t", {2, 2, 2}, {0, 1, 2, -1, 2, -1, 0, 0}),
                         GradInput::f32("w", {3}, {0.2f, 1.0f, 3.0f}).fixed()},
                        lossAttrs(red, -1), 1, o),
              "");
  }
  // dinput = -w[t] / sum(w[t]) at the target, 0 elsewhere (mean).
  std::vector<float> g = gradOf("NegativeLogLikelihoodLoss", {2, 2}, {0, 0, 0, 0},
                                {i64s("t", {2}, {1, 0})}, lossAttrs("mean"));
  EXPECT_EQ(g, (std::vector<float>{0, -0.5f, -0.5f, 0}));
}

// ---- Shape-only ops --------------------------------------------------------------------------

TEST(TensorGrad, ReshapeFlattenSqueezeUnsqueeze) {
  EXPECT_EQ(
      gradCheck("Reshape", {GradInput::f32("x", {2, 3, 4}), GradInput::i64("s", {2}, {4, -1})}, {}),
      "");
  EXPECT_EQ(
      gradCheck("Reshape", {GradInput::f32("x", {5}), GradInput::i64("s", {3}, {1, 5, 1})}, {}),
      "");
  EXPECT_EQ(gradCheck("Flatten", {GradInput::f32("x", {2, 3, 2, 2})},
                      {{"axis", ir::Attribute(int64_t{2})}}),
            "");
  EXPECT_EQ(
      gradCheck("Flatten", {GradInput::f32("x", {3, 4})}, {{"axis", ir::Attribute(int64_t{0})}}),
      "");
  EXPECT_EQ(
      gradCheck("Squeeze", {GradInput::f32("x", {2, 1, 3, 1}), GradInput::i64("a", {1}, {1})}, {}),
      "");
  EXPECT_EQ(gradCheck("Squeeze", {GradInput::f32("x", {1, 3, 1})}, {}), "");
  EXPECT_EQ(
      gradCheck("Unsqueeze", {GradInput::f32("x", {2, 3}), GradInput::i64("a", {2}, {0, -1})}, {}),
      "");
}

TEST(TensorGrad, Transpose) {
  EXPECT_EQ(gradCheck("Transpose", {GradInput::f32("x", {2, 3, 4, 5})},
                      {{"perm", ir::Attribute(std::vector<int64_t>{0, 2, 3, 1})}}),
            "");
  EXPECT_EQ(gradCheck("Transpose", {GradInput::f32("x", {2, 3, 1, 4})},
                      {{"perm", ir::Attribute(std::vector<int64_t>{3, 0, 2, 1})}}),
            "");
  EXPECT_EQ(gradCheck("Transpose", {GradInput::f32("x", {2, 3, 4})}, {}), ""); // reversed
}

// ---- Concat / Split --------------------------------------------------------------------------

TEST(TensorGrad, Concat) {
  EXPECT_EQ(gradCheck("Concat",
                      {GradInput::f32("a", {2, 1, 3}), GradInput::f32("b", {2, 4, 3}),
                       GradInput::f32("c", {2, 2, 3})},
                      {{"axis", ir::Attribute(int64_t{1})}}),
            "");
  EXPECT_EQ(gradCheck("Concat",
                      {GradInput::f32("a", {3, 2}), GradInput::f32("b", {3, 5}).fixed(),
                       GradInput::f32("c", {3, 1})},
                      {{"axis", ir::Attribute(int64_t{-1})}}),
            "");
  EXPECT_EQ(gradCheck("Concat", {GradInput::f32("a", {4})}, {{"axis", ir::Attribute(int64_t{0})}}),
            "");
}

TEST(TensorGrad, Split) {
  // Uneven sizes along axis 1; output 1 does not enter the loss (its part of dX is 0).
  GradCheckOptions o;
  o.lossOutputs = {0, 2};
  EXPECT_EQ(gradCheck("Split",
                      {GradInput::f32("x", {2, 7, 3}), GradInput::i64("s", {3}, {2, 4, 1})},
                      {{"axis", ir::Attribute(int64_t{1})}}, 3, o),
            "");
  // num_outputs with a smaller last chunk (7 = 3 + 3 + 1), negative axis.
  EXPECT_EQ(
      gradCheck("Split", {GradInput::f32("x", {3, 7})},
                {{"axis", ir::Attribute(int64_t{-1})}, {"num_outputs", ir::Attribute(int64_t{3})}},
                3),
      "");
  o.lossOutputs = {1};
  EXPECT_EQ(
      gradCheck("Split", {GradInput::f32("x", {6, 2})},
                {{"axis", ir::Attribute(int64_t{0})}, {"num_outputs", ir::Attribute(int64_t{2})}},
                2, o),
      "");
}

// ---- Slice -----------------------------------------------------------------------------------

GradInput ints(const std::string &name, std::vector<int64_t> v) {
  return GradInput::i64(name, {static_cast<int64_t>(v.size())}, v);
}

TEST(TensorGrad, Slice) {
  const int64_t kMax = INT64_MAX, kMin = INT64_MIN;
  // Step 1 (Pad path), negative start.
  EXPECT_EQ(
      gradCheck("Slice", {GradInput::f32("x", {4, 5}), ints("b", {1, -3}), ints("e", {3, 5})}, {}),
      "");
  // Step 2 along axis 1, clamped end.
  EXPECT_EQ(gradCheck("Slice",
                      {GradInput::f32("x", {3, 7}), ints("b", {1}), ints("e", {kMax}),
                       ints("a", {1}), ints("s", {2})},
                      {}),
            "");
  // Step -1 reverses a whole axis (start clamped from kMax, end kMin).
  EXPECT_EQ(gradCheck("Slice",
                      {GradInput::f32("x", {2, 5, 3}), ints("b", {kMax}), ints("e", {kMin}),
                       ints("a", {1}), ints("s", {-1})},
                      {}),
            "");
  // Several axes: step -2 with a clamped start, step 3, and an out-of-range end clamped.
  EXPECT_EQ(gradCheck("Slice",
                      {GradInput::f32("x", {6, 4, 8}), ints("b", {100, 1, -8}),
                       ints("e", {-100, 4, 1000}), ints("a", {0, 1, 2}), ints("s", {-2, 1, 3})},
                      {}),
            "");
  // A slice that takes nothing along one axis (dX all zeros) and a 1-element reversed slice.
  EXPECT_EQ(gradCheck("Slice",
                      {GradInput::f32("x", {3, 4}), ints("b", {2, 3}), ints("e", {1, 2}),
                       ints("a", {0, 1}), ints("s", {-1, -1})},
                      {}),
            "");
}

TEST(TensorGrad, SliceUsesPadForUnitStepsAndSliceGradOtherwise) {
  std::vector<std::string> ops1, ops2;
  std::vector<float> x(12);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(i);
  std::vector<float> g1 =
      gradOf("Slice", {3, 4}, x, {i64s("b", {1}, {1}), i64s("e", {1}, {3})}, {}, {}, &ops1);
  EXPECT_EQ(g1, (std::vector<float>{0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_NE(std::find(ops1.begin(), ops1.end(), "Pad"), ops1.end());
  std::vector<float> g2 = gradOf(
      "Slice", {3, 4}, x,
      {i64s("b", {1}, {-1}), i64s("e", {1}, {-5}), i64s("a", {1}, {1}), i64s("s", {1}, {-2})}, {},
      {}, &ops2);
  EXPECT_EQ(g2, (std::vector<float>{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1}));
  EXPECT_NE(std::find(ops2.begin(), ops2.end(), "SliceGrad"), ops2.end());
}

// ---- Gather ----------------------------------------------------------------------------------

TEST(TensorGrad, Gather) {
  GradCheckOptions o;
  o.maxElements = 64;
  // Axis 0 (an embedding lookup): repeated and negative indices, 2-D indices.
  EXPECT_EQ(
      gradCheck("Gather",
                {GradInput::f32("x", {6, 4}), GradInput::i64("i", {2, 3}, {1, 5, 1, -1, 0, 1})}, {},
                1, o),
      "");
  // Axis 1 with repeats and a negative index.
  EXPECT_EQ(gradCheck("Gather",
                      {GradInput::f32("x", {2, 5, 3}), GradInput::i64("i", {4}, {4, -5, 0, 4})},
                      {{"axis", ir::Attribute(int64_t{1})}}, 1, o),
            "");
  // Axis -1, scalar index.
  EXPECT_EQ(gradCheck("Gather", {GradInput::f32("x", {3, 4}), GradInput::i64("i", {}, {-2})},
                      {{"axis", ir::Attribute(int64_t{-1})}}, 1, o),
            "");
}

TEST(TensorGrad, GatherRepeatedIndicesAccumulate) {
  // Rows 2 and 0 taken 3 and 1 times: dX rows are 3 and 1, row 1 is 0.
  std::vector<float> g =
      gradOf("Gather", {3, 2}, {1, 2, 3, 4, 5, 6}, {i64s("i", {4}, {2, -1, 0, 2})}, {});
  EXPECT_EQ(g, (std::vector<float>{1, 1, 0, 0, 3, 3}));
}

TEST(TensorGrad, GatherElements) {
  GradCheckOptions o;
  o.maxElements = 64;
  // Axis 0 with repeated and negative indices; indices smaller than data on the other axis.
  EXPECT_EQ(gradCheck("GatherElements",
                      {GradInput::f32("x", {3, 4}),
                       GradInput::i64("i", {4, 2}, {0, 2, -1, 1, 2, 2, 0, -3})},
                      {}, 1, o),
            "");
  // Axis -1 of a 3-D tensor.
  EXPECT_EQ(gradCheck("GatherElements",
                      {GradInput::f32("x", {2, 2, 3}),
                       GradInput::i64("i", {2, 2, 2}, {2, 0, 1, 1, 0, 0, -1, 2})},
                      {{"axis", ir::Attribute(int64_t{-1})}}, 1, o),
            "");
}

TEST(TensorGrad, GatherElementsRepeatedIndicesAccumulate) {
  // Column 0 of row 0 taken twice, column 1 of row 1 three times: scatter-add.
  std::vector<float> g =
      gradOf("GatherElements", {2, 2}, {1, 2, 3, 4}, {i64s("i", {2, 3}, {0, 0, -1, 1, 1, 1})},
             {{"axis", ir::Attribute(int64_t{1})}}, {1, 2, 4, 8, 16, 32});
  EXPECT_EQ(g, (std::vector<float>{3, 4, 0, 56}));
}

TEST(TensorGrad, GatherND) {
  GradCheckOptions o;
  o.maxElements = 64;
  // Tuples of length 1 (row slices) with a repeat and a negative index; full tuples (elements).
  EXPECT_EQ(gradCheck("GatherND",
                      {GradInput::f32("x", {3, 4}), GradInput::i64("i", {3, 1}, {2, -1, 0})}, {}, 1,
                      o),
            "");
  EXPECT_EQ(gradCheck("GatherND",
                      {GradInput::f32("x", {2, 3, 2}),
                       GradInput::i64("i", {2, 2, 3}, {0, 1, 1, 1, 2, 0, -1, 0, 0, 0, 2, 1})},
                      {}, 1, o),
            "");
  // batch_dims = 1 (GPT-2 picks one position per sequence this way).
  EXPECT_EQ(gradCheck("GatherND",
                      {GradInput::f32("x", {2, 3, 4}), GradInput::i64("i", {2, 1}, {2, 0})},
                      {{"batch_dims", ir::Attribute(int64_t{1})}}, 1, o),
            "");
}

TEST(TensorGrad, GatherNDRepeatedTuplesAccumulate) {
  std::vector<float> g = gradOf("GatherND", {2, 2}, {1, 2, 3, 4},
                                {i64s("i", {3, 2}, {1, 0, 1, 0, 0, 1})}, {}, {1, 2, 4});
  EXPECT_EQ(g, (std::vector<float>{0, 4, 3, 0}));
}

TEST(TensorGrad, FloorCeilRoundSignHaveZeroGradient) {
  for (const char *op : {"Floor", "Ceil", "Round", "Sign"}) {
    std::vector<std::string> bwd;
    std::vector<float> g = gradOf(op, {3}, {0.3f, -1.7f, 2.5f}, {}, {}, {}, &bwd);
    EXPECT_EQ(g, (std::vector<float>{0, 0, 0})) << op;
    EXPECT_EQ(std::count(bwd.begin(), bwd.end(), "ZeroGradient"), 1) << op;
  }
}

TEST(TensorGrad, TriluKeepsTheSameTriangle) {
  EXPECT_EQ(gradCheck("Trilu", {GradInput::f32("x", {2, 3, 4})}, {}), "");
  EXPECT_EQ(gradCheck("Trilu", {GradInput::f32("x", {3, 4}), GradInput::i64("k", {}, {-1})},
                      {{"upper", ir::Attribute(int64_t{0})}}),
            "");
  std::vector<float> g = gradOf("Trilu", {2, 2}, {1, 2, 3, 4}, {i64s("k", {}, {1})}, {});
  EXPECT_EQ(g, (std::vector<float>{0, 1, 0, 0}));
}

TEST(TensorGrad, ScatterElementsAndScatterND) {
  GradCheckOptions o;
  o.maxElements = 64;
  for (const char *reduction : {"none", "add"}) {
    SCOPED_TRACE(reduction);
    Attrs a = {{"reduction", ir::Attribute(std::string(reduction))}};
    // Distinct destinations (none overwrites; repeated ones are checked with add).
    EXPECT_EQ(
        gradCheck("ScatterElements",
                  {GradInput::f32("x", {3, 4}), GradInput::i64("i", {2, 3}, {2, 0, 1, -3, -2, 2}),
                   GradInput::f32("u", {2, 3})},
                  a, 1, o),
        "");
    Attrs a1 = a;
    a1["axis"] = ir::Attribute(int64_t{1});
    EXPECT_EQ(gradCheck("ScatterElements",
                        {GradInput::f32("x", {2, 4}), GradInput::i64("i", {2, 2}, {3, 0, -1, 1}),
                         GradInput::f32("u", {2, 2})},
                        a1, 1, o),
              "");
    EXPECT_EQ(gradCheck("ScatterND",
                        {GradInput::f32("x", {3, 2, 2}), GradInput::i64("i", {2, 1}, {2, 0}),
                         GradInput::f32("u", {2, 2, 2})},
                        a, 1, o),
              "");
  }
  EXPECT_EQ(gradCheck("ScatterND",
                      {GradInput::f32("x", {2, 3}), GradInput::i64("i", {3, 2}, {0, 1, 0, 1, 1, 2}),
                       GradInput::f32("u", {3})},
                      {{"reduction", ir::Attribute(std::string("add"))}}, 1, o),
            "");
}

// ---- CumSum ------------------------------------------------------------------------------------

TEST(TensorGrad, CumSumEveryDirection) {
  for (int64_t exclusive : {0, 1})
    for (int64_t reverse : {0, 1}) {
      SCOPED_TRACE("exclusive " + std::to_string(exclusive) + " reverse " +
                   std::to_string(reverse));
      Attrs a = {{"exclusive", ir::Attribute(exclusive)}, {"reverse", ir::Attribute(reverse)}};
      EXPECT_EQ(gradCheck("CumSum", {GradInput::f32("x", {3, 4}), ints("axis", {1})}, a), "");
      EXPECT_EQ(gradCheck("CumSum",
                          {GradInput::f32("x", {2, 3, 2}), GradInput::i64("axis", {}, {-3})}, a),
                "");
    }
}

TEST(TensorGrad, CumSumGradientIsTheReverseCumSum) {
  // y = cumsum(x) along axis 0 of [4]: dx_i = sum_{j >= i} dy_j; exclusive: sum_{j > i}.
  std::vector<std::string> bwd;
  std::vector<float> g =
      gradOf("CumSum", {4}, {1, 2, 3, 4}, {i64s("axis", {}, {0})}, {}, {1, 2, 4, 8}, &bwd);
  EXPECT_EQ(g, (std::vector<float>{15, 14, 12, 8}));
  EXPECT_EQ(std::count(bwd.begin(), bwd.end(), "CumSum"), 1);
  g = gradOf("CumSum", {4}, {1, 2, 3, 4}, {i64s("axis", {}, {0})},
             {{"exclusive", ir::Attribute(int64_t{1})}, {"reverse", ir::Attribute(int64_t{1})}},
             {1, 2, 4, 8});
  EXPECT_EQ(g, (std::vector<float>{0, 1, 3, 7}));
}

// ---- Expand / Tile / Pad ---------------------------------------------------------------------

TEST(TensorGrad, Expand) {
  EXPECT_EQ(gradCheck("Expand", {GradInput::f32("x", {3, 1}), ints("s", {2, 3, 4})}, {}), "");
  EXPECT_EQ(gradCheck("Expand", {GradInput::f32("x", {1}), ints("s", {5})}, {}), "");
  EXPECT_EQ(gradCheck("Expand", {GradInput::f32("x", {2, 1, 4}), ints("s", {2, 3, 1})}, {}), "");
  EXPECT_EQ(gradCheck("Expand", {GradInput::f32("x", {2, 3}), ints("s", {1, 3})}, {}), ""); // same
}

TEST(TensorGrad, Tile) {
  EXPECT_EQ(gradCheck("Tile", {GradInput::f32("x", {2, 3}), ints("r", {2, 1})}, {}), "");
  EXPECT_EQ(gradCheck("Tile", {GradInput::f32("x", {2, 1, 3}), ints("r", {1, 3, 2})}, {}), "");
  EXPECT_EQ(gradCheck("Tile", {GradInput::f32("x", {4}), ints("r", {1})}, {}), "");
  // Each element is copied 2 * 3 = 6 times.
  std::vector<float> g = gradOf("Tile", {1, 2}, {1, 2}, {i64s("r", {2}, {2, 3})}, {});
  EXPECT_EQ(g, (std::vector<float>{6, 6}));
}

TEST(TensorGrad, Pad) {
  EXPECT_EQ(gradCheck("Pad", {GradInput::f32("x", {2, 3}), ints("p", {1, 0, 2, 1})},
                      {{"mode", ir::Attribute("constant")}}),
            "");
  // Negative pads crop; mixed with positive ones.
  EXPECT_EQ(gradCheck("Pad", {GradInput::f32("x", {3, 4}), ints("p", {-1, 1, 0, -2})}, {}), "");
  // Axes input, and a differentiable constant_value.
  EXPECT_EQ(gradCheck("Pad",
                      {GradInput::f32("x", {2, 3, 2}), ints("p", {1, 2, 0, 1}),
                       GradInput::f32("v", {}), ints("a", {0, -1})},
                      {}),
            "");
}

TEST(TensorGrad, PadReflectIsAnErrorNamingTheNode) {
  EXPECT_EQ(gradError("Pad", {3, 4}, {i64s("p", {4}, {0, 1, 0, 1})},
                      {{"mode", ir::Attribute("reflect")}}),
            "node 'op' (Pad): gradient: Pad mode 'reflect' has no gradient rule (only constant)");
}

} // namespace
} // namespace dtc
