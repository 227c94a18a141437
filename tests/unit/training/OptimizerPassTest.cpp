// The optimizer pass (passes/Optimizer.cpp) on a small trained graph: the update nodes, their
// zero-initialized state, the runtime-fed inputs, the StateUpdates and optimizerBegin it records,
// clipping and gradient accumulation, and configuration errors.
#include "compiler/ir/Verifier.h"
#include "ops/OpDef.h"
#include "passes/Autodiff.h"
#include "passes/Pass.h"
#include "tests/unit/ops/TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace dtc::passes {
// Declared in passes/Passes.h once the pass is registered there.
std::unique_ptr<Pass> createOptimizerPass();
} // namespace dtc::passes

namespace dtc {
namespace {

using ir::StateUpdate;

/// y = x @ w + b (trained), z = x + c (c does not reach the loss: no gradient);
/// loss = sum(y * y).
struct Trained {
  std::unique_ptr<ir::Graph> g;
  TrainingConfig cfg;
  ir::TrainingRoles &st; // the graph's training roles
  ir::Value *w = nullptr, *b = nullptr, *c = nullptr;
  size_t backwardNodes = 0;

  static std::unique_ptr<ir::Graph> parse() {
    auto parsed = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[2, 3] x) => (float[2, 4] y, float[2, 3] z)
<float[3, 4] w = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, float[4] b = {1, 2, 3, 4},
 float[3] c = {1, 2, 3}>
{
  t = MatMul(x, w)
  y = Add(t, b)
  z = Add(x, c)
}
)");
    EXPECT_TRUE(parsed.hasValue()) << parsed.status().message();
    return parsed.hasValue() ? std::move(*parsed) : std::make_unique<ir::Graph>();
  }

  Trained() : g(parse()), st(g->training()) {
    Diagnostics diags;
    ir::Node *sq = g->addNode("Mul", {g->findValue("y"), g->findValue("y")}, {"sq"});
    EXPECT_TRUE(ops::inferNode(*sq, diags).isOk());
    ir::Node *sum = g->addNode("ReduceSum", {sq->output(0)}, {"loss"});
    sum->setAttr("keepdims", ir::Attribute(int64_t{0}));
    EXPECT_TRUE(ops::inferNode(*sum, diags).isOk());
    g->addOutput(sum->output(0));
    w = g->findValue("w");
    b = g->findValue("b");
    c = g->findValue("c");
    st.loss = sum->output(0);
    st.parameters = {w, b, c};
    auto grads = passes::buildGradients(*g, st.loss, st.parameters, diags);
    EXPECT_TRUE(grads.hasValue()) << grads.status().message();
    st.gradients = *grads;
    EXPECT_NE(st.gradients[0], nullptr);
    EXPECT_NE(st.gradients[1], nullptr);
    EXPECT_EQ(st.gradients[2], nullptr);
    backwardNodes = g->numNodes();
  }

  Status run() {
    passes::PassContext ctx;
    ctx.training = &cfg;
    Status s = passes::createOptimizerPass()->run(*g, ctx);
    if (s.isOk())
      s = ir::verifyGraph(*g);
    return s;
  }

  std::vector<ir::Node *> nodesOf(const std::string &op) const {
    std::vector<ir::Node *> out;
    for (ir::Node *n : g->nodes())
      if (n->opType() == op)
        out.push_back(n);
    return out;
  }
  /// Position of `n` in the node order.
  size_t indexOf(const ir::Node *n) const {
    auto nodes = g->nodes();
    return static_cast<size_t>(std::find(nodes.begin(), nodes.end(), n) - nodes.begin());
  }
  bool hasUpdate(const ir::Value *state, const ir::Value *next) const {
    return std::any_of(st.updates.begin(), st.updates.end(), [&](const ir::StateUpdate &u) {
      return u.state == state && u.next == next;
    });
  }
};

