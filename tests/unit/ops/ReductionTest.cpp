// Unit tests of the reduction family (ops/reduction/): ReduceMean/Sum/Max axes forms per opset
// and their normalization, reduce shape inference (constant, absent and run-time axes), and
// SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss shapes and errors.
#include "compiler/ir/Graph.h"
#include "ops/OpDef.h"
#include "passes/Passes.h"
#include "tests/unit/ops/TestUtil.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>

using namespace dtc;
using namespace dtc::ir;

using test::errorOf;
using test::OneOp;
using test::ty;

namespace {

/// Runs `op` on x : f32[N,3,4] with the given axes (nullopt: no axes input) and attributes.
std::string reduceType(const std::string &op, std::optional<std::vector<int64_t>> axes,
                       int64_t keepdims = 1, int64_t noop = 0,
                       std::vector<std::string> shape = {"N", "3", "4"}) {
  OneOp t(18);
  std::vector<Value *> ins = {t.in("x", ty("f32", shape))};
  if (axes)
    ins.push_back(t.axes(*axes));
  Node *n = t.op(op, ins);
  n->setAttr("keepdims", keepdims);
  if (noop)
    n->setAttr("noop_with_empty_axes", noop);
  Status s = t.run();
  return s.isOk() ? t.type("y") : s.message();
}

} // namespace

// --- Reduce inference ------------------------------------------------------------------------

TEST(ReductionReduce, ConstantAxes) {
  for (const char *op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd",
                         "ReduceL1", "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare"}) {
    EXPECT_EQ(reduceType(op, std::vector<int64_t>{1}), "f32[N,1,4]") << op;
    EXPECT_EQ(reduceType(op, std::vector<int64_t>{1}, 0), "f32[N,4]") << op;
    EXPECT_EQ(reduceType(op, std::vector<int64_t>{-1, 0}, 0), "f32[3]") << op;
    EXPECT_EQ(reduceType(op, std::vector<int64_t>{-1}), "f32[N,3,1]") << op;
  }
}

TEST(ReductionReduce, NoAxesReducesAllUnlessNoop) {
  EXPECT_EQ(reduceType("ReduceMean", std::nullopt), "f32[1,1,1]");
  EXPECT_EQ(reduceType("ReduceMean", std::nullopt, 0), "f32[]");
  EXPECT_EQ(reduceType("ReduceSum", std::vector<int64_t>{}, 0), "f32[]");
  EXPECT_EQ(reduceType("ReduceMax", std::nullopt, 1, 1), "f32[N,3,4]");
  EXPECT_EQ(reduceType("ReduceSum", std::vector<int64_t>{}, 0, 1), "f32[N,3,4]");
}

TEST(ReductionReduce, RunTimeAxes) {
  OneOp t(18);
  Node *n =
      t.op("ReduceMean", {t.in("x", ty("f32", {"N", "1", "4"})), t.in("a", ty("i64", {"2"}))});
  ASSERT_TRUE(t.run().isOk());
  EXPECT_EQ(t.type("y"), "f32[?,1,?]"); // keepdims: rank kept, 1 stays 1
  n->setAttr("keepdims", int64_t{0});
  ASSERT_TRUE(t.infer().isOk());
  EXPECT_EQ(t.type("y"), "f32[?]"); // rank 3 - len(axes) 2

  OneOp u(18);
  u.op("ReduceSum", {u.in("x", ty("f32", {"N", "4"})), u.in("a", ty("i64", {"K"}))})
      ->setAttr("keepdims", int64_t{0});
  ASSERT_TRUE(u.run().isOk());
  EXPECT_EQ(u.type("y"), "f32[*]");
}

TEST(ReductionReduce, UnknownRankInput) {
  OneOp t(18);
  Value *x = t.g->createValue("x", TensorType{DType::kFloat32, Shape::unknownRank()});
  t.g->addInput(x);
  Node *n = t.op("ReduceMax", {x, t.axes({0})});
  ASSERT_TRUE(t.run().isOk());
  EXPECT_EQ(t.type("y"), "f32[*]");
  n->truncateInputs(1);
  n->setAttr("keepdims", int64_t{0});
  ASSERT_TRUE(t.infer().isOk());
  EXPECT_EQ(t.type("y"), "f32[]"); // reduce all without keepdims: a scalar whatever the rank
}

