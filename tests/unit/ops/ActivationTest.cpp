// Unit tests of the activation family (ops/activation/): forms per opset, normalization of the
// older forms (Clip attributes, Dropout ratio, pre-13 Softmax/LogSoftmax), shape and type
// inference with symbolic dims, Cast/Identity folding, and every error.
#include "ops/activation/Activation.h"
#include "compiler/ir/Graph.h"
#include "ops/OpDef.h"
#include "passes/Passes.h"
#include "tests/unit/ops/TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace dtc;
using namespace dtc::ir;

using test::errorOf;
using test::OneOp;
using test::ty;

namespace {

Expected<std::vector<TensorDataPtr>> fold(const Node &n, std::vector<TensorDataPtr> inputs) {
  const ops::OpDef *def = ops::lookupOp("", n.opType());
  ops::FoldContext ctx(n, std::move(inputs));
  return def->fold(ctx);
}

TensorDataPtr f32Data(std::vector<int64_t> dims, std::vector<float> v) {
  return TensorData::fromFloats("c", std::move(dims), v);
}

std::vector<double> doubles(const TensorDataPtr &t) { return *ops::elementsAsDoubles(*t); }

} // namespace

// --- unary ops --------------------------------------------------------------------------------

TEST(ActivationUnary, SameShapeAndTypeWithSymbolicDims) {
  for (const char *op : {"Sqrt",      "Exp",  "Log",       "Neg",      "Abs",      "Reciprocal",
                         "Erf",       "Relu", "LeakyRelu", "Sigmoid",  "Tanh",     "HardSigmoid",
                         "HardSwish", "Gelu", "Identity",  "Softplus", "Softsign", "Elu",
                         "Selu",      "Celu", "Mish",      "Sin",      "Cos"}) {
    OneOp t(21);
    t.op(op, {t.in("x", ty("f32", {"N", "3", "?"}))});
    ASSERT_TRUE(t.run().isOk()) << op << ": " << errorOf(t.run());
    EXPECT_EQ(t.type("y"), "f32[N,3,?]") << op;
  }
}

TEST(ActivationUnary, TypeConstraintsOfCanonicalForm) {
  OneOp t(21);
  t.op("Sqrt", {t.in("x", ty("i64", {"N"}))});
  EXPECT_EQ(errorOf(t.run()), "node 'n' (Sqrt): input 0 ('X', value 'x') has type i64; "
                              "allowed: f32, f16, f64, bf16");
  OneOp r(14); // Relu-14 admits signed integers
  r.op("Relu", {r.in("x", ty("i32", {"2"}))});
  ASSERT_TRUE(r.run().isOk());
  EXPECT_EQ(r.type("y"), "i32[2]");
  OneOp a(13); // Abs admits unsigned integers, Neg does not
  a.op("Neg", {a.in("x", ty("u8", {"2"}))});
  EXPECT_NE(errorOf(a.run()).find("has type u8; allowed"), std::string::npos);
  OneOp h(14);
  h.op("HardSwish", {h.in("x", ty("bf16", {"2"}))});
  EXPECT_NE(errorOf(h.run()).find("has type bf16; allowed: f32, f16, f64"), std::string::npos);
}

TEST(ActivationUnary, OpsStartAtTheirFirstOpset) {
  struct Case {
    const char *op;
    int first;
  } cases[] = {{"Erf", 9},   {"HardSwish", 14}, {"Gelu", 20}, {"Sqrt", 6},
               {"Relu", 6},  {"Elu", 6},        {"Selu", 6},  {"Celu", 12},
               {"Mish", 18}, {"Sin", 7},        {"Cos", 7},   {"PRelu", 7}};
  for (const Case &c : cases) {
    const ops::OpDef *d = ops::lookupOp("", c.op);
    ASSERT_NE(d, nullptr) << c.op;
    EXPECT_EQ(d->versionFor(c.first - 1), nullptr) << c.op;
    ASSERT_NE(d->versionFor(c.first), nullptr) << c.op;
    EXPECT_EQ(d->versionFor(c.first)->since, c.first) << c.op;
  }
  OneOp t(8);
  t.op("Erf", {t.in("x", ty("f32", {"2"}))});
  EXPECT_EQ(errorOf(t.normalize()), "node 'n' (Erf): not in opset 8");
}