/// Checks that `v` is a non-constant initializer of `like`'s type holding zeros.
void expectZeroState(const ir::Value *v, const ir::Value *like, const std::string &name) {
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->name(), name);
  EXPECT_TRUE(v->isParameter()) << name << " must be a non-constant initializer";
  EXPECT_EQ(v->type(), like->type()) << name;
  // Lazy zeros: nothing is materialized until something reads the bytes (issue 18).
  EXPECT_TRUE(v->initializer()->isZeros()) << name;
  EXPECT_FALSE(v->initializer()->isLoaded()) << name;
  auto values = v->initializer()->toDoubles();
  ASSERT_TRUE(values.hasValue());
  for (double x : *values)
    EXPECT_EQ(x, 0.0) << name;
}

TEST(OptimizerPass, SgdWithoutMomentumMakesOneUpdatePerTrainedParameter) {
  Trained t;
  t.cfg.optimizer = "sgd";
  t.cfg.weightDecay = 0.01f;
  ASSERT_EQ(test::errorOf(t.run()), "<ok>");
  auto sgd = t.nodesOf("SGD");
  ASSERT_EQ(sgd.size(), 2u); // w and b; c has no gradient: no update, no weight decay
  ASSERT_NE(t.st.lr, nullptr);
  ASSERT_NE(t.st.step, nullptr);
  EXPECT_EQ(t.st.lr->name(), ir::kLrInput);
  EXPECT_EQ(test::typeOf(*t.g, ir::kLrInput), "f32[]");
  EXPECT_EQ(test::typeOf(*t.g, ir::kStepInput), "i64[]");
  EXPECT_TRUE(t.st.lr->isGraphInput());
  EXPECT_TRUE(t.st.step->isGraphInput());
  for (size_t k = 0; k < 2; ++k) {
    ir::Node *n = sgd[k];
    ir::Value *p = k == 0 ? t.w : t.b;
    EXPECT_EQ(n->domain(), "ai.dtc");
    EXPECT_EQ(n->phase(), ir::Phase::kOptimizer);
    ASSERT_EQ(n->numInputs(), 3u);
    EXPECT_EQ(n->input(0), p);
    EXPECT_EQ(n->input(1), t.st.gradients[k]);
    EXPECT_EQ(n->input(2), t.st.lr);
    ASSERT_EQ(n->numOutputs(), 1u);
    EXPECT_EQ(n->output(0)->type(), p->type());
    EXPECT_FLOAT_EQ(n->attrFloat("weight_decay", -1.f), 0.01f);
    EXPECT_EQ(n->attrFloat("momentum", -1.f), 0.f);
    EXPECT_TRUE(t.hasUpdate(p, n->output(0)));
  }
  EXPECT_EQ(t.st.updates.size(), 2u);
  EXPECT_EQ(t.st.optimizerBegin, sgd[0]);
  EXPECT_EQ(t.indexOf(sgd[0]), t.backwardNodes); // appended after the backward graph
  ASSERT_EQ(t.st.optimizerState.size(), 3u);
  for (const auto &s : t.st.optimizerState)
    EXPECT_TRUE(s.empty());
}

TEST(OptimizerPass, SgdMomentumCreatesMomentumBuffers) {
  Trained t;
  t.cfg.optimizer = "sgd";
  t.cfg.momentum = 0.9f;
  t.cfg.nesterov = true;
  ASSERT_EQ(test::errorOf(t.run()), "<ok>");
  auto sgd = t.nodesOf("SGD");
  ASSERT_EQ(sgd.size(), 2u);
  ASSERT_EQ(t.st.optimizerState[0].size(), 1u);
  ASSERT_EQ(t.st.optimizerState[1].size(), 1u);
  EXPECT_TRUE(t.st.optimizerState[2].empty());
  expectZeroState(t.st.optimizerState[0][0], t.w, "w.momentum");
  expectZeroState(t.st.optimizerState[1][0], t.b, "b.momentum");
  EXPECT_EQ(t.g->findValue("c.momentum"), nullptr);
  for (size_t k = 0; k < 2; ++k) {
    ir::Node *n = sgd[k];
    ir::Value *buf = t.st.optimizerState[k][0];
    ASSERT_EQ(n->numInputs(), 4u);
    EXPECT_EQ(n->input(3), buf);
    ASSERT_EQ(n->numOutputs(), 2u);
    EXPECT_EQ(n->attrInt("nesterov", 0), 1);
    EXPECT_FLOAT_EQ(n->attrFloat("momentum", 0.f), 0.9f);
    EXPECT_TRUE(t.hasUpdate(k == 0 ? t.w : t.b, n->output(0)));
    EXPECT_TRUE(t.hasUpdate(buf, n->output(1)));
  }
  EXPECT_EQ(t.st.updates.size(), 4u);
}

