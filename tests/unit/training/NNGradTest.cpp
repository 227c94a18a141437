// Gradient rules of the nn family checked by finite differences through the real kernels
// (GradCheck.h): MatMul (1-D operands, batch broadcasting), Gemm (transposes, alpha/beta, C
// broadcast), ai.dtc.BatchNormTraining (gradients through the batch statistics),
// LayerNormalization, inference-mode BatchNormalization; plus the rules' structure and errors.
#include "tests/unit/training/GradCheck.h"

#include "ops/OpDef.h"
#include "passes/Autodiff.h"

#include <gtest/gtest.h>

namespace dtc {
namespace {

using test::GradCheckOptions;
using test::GradInput;

std::string matmul(std::vector<int64_t> a, std::vector<int64_t> b) {
  return test::gradCheck("MatMul", {GradInput::f32("a", a), GradInput::f32("b", b)}, {});
}

TEST(MatMulGrad, TwoD) {
  EXPECT_EQ(matmul({3, 4}, {4, 5}), "");
  EXPECT_EQ(matmul({1, 1}, {1, 1}), "");
  EXPECT_EQ(matmul({5, 1}, {1, 3}), "");
  EXPECT_EQ(matmul({1, 7}, {7, 1}), "");
}

TEST(MatMulGrad, VectorOperands) {
  EXPECT_EQ(matmul({4}, {4, 3}), "");
  EXPECT_EQ(matmul({3, 4}, {4}), "");
  EXPECT_EQ(matmul({5}, {5}), "");
  EXPECT_EQ(matmul({4}, {2, 4, 3}), "");
  EXPECT_EQ(matmul({2, 3, 4}, {4}), "");
}

TEST(MatMulGrad, Batched) {
  EXPECT_EQ(matmul({2, 3, 4}, {4, 5}), "");          // weights without batch: folded rows
  EXPECT_EQ(matmul({3, 4}, {2, 4, 5}), "");          // A broadcast over B's batch
  EXPECT_EQ(matmul({2, 3, 4}, {2, 4, 5}), "");       // same batch
  EXPECT_EQ(matmul({2, 1, 3, 4}, {1, 3, 4, 2}), ""); // both broadcast
  EXPECT_EQ(matmul({3, 2, 3}, {1, 3, 2}), "");
  EXPECT_EQ(matmul({2, 2, 3, 4}, {4, 3}), "");
  EXPECT_EQ(matmul({4, 3}, {2, 1, 3, 2}), "");
}

// The rule uses MatMulT (transposes through strides): no Transpose node, and a 2-D weight
// multiplied by a batched input gets its gradient from one 2-D product (no ReduceSum).
TEST(MatMulGrad, StructureUsesMatMulTWithoutTransposes) {
  ir::Graph g;
  Diagnostics diags;
  ir::Value *a = g.createValue("a", {ir::DType::kFloat32, ir::Shape::ofStatic({2, 3, 4})});
  ir::Value *w = g.createValue("w", {ir::DType::kFloat32, ir::Shape::ofStatic({4, 5})});
  g.addInput(a);
  g.addInput(w);
  ir::Node *m = g.addNode("MatMul", {a, w}, {"y"}, "", "mm");
  ASSERT_TRUE(ops::inferNode(*m, diags).isOk());
  ir::Node *s = g.addNode("ReduceSum", {m->output(0)}, {"l"});
  s->setAttr("keepdims", ir::Attribute(int64_t{0}));
  ASSERT_TRUE(ops::inferNode(*s, diags).isOk());
  auto grads = passes::buildGradients(g, s->output(0), {a, w}, diags);
  ASSERT_TRUE(grads) << grads.status().message();
  int matmulT = 0;
  for (ir::Node *n : g.nodes()) {
    if (n->phase() != ir::Phase::kBackward)
      continue;
    EXPECT_NE(n->opType(), "Transpose");
    if (n->opType() == "MatMulT")
      ++matmulT;
  }
  EXPECT_EQ(matmulT, 2);
  ir::Node *dw = (*grads)[1]->producer();
  ASSERT_NE(dw, nullptr);
  EXPECT_EQ(dw->opType(), "MatMulT");
  EXPECT_EQ(dw->attrInt("transA", 0), 1);
  EXPECT_EQ(dw->input(0)->shape().staticSizes(), (std::vector<int64_t>{6, 4}));
}

std::string gemm(int64_t transA, int64_t transB, float alpha, float beta, std::vector<int64_t> c) {
  const int64_t m = 3, k = 4, n = 5;
  std::vector<int64_t> a = transA ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k};
  std::vector<int64_t> b = transB ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n};
  std::vector<GradInput> ins = {GradInput::f32("a", a), GradInput::f32("b", b)};
  if (c != std::vector<int64_t>{-1})
    ins.push_back(GradInput::f32("c", c));
  return test::gradCheck("Gemm", ins,
                         {{"transA", ir::Attribute(transA)},
                          {"transB", ir::Attribute(transB)},
                          {"alpha", ir::Attribute(alpha)},
                          {"beta", ir::Attribute(beta)}});
}