TEST(ReductionReduce, Errors) {
  EXPECT_EQ(reduceType("ReduceMean", std::vector<int64_t>{1, -2}),
            "node 'n' (ReduceMean): axes names axis 1 more than once");
  EXPECT_NE(reduceType("ReduceSum", std::vector<int64_t>{3}).find("node 'n' (ReduceSum): axes 3"),
            std::string::npos)
      << reduceType("ReduceSum", std::vector<int64_t>{3});
  OneOp t(18);
  t.op("ReduceMean", {t.in("x", ty("f32", {"N"})), t.in("a", ty("i32", {"1"}))});
  EXPECT_NE(errorOf(t.run()).find("input 1 ('axes', value 'a') has type i32; allowed: i64"),
            std::string::npos);
  OneOp m(18);
  m.op("ReduceMean", {m.in("x", ty("f32", {"N"})), m.in("a", ty("i64", {"1", "1"}))});
  EXPECT_EQ(errorOf(m.run()), "node 'n' (ReduceMean): axes must be a 1-D tensor, got shape [1,1]");
  OneOp b(18); // bool only from ReduceMax-20
  b.op("ReduceMean", {b.in("x", ty("bool", {"N"}))});
  EXPECT_NE(errorOf(b.run()).find("has type bool"), std::string::npos);
  OneOp ok(20);
  ok.op("ReduceMax", {ok.in("x", ty("bool", {"N", "2"}))})->setAttr("keepdims", int64_t{0});
  ASSERT_TRUE(ok.run().isOk());
  EXPECT_EQ(ok.type("y"), "bool[]");
}

// --- Reduce normalization --------------------------------------------------------------------

TEST(ReductionReduce, AxesAttributeBecomesInput) {
  struct Case {
    const char *op;
    int opset;
  } cases[] = {{"ReduceMean", 11},     {"ReduceMean", 13},     {"ReduceMean", 17}, {"ReduceMax", 7},
               {"ReduceMax", 17},      {"ReduceSum", 7},       {"ReduceSum", 12},  {"ReduceMin", 7},
               {"ReduceMin", 17},      {"ReduceProd", 13},     {"ReduceL1", 11},   {"ReduceL2", 17},
               {"ReduceLogSumExp", 7}, {"ReduceSumSquare", 13}};
  for (const Case &c : cases) {
    OneOp t(c.opset);
    Node *n = t.op(c.op, {t.in("x", ty("f32", {"N", "3", "4"}))});
    n->setAttr("axes", std::vector<int64_t>{-1, 1});
    n->setAttr("keepdims", int64_t{0});
    ASSERT_TRUE(t.run().isOk()) << c.op << c.opset << ": " << errorOf(t.run());
    EXPECT_FALSE(n->hasAttr("axes"));
    ASSERT_EQ(n->numInputs(), 2u);
    ASSERT_TRUE(n->input(1)->isConstant());
    EXPECT_EQ(n->input(1)->type().str(), "i64[2]");
    EXPECT_EQ(*n->input(1)->initializer()->toInt64s(), (std::vector<int64_t>{-1, 1}));
    EXPECT_EQ(t.type("y"), "f32[N]") << c.op << c.opset;
    // The result is the canonical form.
    EXPECT_TRUE(ops::checkForm(*n, ops::lookupOp("", c.op)->canonical(), 21).isOk());
  }
  OneOp none(13); // no axes attribute: no input, reduce everything
  Node *n = none.op("ReduceMean", {none.in("x", ty("f32", {"N", "3"}))});
  ASSERT_TRUE(none.run().isOk());
  EXPECT_EQ(n->numInputs(), 1u);
  EXPECT_EQ(none.type("y"), "f32[1,1]");
}

TEST(ReductionReduce, InputFormKeptFromItsOpset) {
  for (auto [op, opset] : {std::pair<const char *, int>{"ReduceMean", 18},
                           {"ReduceSum", 13},
                           {"ReduceMax", 21},
                           {"ReduceMin", 18},
                           {"ReduceProd", 18},
                           {"ReduceL1", 21},
                           {"ReduceL2", 18},
                           {"ReduceLogSumExp", 18},
                           {"ReduceSumSquare", 20}}) {
    OneOp t(opset);
    Value *a = t.axes({0});
    Node *n = t.op(op, {t.in("x", ty("f32", {"N", "3"})), a});
    ASSERT_TRUE(t.run().isOk()) << op;
    EXPECT_EQ(n->input(1), a);
    EXPECT_EQ(t.type("y"), "f32[1,3]");
  }
}

