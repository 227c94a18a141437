// The autodiff pass itself: accumulation of a value used several times, broadcasting undone,
// errors for paths through ops without gradient rules, and the finite-difference harness.
#include "tests/unit/training/GradCheck.h"

#include "ops/OpDef.h"
#include "passes/Autodiff.h"
#include "tests/unit/ops/TestUtil.h"

#include <gtest/gtest.h>

namespace dtc {
namespace {

using test::GradInput;

TEST(Autodiff, MulWithBroadcastingMatchesFiniteDifferences) {
  EXPECT_EQ(test::gradCheck("Mul", {GradInput::f32("a", {2, 3, 4}), GradInput::f32("b", {3, 1})},
                            {}),
            "");
  EXPECT_EQ(test::gradCheck("Mul", {GradInput::f32("a", {4}), GradInput::f32("b", {2, 3, 4})}, {}),
            "");
}

TEST(Autodiff, ValueUsedTwiceAccumulates) {
  // y = x * x: dy/dx = 2x, from two contributions of the same node.
  // Both Mul operands are the same graph input.
  ir::Graph g;
  Diagnostics diags;
  ir::Value *xv = g.createValue("x", {ir::DType::kFloat32, ir::Shape::ofStatic({5})});
  g.addInput(xv);
  ir::Node *m = g.addNode("Mul", {xv, xv}, {"y"});
  ASSERT_TRUE(ops::inferNode(*m, diags).isOk());
  ir::Node *s = g.addNode("ReduceSum", {m->output(0)}, {"l"});
  s->setAttr("keepdims", ir::Attribute(int64_t{0}));
  ASSERT_TRUE(ops::inferNode(*s, diags).isOk());
  auto grads = passes::buildGradients(g, s->output(0), {xv}, diags);
  ASSERT_TRUE(grads) << grads.status().message();
  ASSERT_NE((*grads)[0], nullptr);
  // Two Mul contributions summed by one Add.
  EXPECT_EQ((*grads)[0]->producer()->opType(), "Add");
}

TEST(Autodiff, PathThroughOpWithoutRuleIsAnErrorNamingIt) {
  ir::Graph g;
  Diagnostics diags;
  ir::Value *w = g.createValue("w", {ir::DType::kFloat32, ir::Shape::ofStatic({3})});
  g.addInput(w);
  // A gradient op has no gradient rule of its own (no second derivatives): a path through one is
  // the error.
  ir::Node *h = g.addNode("SoftmaxGrad", {w, w}, {"h"}, ir::kDtcDomain, "act");
  h->setAttr("axis", ir::Attribute(int64_t{-1}));
  ASSERT_TRUE(ops::inferNode(*h, diags).isOk());
  ir::Node *m = g.addNode("Mul", {h->output(0), w}, {"m"}, "", "mul");
  ASSERT_TRUE(ops::inferNode(*m, diags).isOk());
  auto grads = passes::buildGradients(g, m->output(0), {w}, diags);
  ASSERT_FALSE(grads);
  EXPECT_EQ(grads.status().message(), "node 'act' (SoftmaxGrad): no gradient rule; the loss "
                                      "depends on 'w' -> act (SoftmaxGrad) through it");
}

TEST(Autodiff, FixedOperandGetsNoGradient) {
  // A fixed operand gets no gradient (and the checker asks for none).
  EXPECT_EQ(test::gradCheck("Mul", {GradInput::f32("a", {3}), GradInput::f32("b", {3}).fixed()},
                            {}),
            "");
}

} // namespace
} // namespace dtc