TEST(GemmGrad, EveryTransposeCombination) {
  for (int64_t ta : {0, 1})
    for (int64_t tb : {0, 1}) {
      EXPECT_EQ(gemm(ta, tb, 1.f, 1.f, {3, 5}), "") << ta << tb;
      EXPECT_EQ(gemm(ta, tb, 0.5f, -2.f, {5}), "") << ta << tb;
      EXPECT_EQ(gemm(ta, tb, -1.5f, 1.f, {-1}), "") << ta << tb; // no C
    }
}

TEST(GemmGrad, BroadcastC) {
  EXPECT_EQ(gemm(0, 1, 1.f, 1.f, {5}), "");
  EXPECT_EQ(gemm(0, 1, 1.f, 0.25f, {1, 5}), "");
  EXPECT_EQ(gemm(1, 0, 2.f, 3.f, {3, 5}), "");
  EXPECT_EQ(gemm(0, 0, 1.f, 1.5f, {}), ""); // scalar
  EXPECT_EQ(gemm(1, 1, 1.f, -0.5f, {3, 1}), "");
  EXPECT_EQ(gemm(0, 0, 1.f, 2.f, {1}), "");
}

TEST(GemmGrad, EdgeSizes) {
  std::map<std::string, ir::Attribute> attrs = {{"transB", ir::Attribute(int64_t{1})}};
  EXPECT_EQ(test::gradCheck("Gemm",
                            {GradInput::f32("a", {1, 1}), GradInput::f32("b", {1, 1}),
                             GradInput::f32("c", {1})},
                            attrs),
            "");
  EXPECT_EQ(test::gradCheck("Gemm",
                            {GradInput::f32("a", {7, 1}), GradInput::f32("b", {3, 1}),
                             GradInput::f32("c", {7, 3})},
                            attrs),
            "");
}

// BatchNormTraining: the loss reads Y only (the other outputs are state). The gradient flows
// through the batch mean and variance, whose terms are of the same order as dY * scale * inv
// for these small batches: the tolerances below (rtol 1e-2, atol 1e-3) reject a rule that drops
// either of them (checked by the kernel tests against a reference too).
std::string batchNormTraining(std::vector<int64_t> x, float momentum = 0.9f, uint32_t seed = 1) {
  const int64_t c = x[1];
  GradCheckOptions opts;
  opts.lossOutputs = {0};
  opts.step = 5e-3;
  opts.rtol = 1e-2;
  opts.atol = 1e-3;
  opts.seed = seed;
  opts.maxElements = 64;
  return test::gradCheck("BatchNormTraining",
                         {GradInput::f32("x", x).range(-2.f, 2.f),
                          GradInput::f32("scale", {c}).range(0.5f, 1.5f), GradInput::f32("b", {c}),
                          GradInput::f32("mean", {c}).fixed(),
                          GradInput::f32("var", {c}).range(0.5f, 1.5f).fixed()},
                         {{"epsilon", ir::Attribute(1e-5f)}, {"momentum", ir::Attribute(momentum)}},
                         5, opts, "ai.dtc");
}

TEST(BatchNormTrainingGrad, TwoD) {
  EXPECT_EQ(batchNormTraining({6, 3}), "");
  EXPECT_EQ(batchNormTraining({2, 1}), "");
  EXPECT_EQ(batchNormTraining({5, 4}, 0.1f, 7), "");
}