TEST(OptimizerPass, AdamAndAdamWCreateBothMoments) {
  for (const char *opt : {"adam", "adamw"}) {
    Trained t;
    t.cfg.optimizer = opt;
    t.cfg.beta1 = 0.8f;
    t.cfg.beta2 = 0.99f;
    t.cfg.eps = 1e-6f;
    t.cfg.weightDecay = 0.05f;
    ASSERT_EQ(test::errorOf(t.run()), "<ok>") << opt;
    const std::string op = std::string(opt) == "adam" ? "Adam" : "AdamW";
    auto nodes = t.nodesOf(op);
    ASSERT_EQ(nodes.size(), 2u) << opt;
    for (size_t k = 0; k < 2; ++k) {
      ir::Node *n = nodes[k];
      ir::Value *p = k == 0 ? t.w : t.b;
      ASSERT_EQ(t.st.optimizerState[k].size(), 2u);
      ir::Value *m = t.st.optimizerState[k][0], *v = t.st.optimizerState[k][1];
      expectZeroState(m, p, p->name() + ".exp_avg");
      expectZeroState(v, p, p->name() + ".exp_avg_sq");
      ASSERT_EQ(n->numInputs(), 6u);
      EXPECT_EQ(n->input(0), p);
      EXPECT_EQ(n->input(1), t.st.gradients[k]);
      EXPECT_EQ(n->input(2), t.st.lr);
      EXPECT_EQ(n->input(3), t.st.step);
      EXPECT_EQ(n->input(4), m);
      EXPECT_EQ(n->input(5), v);
      ASSERT_EQ(n->numOutputs(), 3u);
      EXPECT_TRUE(t.hasUpdate(p, n->output(0)));
      EXPECT_TRUE(t.hasUpdate(m, n->output(1)));
      EXPECT_TRUE(t.hasUpdate(v, n->output(2)));
      EXPECT_FLOAT_EQ(n->attrFloat("beta1", 0.f), 0.8f);
      EXPECT_FLOAT_EQ(n->attrFloat("beta2", 0.f), 0.99f);
      EXPECT_FLOAT_EQ(n->attrFloat("epsilon", 0.f), 1e-6f);
      EXPECT_FLOAT_EQ(n->attrFloat("weight_decay", 0.f), 0.05f);
    }
    EXPECT_EQ(t.st.updates.size(), 6u);
    EXPECT_TRUE(t.st.optimizerState[2].empty());
    EXPECT_EQ(t.st.optimizerBegin, nodes[0]);
  }
}