TEST(ActivationUnary, GeluApproximate) {
  OneOp t(20);
  t.op("Gelu", {t.in("x", ty("f16", {"N", "8"}))})->setAttr("approximate", "tanh");
  ASSERT_TRUE(t.run().isOk());
  EXPECT_EQ(t.type("y"), "f16[N,8]");
  OneOp bad(20);
  bad.op("Gelu", {bad.in("x", ty("f32", {"N"}))})->setAttr("approximate", "fast");
  EXPECT_EQ(errorOf(bad.run()),
            "node 'n' (Gelu): attribute 'approximate' must be \"none\" or \"tanh\", got \"fast\"");
}

TEST(ActivationUnary, AttributeKindsChecked) {
  OneOp t(13);
  t.op("LeakyRelu", {t.in("x", ty("f32", {"2"}))})->setAttr("alpha", int64_t{1});
  EXPECT_EQ(errorOf(t.normalize()),
            "node 'n' (LeakyRelu): attribute 'alpha' must be float, got int");
  OneOp h(13);
  Node *n = h.op("HardSigmoid", {h.in("x", ty("f32", {"2"}))});
  n->setAttr("alpha", 0.1f);
  n->setAttr("beta", 0.6f);
  EXPECT_TRUE(h.run().isOk());
}

// --- Clip -------------------------------------------------------------------------------------

TEST(ActivationClip, AttributesBecomeScalarInputs) {
  for (int opset : {7, 10}) {
    OneOp t(opset);
    Node *n = t.op("Clip", {t.in("x", ty("f32", {"N", "4"}))});
    n->setAttr("min", 0.0f);
    n->setAttr("max", 6.0f);
    ASSERT_TRUE(t.run().isOk()) << errorOf(t.run());
    EXPECT_TRUE(n->attributes().empty());
    ASSERT_EQ(n->numInputs(), 3u);
    ASSERT_TRUE(n->input(1)->isConstant());
    EXPECT_EQ(n->input(1)->type().str(), "f32[]");
    EXPECT_EQ(doubles(n->input(1)->initializer()), std::vector<double>{0.0});
    EXPECT_EQ(doubles(n->input(2)->initializer()), std::vector<double>{6.0});
    EXPECT_EQ(t.type("y"), "f32[N,4]");
  }
}

TEST(ActivationClip, AbsentAttributeIsOmittedInput) {
  OneOp onlyMax(9);
  Node *n = onlyMax.op("Clip", {onlyMax.in("x", ty("f64", {"3"}))});
  n->setAttr("max", 1.5f);
  ASSERT_TRUE(onlyMax.run().isOk()) << errorOf(onlyMax.run());
  ASSERT_EQ(n->numInputs(), 3u);
  EXPECT_EQ(n->input(1), nullptr);
  EXPECT_EQ(n->input(2)->type().str(), "f64[]"); // typed like X when X's type is known
  EXPECT_EQ(doubles(n->input(2)->initializer()), std::vector<double>{1.5});

  OneOp onlyMin(9);
  Node *m = onlyMin.op("Clip", {onlyMin.in("x", ty("f16", {"3"}))});
  m->setAttr("min", -2.0f);
  ASSERT_TRUE(onlyMin.run().isOk()) << errorOf(onlyMin.run());
  ASSERT_EQ(m->numInputs(), 2u);
  EXPECT_EQ(m->input(1)->type().str(), "f16[]");
  EXPECT_EQ(doubles(m->input(1)->initializer()), std::vector<double>{-2.0});

  OneOp none(9);
  Node *k = none.op("Clip", {none.in("x", ty("f32", {"3"}))});
  ASSERT_TRUE(none.run().isOk());
  EXPECT_EQ(k->numInputs(), 1u);
}