TEST(ReductionReduce, FormNotMatchingOpsetIsRejected) {
  OneOp in13(13);
  in13.op("ReduceMean", {in13.in("x", ty("f32", {"N"})), in13.axes({0})});
  EXPECT_EQ(errorOf(in13.normalize()),
            "node 'n' (ReduceMean): expects at most 1 inputs in opset 13, got 2");
  OneOp attr18(18);
  attr18.op("ReduceMean", {attr18.in("x", ty("f32", {"N"}))})
      ->setAttr("axes", std::vector<int64_t>{0});
  EXPECT_EQ(errorOf(attr18.normalize()),
            "node 'n' (ReduceMean): attribute 'axes' is not allowed for ReduceMean in opset 18");
  OneOp sum12(12);
  sum12.op("ReduceSum", {sum12.in("x", ty("f32", {"N"}))})
      ->setAttr("noop_with_empty_axes", int64_t{1});
  EXPECT_EQ(errorOf(sum12.normalize()), "node 'n' (ReduceSum): attribute 'noop_with_empty_axes' "
                                        "is not allowed for ReduceSum in opset 12");
  OneOp sum13(13);
  sum13.op("ReduceSum", {sum13.in("x", ty("f32", {"N"}))})
      ->setAttr("axes", std::vector<int64_t>{0});
  EXPECT_EQ(errorOf(sum13.normalize()),
            "node 'n' (ReduceSum): attribute 'axes' is not allowed for ReduceSum in opset 13");
}

// --- Losses ----------------------------------------------------------------------------------

TEST(ReductionLoss, SoftmaxCrossEntropyShapes) {
  OneOp t(13);
  t.op("SoftmaxCrossEntropyLoss",
       {t.in("scores", ty("f32", {"N", "10"})), t.in("labels", ty("i64", {"N"}))},
       {"loss", "log_prob"});
  ASSERT_TRUE(t.run().isOk()) << errorOf(t.run());
  EXPECT_EQ(t.type("loss"), "f32[]");
  EXPECT_EQ(t.type("log_prob"), "f32[N,10]");

  OneOp none(12);
  Node *n = none.op("SoftmaxCrossEntropyLoss",
                    {none.in("scores", ty("f64", {"N", "5", "H", "?"})),
                     none.in("labels", ty("i32", {"?", "?", "7"})), none.in("w", ty("f64", {"5"}))},
                    {"loss"});
  n->setAttr("reduction", "none");
  n->setAttr("ignore_index", int64_t{-100});
  ASSERT_TRUE(none.run().isOk()) << errorOf(none.run());
  EXPECT_EQ(none.type("loss"), "f64[N,H,7]"); // dims merged from labels and scores

  OneOp sum(13);
  sum.op("NegativeLogLikelihoodLoss",
         {sum.in("x", ty("bf16", {"N", "3", "8"})), sum.in("t", ty("i64", {"N", "8"}))})
      ->setAttr("reduction", "sum");
  ASSERT_TRUE(sum.run().isOk()) << errorOf(sum.run());
  EXPECT_EQ(sum.type("y"), "bf16[]");
}