TEST(OptimizerPass, ClippingComputesOneScaleForEveryUpdate) {
  Trained t;
  t.cfg.optimizer = "adam";
  t.cfg.clipGradNorm = 2.5f;
  ASSERT_EQ(test::errorOf(t.run()), "<ok>");
  auto sums = t.nodesOf("SumSquares"), clips = t.nodesOf("ClipGradNormScale");
  ASSERT_EQ(sums.size(), 1u);
  ASSERT_EQ(clips.size(), 1u);
  ASSERT_EQ(sums[0]->numInputs(), 2u);
  EXPECT_EQ(sums[0]->input(0), t.st.gradients[0]);
  EXPECT_EQ(sums[0]->input(1), t.st.gradients[1]);
  EXPECT_EQ(clips[0]->input(0), sums[0]->output(0));
  EXPECT_FLOAT_EQ(clips[0]->attrFloat("max_norm", 0.f), 2.5f);
  EXPECT_FLOAT_EQ(clips[0]->attrFloat("input_scale", 0.f), 1.f);
  EXPECT_EQ(test::typeOf(*t.g, clips[0]->output(0)->name()), "f32[]");
  EXPECT_EQ(sums[0]->phase(), ir::Phase::kOptimizer);
  EXPECT_EQ(t.st.optimizerBegin, sums[0]);
  for (ir::Node *n : t.nodesOf("Adam")) {
    ASSERT_EQ(n->numInputs(), 7u);
    EXPECT_EQ(n->input(6), clips[0]->output(0));
    EXPECT_EQ(n->input(1)->producer() ? n->input(1)->producer()->phase() : ir::Phase::kBackward,
              ir::Phase::kBackward); // the gradient itself, not a scaled copy
  }
  // SGD without momentum: the scale is input 4, input 3 (momentum) omitted.
  Trained s;
  s.cfg.clipGradNorm = 1.f;
  ASSERT_EQ(test::errorOf(s.run()), "<ok>");
  for (ir::Node *n : s.nodesOf("SGD")) {
    ASSERT_EQ(n->numInputs(), 5u);
    EXPECT_EQ(n->input(3), nullptr);
    EXPECT_EQ(n->input(4), s.nodesOf("ClipGradNormScale")[0]->output(0));
  }
}

TEST(OptimizerPass, GradientAccumulationSumsMicroBatchesAndResets) {
  Trained t;
  t.cfg.optimizer = "sgd";
  t.cfg.momentum = 0.5f;
  t.cfg.gradAccumSteps = 4;
  t.cfg.clipGradNorm = 1.f;
  ASSERT_EQ(test::errorOf(t.run()), "<ok>");
  auto adds = t.nodesOf("Add");
  auto sgd = t.nodesOf("SGD");
  auto zeros = t.nodesOf("ZeroGradient");
  ASSERT_EQ(sgd.size(), 2u);
  ASSERT_EQ(zeros.size(), 2u);
  ASSERT_NE(t.st.optimizerBegin, nullptr);
  const size_t begin = t.indexOf(t.st.optimizerBegin);
  EXPECT_EQ(t.st.optimizerBegin->opType(), "SumSquares");
  auto clip = t.nodesOf("ClipGradNormScale");
  ASSERT_EQ(clip.size(), 1u);
  EXPECT_FLOAT_EQ(clip[0]->attrFloat("input_scale", 0.f), 0.25f);
  for (size_t k = 0; k < 2; ++k) {
    ir::Value *p = k == 0 ? t.w : t.b;
    ASSERT_EQ(t.st.optimizerState[k].size(), 2u); // momentum, then the accumulator
    ir::Value *acc = t.st.optimizerState[k][1];
    expectZeroState(acc, p, p->name() + ".grad_accum");
    // A_next = Add(A, g) in the backward phase, before optimizerBegin.
    ASSERT_EQ(acc->uses().size(), 1u);
    ir::Node *add = acc->uses()[0].node;
    EXPECT_EQ(add->opType(), "Add");
    EXPECT_EQ(add->phase(), ir::Phase::kBackward);
    EXPECT_LT(t.indexOf(add), begin);
    EXPECT_EQ(add->input(1), t.st.gradients[k]);
    EXPECT_TRUE(t.hasUpdate(acc, add->output(0)));
    // The update reads the accumulated gradient; the reset follows it.
    EXPECT_EQ(sgd[k]->input(1), add->output(0));
    EXPECT_EQ(t.nodesOf("SumSquares")[0]->input(k), add->output(0));
    ir::Node *z = zeros[k];
    EXPECT_EQ(z->phase(), ir::Phase::kOptimizer);
    EXPECT_EQ(z->input(0), add->output(0));
    EXPECT_EQ(z->input(1), sgd[k]->output(0));
    EXPECT_GT(t.indexOf(z), t.indexOf(sgd[k]));
    EXPECT_TRUE(t.hasUpdate(acc, z->output(0)));
  }
  EXPECT_GE(adds.size(), 2u);
  // 2 parameters x (param, momentum, accumulator twice).
  EXPECT_EQ(t.st.updates.size(), 8u);
}