TEST(ActivationClip, CanonicalFormAndErrors) {
  OneOp t(13);
  Value *x = t.in("x", ty("i32", {"N"}));
  t.op("Clip",
       {x, t.constant("lo", TensorData::fromBytes("lo", DType::kInt32, {}, std::string(4, '\0')))});
  ASSERT_TRUE(t.run().isOk()) << errorOf(t.run());
  EXPECT_EQ(t.type("y"), "i32[N]");

  OneOp attr(13);
  attr.op("Clip", {attr.in("x", ty("f32", {"N"}))})->setAttr("min", 0.0f);
  EXPECT_EQ(errorOf(attr.normalize()),
            "node 'n' (Clip): attribute 'min' is not allowed for Clip in opset 13");

  OneOp vec(13);
  vec.op("Clip", {vec.in("x", ty("f32", {"N"})), vec.in("lo", ty("f32", {"2"}))});
  EXPECT_EQ(errorOf(vec.run()), "node 'n' (Clip): input 'min' must be a scalar, got shape [2]");

  OneOp mixed(13);
  mixed.op("Clip", {mixed.in("x", ty("f32", {"N"})), mixed.in("lo", ty("f64", {}))});
  EXPECT_NE(errorOf(mixed.run()).find("bound to the same type T"), std::string::npos);
}

// --- Softmax / LogSoftmax ----------------------------------------------------------------------

TEST(ActivationSoftmax, CanonicalAxis) {
  OneOp t(13);
  t.op("Softmax", {t.in("x", ty("f32", {"N", "3", "4"}))});
  ASSERT_TRUE(t.run().isOk());
  EXPECT_EQ(t.type("y"), "f32[N,3,4]");
  EXPECT_FALSE(t.node->hasAttr("axis"));
  OneOp bad(13);
  bad.op("LogSoftmax", {bad.in("x", ty("f32", {"N", "3"}))})->setAttr("axis", int64_t{2});
  EXPECT_NE(errorOf(bad.run()).find("node 'n' (LogSoftmax): axis 2"), std::string::npos)
      << errorOf(bad.run());
}

TEST(ActivationSoftmax, OldFormOnLastAxisOnlySetsAxis) {
  OneOp t(11); // default axis 1 on a rank-2 input: the last axis
  Node *n = t.op("Softmax", {t.in("x", ty("f32", {"N", "10"}))});
  ASSERT_TRUE(t.run().isOk());
  EXPECT_EQ(t.g->numNodes(), 1u);
  EXPECT_EQ(n->attrInt("axis", -99), 1);
  EXPECT_EQ(t.type("y"), "f32[N,10]");

  OneOp neg(11);
  Node *m = neg.op("LogSoftmax", {neg.in("x", ty("f32", {"N", "3", "10"}))});
  m->setAttr("axis", int64_t{-1});
  ASSERT_TRUE(neg.run().isOk());
  EXPECT_EQ(neg.g->numNodes(), 1u);
  EXPECT_EQ(m->attrInt("axis", -99), 2);
}

TEST(ActivationSoftmax, OldFormOnInnerAxisBecomesFlattenSoftmaxReshape) {
  for (const char *op : {"Softmax", "LogSoftmax"}) {
    OneOp t(11);
    t.op(op, {t.in("x", ty("f32", {"N", "3", "4", "5"}))}); // axis 1 (default) of a rank-4 input
    ASSERT_TRUE(t.normalize().isOk()) << errorOf(t.normalize());
    std::vector<Node *> nodes = t.g->nodes();
    ASSERT_EQ(nodes.size(), 4u);
    EXPECT_EQ(nodes[0]->opType(), "Shape");
    EXPECT_EQ(nodes[1]->opType(), "Flatten");
    EXPECT_EQ(nodes[1]->attrInt("axis", -99), 1);
    EXPECT_EQ(nodes[1]->input(0)->name(), "x");
    EXPECT_EQ(nodes[2]->opType(), op);
    EXPECT_EQ(nodes[2]->attrInt("axis", -99), 1);
    EXPECT_EQ(nodes[2]->input(0), nodes[1]->output(0));
    EXPECT_EQ(nodes[3]->opType(), "Reshape");
    EXPECT_EQ(nodes[3]->input(0), nodes[2]->output(0));
    EXPECT_EQ(nodes[3]->input(1), nodes[0]->output(0));
    // The original output value now comes from the Reshape and is still the graph output.
    ASSERT_EQ(nodes[3]->numOutputs(), 1u);
    EXPECT_EQ(nodes[3]->output(0)->name(), "y");
    EXPECT_EQ(t.g->outputs()[0], nodes[3]->output(0));
    EXPECT_EQ(t.g->findNode("n"), nullptr);
    // Each new node is canonical for the newest opset.
    for (Node *n : nodes)
      EXPECT_TRUE(ops::checkForm(*n, ops::lookupOp("", n->opType())->canonical(), 21).isOk())
          << n->opType();
  }
}