TEST(BatchNormTrainingGrad, FourD) {
  EXPECT_EQ(batchNormTraining({3, 2, 3, 2}), "");
  EXPECT_EQ(batchNormTraining({2, 3, 2, 2}, 0.9f, 3), "");
  EXPECT_EQ(batchNormTraining({1, 2, 5}), ""); // N = 1, statistics over the spatial axis
  EXPECT_EQ(batchNormTraining({2, 2, 2, 1, 2}), "");
}

// Only the data inputs get gradients; a loss that reads a running statistic is an error naming
// the node.
TEST(BatchNormTrainingGrad, RunningStatisticsAreNotDifferentiable) {
  GradCheckOptions opts;
  opts.lossOutputs = {0, 1};
  std::string err = test::gradCheck(
      "BatchNormTraining",
      {GradInput::f32("x", {4, 2}), GradInput::f32("scale", {2}), GradInput::f32("b", {2}),
       GradInput::f32("mean", {2}).fixed(), GradInput::f32("var", {2}).range(0.5f, 1.f).fixed()},
      {{"epsilon", ir::Attribute(1e-5f)}, {"momentum", ir::Attribute(0.9f)}}, 5, opts, "ai.dtc");
  EXPECT_EQ(err, "autodiff: node 'op' (BatchNormTraining): the loss depends on output "
                 "running_mean, which is not differentiable (only Y is)");
}

std::string layerNorm(std::vector<int64_t> x, int64_t axis, std::vector<int64_t> scale,
                      std::vector<int64_t> bias, uint32_t seed = 1) {
  GradCheckOptions opts;
  opts.lossOutputs = {0};
  opts.step = 5e-3;
  opts.rtol = 1e-2;
  opts.atol = 1e-3;
  opts.seed = seed;
  opts.maxElements = 64;
  std::vector<GradInput> ins = {GradInput::f32("x", x).range(-2.f, 2.f),
                                GradInput::f32("scale", scale).range(0.5f, 1.5f)};
  if (!bias.empty())
    ins.push_back(GradInput::f32("b", bias));
  return test::gradCheck("LayerNormalization", ins,
                         {{"axis", ir::Attribute(axis)}, {"epsilon", ir::Attribute(1e-5f)}}, 1,
                         opts);
}

TEST(LayerNormGrad, LastAxis) {
  EXPECT_EQ(layerNorm({2, 3, 4}, -1, {4}, {4}), "");
  EXPECT_EQ(layerNorm({5, 6}, -1, {6}, {6}, 2), "");
  EXPECT_EQ(layerNorm({3, 5}, 1, {5}, {}), ""); // no B
  EXPECT_EQ(layerNorm({4, 2}, -1, {2}, {2}), "");
}

TEST(LayerNormGrad, AxisOneOfThreeD) {
  EXPECT_EQ(layerNorm({2, 3, 4}, 1, {3, 4}, {3, 4}), "");
  EXPECT_EQ(layerNorm({3, 2, 3}, 1, {3}, {1, 3}, 5), ""); // Scale and B broadcast
  EXPECT_EQ(layerNorm({2, 3, 4}, 0, {3, 4}, {4}), "");    // one row
}

TEST(LayerNormGrad, StatisticsOutputsAreNotDifferentiable) {
  GradCheckOptions opts;
  opts.lossOutputs = {0, 1};
  std::string err =
      test::gradCheck("LayerNormalization",
                      {GradInput::f32("x", {2, 3}), GradInput::f32("scale", {3})}, {}, 2, opts);
  EXPECT_EQ(err, "autodiff: node 'op' (LayerNormalization): the loss depends on output Mean, "
                 "which is not differentiable (only Y is)");
}

// Inference-mode BatchNormalization (frozen statistics): gradients of all five inputs.
TEST(BatchNormInferenceGrad, FrozenStatistics) {
  for (std::vector<int64_t> x : {std::vector<int64_t>{3, 2, 2, 2}, std::vector<int64_t>{4, 3},
                                 std::vector<int64_t>{2, 3, 5}}) {
    const int64_t c = x[1];
    EXPECT_EQ(
        test::gradCheck("BatchNormalization",
                        {GradInput::f32("x", x).range(-2.f, 2.f), GradInput::f32("scale", {c}),
                         GradInput::f32("b", {c}), GradInput::f32("mean", {c}),
                         GradInput::f32("var", {c}).range(0.5f, 1.5f)},
                        {{"epsilon", ir::Attribute(1e-3f)}}),
        "")
        << x.size();
  }
}