TEST(ReductionLoss, ExistFromOpset12) {
  for (const char *op : {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"}) {
    const ops::OpDef *d = ops::lookupOp("", op);
    EXPECT_EQ(d->versionFor(11), nullptr);
    ASSERT_NE(d->versionFor(12), nullptr);
    EXPECT_EQ(d->canonical().since, 13);
  }
  OneOp nll(13);
  nll.op("NegativeLogLikelihoodLoss",
         {nll.in("x", ty("f32", {"N", "3"})), nll.in("t", ty("i64", {"N"}))}, {"loss", "extra"});
  EXPECT_EQ(errorOf(nll.normalize()),
            "node 'n' (NegativeLogLikelihoodLoss): has 2 outputs; expects 1 to 1 in opset 13");
}

TEST(ReductionLoss, Errors) {
  auto sce = [](TensorType scores, TensorType labels, std::optional<TensorType> w = std::nullopt,
                const std::string &reduction = "mean") {
    OneOp t(13);
    std::vector<Value *> ins = {t.in("s", scores), t.in("l", labels)};
    if (w)
      ins.push_back(t.in("w", *w));
    t.op("SoftmaxCrossEntropyLoss", ins)->setAttr("reduction", reduction);
    return errorOf(t.run());
  };
  const std::string where = "node 'n' (SoftmaxCrossEntropyLoss): ";
  EXPECT_EQ(sce(ty("f32", {"N"}), ty("i64", {"N"})),
            where + "scores must have shape (N, C, d1..dk), got [N]");
  EXPECT_EQ(sce(ty("f32", {"N", "3", "4"}), ty("i64", {"N"})),
            where + "labels must have shape (N, d1..dk) for scores [N,3,4], got [N]");
  EXPECT_EQ(sce(ty("f32", {"N", "3", "4"}), ty("i64", {"N", "5"})),
            where + "labels [N,5] does not match scores [N,3,4] at labels axis 1: 5 vs 4");
  EXPECT_EQ(sce(ty("f32", {"8", "3"}), ty("i64", {"2"})),
            where + "labels [2] does not match scores [8,3] at labels axis 0: 2 vs 8");
  EXPECT_EQ(sce(ty("f32", {"N", "3"}), ty("i64", {"N"}), ty("f32", {"4"})),
            where + "weights [4] do not match the class axis of scores [N,3]: 4 vs 3");
  EXPECT_EQ(sce(ty("f32", {"N", "3"}), ty("i64", {"N"}), ty("f32", {"3", "1"})),
            where + "weights must have shape (C), got [3,1]");
  EXPECT_EQ(sce(ty("f32", {"N", "3"}), ty("i64", {"N"}), std::nullopt, "avg"),
            where + "attribute 'reduction' must be \"none\", \"mean\" or \"sum\", got \"avg\"");
  EXPECT_NE(sce(ty("f32", {"N", "3"}), ty("f32", {"N"})).find("has type f32; allowed: i32, i64"),
            std::string::npos);
  EXPECT_NE(sce(ty("i64", {"N", "3"}), ty("i64", {"N"})).find("has type i64; allowed"),
            std::string::npos);

  OneOp nll(13);
  nll.op("NegativeLogLikelihoodLoss",
         {nll.in("x", ty("f32", {"N", "3", "4"})), nll.in("t", ty("i64", {"N", "4", "1"}))});
  EXPECT_EQ(errorOf(nll.run()), "node 'n' (NegativeLogLikelihoodLoss): target must have shape "
                                "(N, d1..dk) for input [N,3,4], got [N,4,1]");
}

// --- Folding of the reductions added for today's exporters ----------------------------------

TEST(ReductionReduce, FoldMinProdNormsLogSumExpSumSquare) {
  struct Case {
    const char *op;
    std::vector<double> overAxis1; // x = [[1, -2, 3], [0.5, 4, -1]] reduced over axis 1
  };
  const Case cases[] = {
      {"ReduceMin", {-2, -1}},
      {"ReduceProd", {-6, -2}},
      {"ReduceL1", {6, 5.5}},
      {"ReduceL2", {std::sqrt(14.0), std::sqrt(17.25)}},
      {"ReduceLogSumExp",
       {std::log(std::exp(1.0) + std::exp(-2.0) + std::exp(3.0)),
        std::log(std::exp(0.5) + std::exp(4.0) + std::exp(-1.0))}},
      {"ReduceSumSquare", {14, 17.25}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.op);
    Graph g;
    auto x = TensorData::fromFloats("x", {2, 3}, {1.f, -2.f, 3.f, 0.5f, 4.f, -1.f});
    auto a = TensorData::fromInt64s("a", {1}, {-1});
    Node *n = g.addNode(c.op, {g.addConstant("x", x), g.addConstant("a", a)}, {"y"}, "", "n");
    n->setAttr("keepdims", int64_t{0});
    ops::FoldContext ctx(*n, {x, a});
    auto r = ops::lookupOp("", c.op)->fold(ctx);
    ASSERT_TRUE(r.hasValue()) << r.status().message();
    EXPECT_EQ((*r)[0]->dims(), (std::vector<int64_t>{2}));
    std::vector<double> got = *(*r)[0]->toDoubles();
    for (size_t i = 0; i < 2; ++i)
      EXPECT_NEAR(got[i], c.overAxis1[i], 1e-5) << i;
    // Every axis (axes omitted), keepdims 1.
    Node *all = g.addNode(c.op, {n->input(0)}, {"z"}, "", "all");
    ops::FoldContext allCtx(*all, {x});
    auto r2 = ops::lookupOp("", c.op)->fold(allCtx);
    ASSERT_TRUE(r2.hasValue()) << r2.status().message();
    EXPECT_EQ((*r2)[0]->dims(), (std::vector<int64_t>{1, 1}));
  }
}