TEST(ActivationSoftmax, OldFormShapesAfterRewrite) {
  // Needs Shape/Flatten/Reshape inference (ops/tensor) with shape-value propagation.
  OneOp t(11);
  t.op("Softmax", {t.in("x", ty("f32", {"N", "3", "4", "5"}))})->setAttr("axis", int64_t{2});
  ASSERT_TRUE(t.run().isOk()) << errorOf(t.run());
  EXPECT_EQ(t.g->nodes()[1]->attrInt("axis", -99), 2);
  EXPECT_EQ(t.type("y"), "f32[N,3,4,5]");
}

TEST(ActivationSoftmax, OldFormWithUnknownRankIsRewritten) {
  OneOp t(9);
  Value *x = t.g->createValue("x", TensorType{DType::kFloat32, Shape::unknownRank()});
  t.g->addInput(x);
  t.op("Softmax", {x});
  ASSERT_TRUE(t.normalize().isOk());
  std::vector<Node *> nodes = t.g->nodes();
  ASSERT_EQ(nodes.size(), 4u);
  EXPECT_EQ(nodes[2]->output(0)->shape().rank(), 2u); // flattened: known 2-D before inference
  // Normalizing the inner node again (as if re-imported) keeps it: axis 1 is its last axis.
  ops::NormalizeContext nctx(*t.g, 11, t.diags);
  ASSERT_TRUE(ops::lookupOp("", "Softmax")->normalize(*nodes[2], nctx).isOk());
  EXPECT_EQ(t.g->numNodes(), 4u);
}

TEST(ActivationSoftmax, OldFormAxisOutOfRange) {
  OneOp t(11);
  t.op("Softmax", {t.in("x", ty("f32", {"N", "3"}))})->setAttr("axis", int64_t{2});
  EXPECT_NE(errorOf(t.normalize()).find("node 'n' (Softmax): axis 2"), std::string::npos)
      << errorOf(t.normalize());
}

// --- Dropout ----------------------------------------------------------------------------------

TEST(ActivationDropout, RatioAttributeBecomesInput) {
  for (int opset : {7, 10}) {
    OneOp t(opset);
    Node *n = t.op("Dropout", {t.in("x", ty("f32", {"N", "16"}))}, {"y", "mask"});
    n->setAttr("ratio", 0.25f);
    ASSERT_TRUE(t.run().isOk()) << errorOf(t.run());
    EXPECT_FALSE(n->hasAttr("ratio"));
    ASSERT_EQ(n->numInputs(), 2u);
    EXPECT_EQ(n->input(1)->type().str(), "f32[]");
    EXPECT_EQ(doubles(n->input(1)->initializer()), std::vector<double>{0.25});
    EXPECT_EQ(t.type("y"), "f32[N,16]");
    EXPECT_EQ(t.type("mask"), "bool[N,16]");
  }
  OneOp noRatio(10);
  Node *n = noRatio.op("Dropout", {noRatio.in("x", ty("f16", {"N"}))});
  ASSERT_TRUE(noRatio.run().isOk());
  EXPECT_EQ(n->numInputs(), 1u);
  EXPECT_EQ(noRatio.type("y"), "f16[N]");
}