TEST(BatchNormInferenceGrad, TrainingModeNodeIsAnError) {
  GradCheckOptions opts;
  opts.lossOutputs = {0};
  std::string err = test::gradCheck("BatchNormalization",
                                    {GradInput::f32("x", {4, 2}), GradInput::f32("scale", {2}),
                                     GradInput::f32("b", {2}), GradInput::f32("mean", {2}).fixed(),
                                     GradInput::f32("var", {2}).fixed()},
                                    {{"training_mode", ir::Attribute(int64_t{1})}}, 1, opts);
  EXPECT_EQ(err, "autodiff: node 'op' (BatchNormalization): no gradient rule for "
                 "training_mode=1; the training-mode conversion pass replaces it by "
                 "ai.dtc.BatchNormTraining");
}

// Shape inference of the ai.dtc ops.
TEST(NNGradOps, Inference) {
  ir::Graph g;
  Diagnostics diags;
  auto input = [&](const std::string &name, std::vector<int64_t> shape) {
    ir::Value *v = g.createValue(name, {ir::DType::kFloat32, ir::Shape::ofStatic(shape)});
    g.addInput(v);
    return v;
  };
  ir::Value *x = input("x", {2, 3, 4, 4});
  ir::Value *s = input("s", {3}), *b = input("b", {3}), *m = input("m", {3}), *v = input("v", {3});
  ir::Node *bn = g.addNode("BatchNormTraining", {x, s, b, m, v}, {"y", "rm", "rv", "sm", "sv"},
                           "ai.dtc", "bn");
  ASSERT_TRUE(ops::inferNode(*bn, diags).isOk());
  EXPECT_EQ(bn->output(0)->shape().staticSizes(), (std::vector<int64_t>{2, 3, 4, 4}));
  for (size_t i = 1; i < 5; ++i)
    EXPECT_EQ(bn->output(i)->shape().staticSizes(), (std::vector<int64_t>{3}));
  ir::Value *bad = input("bad", {4});
  ir::Node *bn2 = g.addNode("BatchNormTraining", {x, bad, b, m, v}, {"y2"}, "ai.dtc", "bn2");
  EXPECT_EQ(ops::inferNode(*bn2, diags).message(),
            "node 'bn2' (BatchNormTraining): scale [4] must be [C] with C = 3 (X [2,3,4,4])");

  ir::Value *a = input("a", {5, 2, 3}), *w = input("w", {4, 3});
  ir::Node *mt = g.addNode("MatMulT", {a, w}, {"p"}, "ai.dtc", "mt");
  mt->setAttr("transB", ir::Attribute(int64_t{1}));
  ASSERT_TRUE(ops::inferNode(*mt, diags).isOk());
  EXPECT_EQ(mt->output(0)->shape().staticSizes(), (std::vector<int64_t>{5, 2, 4}));
  ir::Node *mt2 = g.addNode("MatMulT", {a, w}, {"p2"}, "ai.dtc", "mt2");
  EXPECT_EQ(ops::inferNode(*mt2, diags).message(),
            "node 'mt2' (MatMulT): inner dimensions do not match: A [5,2,3] (transA=0) has K=3, "
            "B [4,3] (transB=0) has K=4");

  ir::Value *ln = input("ln", {2, 3, 4}), *lns = input("lns", {4});
  ir::Node *lg = g.addNode("LayerNormGrad", {ln, ln, lns}, {"dx", "ds", "db"}, "ai.dtc", "lg");
  lg->setAttr("axis", ir::Attribute(int64_t{1}));
  ASSERT_TRUE(ops::inferNode(*lg, diags).isOk());
  EXPECT_EQ(lg->output(0)->shape().staticSizes(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(lg->output(1)->shape().staticSizes(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(lg->output(2)->shape().staticSizes(), (std::vector<int64_t>{3, 4}));
}

} // namespace
} // namespace dtc