TEST(OptimizerPass, GradientAccumulationWithoutClippingScalesByOneOverK) {
  Trained t;
  t.cfg.optimizer = "adamw";
  t.cfg.gradAccumSteps = 8;
  ASSERT_EQ(test::errorOf(t.run()), "<ok>");
  auto nodes = t.nodesOf("AdamW");
  ASSERT_EQ(nodes.size(), 2u);
  ir::Value *scale = nodes[0]->input(6);
  ASSERT_NE(scale, nullptr);
  EXPECT_EQ(nodes[1]->input(6), scale);
  ASSERT_TRUE(scale->isConstant());
  auto v = scale->initializer()->toDoubles();
  ASSERT_TRUE(v.hasValue());
  ASSERT_EQ(v->size(), 1u);
  EXPECT_EQ((*v)[0], 0.125);
  EXPECT_EQ(test::typeOf(*t.g, scale->name()), "f32[]");
  EXPECT_EQ(t.st.optimizerBegin, nodes[0]);
}

TEST(OptimizerPass, ReusesExistingRuntimeInputs) {
  Trained t;
  ir::Value *lr = t.g->createValue(ir::kLrInput, test::ty("f32", {}));
  t.g->addInput(lr);
  ASSERT_EQ(test::errorOf(t.run()), "<ok>");
  EXPECT_EQ(t.st.lr, lr);
  EXPECT_EQ(t.nodesOf("SGD")[0]->input(2), lr);
}

TEST(OptimizerPass, ErrorsNameTheFlag) {
  auto errorFor = [](auto configure) {
    Trained t;
    configure(t.cfg);
    return test::errorOf(t.run());
  };
  EXPECT_EQ(errorFor([](TrainingConfig &c) { c.optimizer = "rmsprop"; }),
            "--optimizer: unknown optimizer 'rmsprop'; expected sgd, adam or adamw");
  EXPECT_EQ(errorFor([](TrainingConfig &c) { c.nesterov = true; }),
            "--nesterov: Nesterov momentum needs --momentum > 0");
  EXPECT_EQ(errorFor([](TrainingConfig &c) { c.gradAccumSteps = 0; }),
            "--grad-accum-steps: must be >= 1, got 0");
  EXPECT_EQ(errorFor([](TrainingConfig &c) {
              c.optimizer = "adam";
              c.beta2 = 1.f;
            }),
            "--beta2: must be in [0, 1), got 1.000000");
}

TEST(OptimizerPass, ErrorsOnAReservedNameAndWithoutAutodiff) {
  Trained t;
  ir::Value *bad = t.g->createValue(ir::kLrInput, test::ty("f32", {"2"}));
  t.g->addInput(bad);
  EXPECT_EQ(test::errorOf(t.run()),
            "value 'dtc::lr': the name is reserved for the runtime-fed f32[] graph input; the "
            "model uses it for a f32[2] input");

  Trained u;
  u.st.gradients.clear();
  EXPECT_EQ(test::errorOf(u.run()),
            "optimizer: autodiff must run first: 3 trained parameters but 0 gradients");

  Trained twice;
  ASSERT_EQ(test::errorOf(twice.run()), "<ok>");
  EXPECT_EQ(test::errorOf(twice.run()), "optimizer: the graph already has an optimizer step");
}

} // namespace
} // namespace dtc