TEST(ActivationDropout, CanonicalFormAndErrors) {
  OneOp t(13);
  Node *n = t.op("Dropout",
                 {t.in("x", ty("bf16", {"N", "4"})), t.constant("r", f32Data({}, {0.1f})),
                  t.in("train", ty("bool", {}))},
                 {"y", "mask"});
  n->setAttr("seed", int64_t{3});
  ASSERT_TRUE(t.run().isOk()) << errorOf(t.run());
  EXPECT_EQ(t.type("y"), "bf16[N,4]");
  EXPECT_EQ(t.type("mask"), "bool[N,4]");

  OneOp attr(12);
  attr.op("Dropout", {attr.in("x", ty("f32", {"N"}))})->setAttr("ratio", 0.5f);
  EXPECT_EQ(errorOf(attr.normalize()),
            "node 'n' (Dropout): attribute 'ratio' is not allowed for Dropout in opset 12");

  OneOp big(13);
  big.op("Dropout", {big.in("x", ty("f32", {"N"})), big.constant("r", f32Data({}, {1.5f}))});
  EXPECT_EQ(errorOf(big.run()), "node 'n' (Dropout): ratio must be in [0, 1), got 1.500000");

  OneOp vec(13);
  vec.op("Dropout", {vec.in("x", ty("f32", {"N"})), nullptr, vec.in("t", ty("bool", {"2", "1"}))});
  EXPECT_EQ(errorOf(vec.run()),
            "node 'n' (Dropout): input 'training_mode' must be a scalar, got shape [2,1]");

  OneOp mode(13);
  mode.op("Dropout", {mode.in("x", ty("f32", {"N"})), nullptr, mode.in("t", ty("i64", {}))});
  EXPECT_NE(errorOf(mode.run()).find("has type i64; allowed: bool"), std::string::npos);
}

// --- Cast and Identity ------------------------------------------------------------------------

TEST(ActivationCast, OutputTypeFromTo) {
  OneOp t(13);
  t.op("Cast", {t.in("x", ty("f32", {"N", "3"}))})->setAttr("to", int64_t{7});
  ASSERT_TRUE(t.run().isOk());
  EXPECT_EQ(t.type("y"), "i64[N,3]");

  OneOp b(21);
  b.op("Cast", {b.in("x", ty("i32", {"?"}))})->setAttr("to", int64_t{9});
  ASSERT_TRUE(b.run().isOk());
  EXPECT_EQ(b.type("y"), "bool[?]");
}

TEST(ActivationCast, UnknownTargetTypeIsAnError) {
  for (int64_t to : {int64_t{0}, int64_t{14}, int64_t{17}, int64_t{-1}, int64_t{1} << 40}) {
    OneOp t(19);
    t.op("Cast", {t.in("x", ty("f32", {"N"}))})->setAttr("to", to);
    std::string err = errorOf(t.normalize());
    EXPECT_EQ(err.rfind("node 'n' (Cast): attribute 'to' = " + std::to_string(to) +
                            " is not a data type dtc supports (",
                        0),
              0u)
        << err;
  }
  OneOp missing(13);
  missing.op("Cast", {missing.in("x", ty("f32", {"N"}))});
  EXPECT_EQ(errorOf(missing.normalize()), "node 'n' (Cast): required attribute 'to' is missing");
}

TEST(ActivationCast, SaturateOnlyFromOpset19) {
  OneOp t(19);
  Node *n = t.op("Cast", {t.in("x", ty("f32", {"N"}))});
  n->setAttr("to", int64_t{10});
  n->setAttr("saturate", int64_t{1});
  ASSERT_TRUE(t.run().isOk());
  EXPECT_EQ(t.type("y"), "f16[N]");
  OneOp old(13);
  Node *m = old.op("Cast", {old.in("x", ty("f32", {"N"}))});
  m->setAttr("to", int64_t{10});
  m->setAttr("saturate", int64_t{1});
  EXPECT_EQ(errorOf(old.normalize()),
            "node 'n' (Cast): attribute 'saturate' is not allowed for Cast in opset 13");
}

TEST(ActivationCast, Folds) {
  OneOp t(13);
  Node *n = t.op("Cast", {t.in("x", ty("f32", {"4"}))});
  auto run = [&](int64_t to, TensorDataPtr in) {
    n->setAttr("to", to);
    auto r = fold(*n, {std::move(in)});
    EXPECT_TRUE(r.hasValue()) << errorOf(r.status());
    return r.hasValue() ? (*r)[0] : nullptr;
  };
  // float -> int32 truncates toward zero; -> bool is x != 0.
  TensorDataPtr i32 = run(6, f32Data({4}, {1.9f, -1.9f, 0.0f, 3.0f}));
  EXPECT_EQ(i32->dtype(), DType::kInt32);
  EXPECT_EQ(i32->dims(), (std::vector<int64_t>{4}));
  EXPECT_EQ(*i32->toInt64s(), (std::vector<int64_t>{1, -1, 0, 3}));
  EXPECT_EQ(i32->name(), "y");
  TensorDataPtr b = run(9, f32Data({4}, {1.9f, -1.9f, 0.0f, 3.0f}));
  EXPECT_EQ(*b->toInt64s(), (std::vector<int64_t>{1, 1, 0, 1}));
  // bool -> int64, int64 -> float, int64 -> int32 (modular).
  TensorDataPtr i64 = run(7, b);
  EXPECT_EQ(i64->dtype(), DType::kInt64);
  EXPECT_EQ(*i64->toInt64s(), (std::vector<int64_t>{1, 1, 0, 1}));
  TensorDataPtr f = run(1, TensorData::fromInt64s("c", {2}, {-7, 1 << 20}));
  EXPECT_EQ(f->dtype(), DType::kFloat32);
  EXPECT_EQ(*f->toDoubles(), (std::vector<double>{-7.0, 1048576.0}));
  TensorDataPtr narrow = run(6, TensorData::fromInt64s("c", {1}, {(int64_t{1} << 32) + 5}));
  EXPECT_EQ(*narrow->toInt64s(), std::vector<int64_t>{5});
  // Exact for large int64 values (no trip through double).
  TensorDataPtr same = run(7, TensorData::fromInt64s("c", {1}, {(int64_t{1} << 62) + 1}));
  EXPECT_EQ(*same->toInt64s(), std::vector<int64_t>{(int64_t{1} << 62) + 1});
  // float -> float16 -> float.
  TensorDataPtr h = run(10, f32Data({3}, {1.0f, -2.5f, 65504.0f}));
  EXPECT_EQ(h->dtype(), DType::kFloat16);
  TensorDataPtr back = run(1, h);
  EXPECT_EQ(*back->toDoubles(), (std::vector<double>{1.0, -2.5, 65504.0}));
  // NaN to an integer does not hit undefined behaviour (gives 0).
  TensorDataPtr nan = run(7, f32Data({1}, {std::nanf("")}));
  EXPECT_EQ(*nan->toInt64s(), std::vector<int64_t>{0});
  // Strings do not fold.
  n->setAttr("to", int64_t{8});
  auto s = fold(*n, {f32Data({1}, {1.0f})});
  EXPECT_EQ(errorOf(s.status()), "node 'n' (Cast): cannot fold a Cast from or to string");
}

TEST(ActivationIdentity, FoldsAndKeepsShape) {
  OneOp t(13);
  Node *n = t.op("Identity", {t.in("x", ty("i64", {"3"}))});
  auto r = fold(*n, {TensorData::fromInt64s("c", {3}, {4, 5, 6})});
  ASSERT_TRUE(r.hasValue());
  EXPECT_EQ((*r)[0]->name(), "y");
  EXPECT_EQ((*r)[0]->dtype(), DType::kInt64);
  EXPECT_EQ(*(*r)[0]->toInt64s(), (std::vector<int64_t>{4, 5, 6}));
  auto f = fold(*n, {f32Data({1, 2}, {0.5f, 2.0f})});
  ASSERT_TRUE(f.hasValue());
  EXPECT_EQ((*f)[0]->dims(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(*(*f)[0]->toDoubles(), (std::vector<double>{0.5, 2.0}));
  ASSERT_TRUE(t.run().isOk());
  EXPECT_EQ(t.type("y"), "i64[3]");
}

TEST(ActivationConvert, HalfAndBFloat16) {
  EXPECT_EQ(ops::floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(ops::floatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(ops::floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(ops::floatToHalf(1e6f), 0x7c00);                  // overflow -> inf
  EXPECT_EQ(ops::floatToHalf(std::ldexp(1.0f, -24)), 0x0001); // smallest subnormal
  EXPECT_EQ(ops::floatToHalf(1e-9f), 0x0000);
  EXPECT_EQ(ops::floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00); // tie -> even
  EXPECT_TRUE(std::isnan(ops::halfToFloat(ops::floatToHalf(std::nanf("")))));
  EXPECT_EQ(ops::halfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(ops::halfToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(ops::halfToFloat(0xfc00), -INFINITY);
  EXPECT_EQ(ops::floatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(ops::bfloat16ToFloat(0x4049), 3.140625f);
  EXPECT_EQ(ops::floatToBFloat16(3.14159f), 0x4049);
}
