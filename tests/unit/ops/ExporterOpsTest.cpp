// Unit tests of the operators today's exporters emit (issue 12): And/Or/Xor, GreaterOrEqual,
// LessOrEqual, IsNaN, IsInf, Max/Min/Sum/Mean, CastLike, CumSum, GatherElements: inference
// (broadcasting, symbolic dims, dtypes), constant folding (values, and the causal-mask and
// position-id chains of GPT-2 exports folding away with static shapes), and the errors for bad
// inputs, each naming the node.
#include "ops/OpDef.h"
#include "tests/unit/ops/TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace dtc;

namespace {

/// Folds node `op` of a fresh graph on constant inputs; the status on failure.
Expected<std::vector<ir::TensorDataPtr>>
fold(const std::string &op, const std::vector<ir::TensorDataPtr> &inputs,
     const std::map<std::string, ir::Attribute> &attrs = {}) {
  const ops::OpDef *def = ops::lookupOp("", op);
  if (!def || !def->fold)
    return Status::error(op, "no fold");
  ir::Graph g;
  std::vector<ir::Value *> ins;
  for (const ir::TensorDataPtr &t : inputs)
    ins.push_back(g.addConstant(t->name(), t));
  ir::Node *n = g.addNode(op, ins, {"y"}, "", "n");
  for (const auto &[k, a] : attrs)
    n->setAttr(k, a);
  ops::FoldContext ctx(*n, inputs);
  return def->fold(ctx);
}

ir::TensorDataPtr ints(const std::string &name, std::vector<int64_t> dims, std::vector<int64_t> v) {
  return ir::TensorData::fromInt64s(name, std::move(dims), v);
}
ir::TensorDataPtr floats(const std::string &name, std::vector<int64_t> dims, std::vector<float> v) {
  return ir::TensorData::fromFloats(name, std::move(dims), v);
}
ir::TensorDataPtr bools(const std::string &name, std::vector<int64_t> dims, std::string v) {
  return ir::TensorData::fromBytes(name, ir::DType::kBool, std::move(dims), std::move(v));
}

std::vector<int64_t> intsOf(const Expected<std::vector<ir::TensorDataPtr>> &r) {
  EXPECT_TRUE(r.hasValue()) << r.status().message();
  if (!r)
    return {};
  return *(*r)[0]->toInt64s();
}
std::vector<double> doublesOf(const Expected<std::vector<ir::TensorDataPtr>> &r) {
  EXPECT_TRUE(r.hasValue()) << r.status().message();
  if (!r)
    return {};
  return *(*r)[0]->toDoubles();
}

} // namespace

TEST(ExporterOps, InferenceWithSymbolicDims) {
  auto g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[N, 3, 4] x, float[4] b, float[3, 1] c, bool[N, 1, 4] m, int64[B, S] ids)
    => (float[N, 3, 4] y, bool[N, 3, 4] z, int64[N, 3, 4] ci, int64[B, S] pos, float[B, S] g) {
  ge = GreaterOrEqual(x, b)
  le = LessOrEqual(x, c)
  a = And(ge, le)
  o = Or(a, m)
  xo = Xor(o, ge)
  nan = IsNaN(x)
  inf = IsInf<detect_negative = 0>(x)
  z = Or(nan, xo)
  mx = Max(x, b, c)
  mn = Min(c, b)
  s = Sum(mn, c)
  y = Mean(s, x, b)
  like = Constant<value = int64[1] {3}>()
  ci = CastLike(x, like)
  one = Constant<value = int64 {1}>()
  pos = CumSum<exclusive = 1>(ids, one)
  table = Constant<value = float[2, 5] {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}>()
  g = GatherElements<axis = 1>(table, ids)
}
)");
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  EXPECT_EQ(test::typeOf(**g, "ge"), "bool[N,3,4]");
  EXPECT_EQ(test::typeOf(**g, "o"), "bool[N,3,4]");
  EXPECT_EQ(test::typeOf(**g, "inf"), "bool[N,3,4]");
  EXPECT_EQ(test::typeOf(**g, "mx"), "f32[N,3,4]");
  EXPECT_EQ(test::typeOf(**g, "mn"), "f32[3,4]");
  EXPECT_EQ(test::typeOf(**g, "y"), "f32[N,3,4]");
  EXPECT_EQ(test::typeOf(**g, "ci"), "i64[N,3,4]");
  EXPECT_EQ(test::typeOf(**g, "pos"), "i64[B,S]");
  EXPECT_EQ(test::typeOf(**g, "g"), "f32[B,S]");
}

TEST(ExporterOps, TypeConstraints) {
  auto g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[2] x, float[2] y) => (bool[2] z) {
  z = And(x, y)
}
)");
  ASSERT_FALSE(g.hasValue());
  EXPECT_NE(
      g.status().message().find("(And): input 0 ('A', value 'x') has type f32; allowed: bool"),
      std::string::npos)
      << g.status().message();
  g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (int64[2] x, int64[2] y) => (int64[2] z) {
  z = Sum(x, y)
}
)");
  ASSERT_FALSE(g.hasValue());
  EXPECT_NE(g.status().message().find("(Sum): input 0 ('data_0', value 'x') has type i64"),
            std::string::npos)
      << g.status().message();
  g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (int64[2] x) => (bool[2] z) {
  z = IsNaN(x)
}
)");
  ASSERT_FALSE(g.hasValue());
  EXPECT_NE(g.status().message().find("(IsNaN): input 0 ('X', value 'x') has type i64"),
            std::string::npos)
      << g.status().message();
}

TEST(ExporterOps, OpsBeforeTheirOpsetAreRejected) {
  // GreaterOrEqual appeared in opset 12, CumSum in 11, CastLike in 15.
  for (const char *body : {"z = GreaterOrEqual(x, x)", "z = CastLike(x, x)"}) {
    auto g = test::compileText(std::string(R"(
<ir_version: 7, opset_import: ["" : 11]>
agraph (float[2] x) => (float[2] z) {
  )") + body + "\n}\n");
    ASSERT_FALSE(g.hasValue()) << body;
    EXPECT_NE(g.status().message().find("opset 11"), std::string::npos) << g.status().message();
  }
}

TEST(ExporterOps, FoldComparisonsAndLogic) {
  auto a = floats("a", {4}, {1.f, 2.f, std::nanf(""), -1.f});
  auto b = floats("b", {1}, {1.f});
  EXPECT_EQ(intsOf(fold("GreaterOrEqual", {a, b})), (std::vector<int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(intsOf(fold("LessOrEqual", {a, b})), (std::vector<int64_t>{1, 0, 0, 1}));
  // Integers compare exactly beyond 2^53.
  auto big = ints("big", {2}, {(int64_t{1} << 60) + 1, 5});
  auto big2 = ints("big2", {2}, {int64_t{1} << 60, 5});
  EXPECT_EQ(intsOf(fold("LessOrEqual", {big, big2})), (std::vector<int64_t>{0, 1}));
  auto p = bools("p", {2, 1}, std::string("\x00\x01", 2));
  auto q = bools("q", {2}, std::string("\x00\x01", 2));
  EXPECT_EQ(intsOf(fold("And", {p, q})), (std::vector<int64_t>{0, 0, 0, 1}));
  EXPECT_EQ(intsOf(fold("Or", {p, q})), (std::vector<int64_t>{0, 1, 1, 1}));
  EXPECT_EQ(intsOf(fold("Xor", {p, q})), (std::vector<int64_t>{0, 1, 1, 0}));
  auto r = fold("Xor", {p, q});
  ASSERT_TRUE(r.hasValue());
  EXPECT_EQ((*r)[0]->dtype(), ir::DType::kBool);
  EXPECT_EQ((*r)[0]->dims(), (std::vector<int64_t>{2, 2}));
  auto x = floats("x", {4}, {INFINITY, -INFINITY, std::nanf(""), 0.f});
  EXPECT_EQ(intsOf(fold("IsNaN", {x})), (std::vector<int64_t>{0, 0, 1, 0}));
  EXPECT_EQ(intsOf(fold("IsInf", {x})), (std::vector<int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(intsOf(fold("IsInf", {x}, {{"detect_positive", ir::Attribute(int64_t{0})}})),
            (std::vector<int64_t>{0, 1, 0, 0}));
}

TEST(ExporterOps, FoldVariadic) {
  auto a = floats("a", {2, 1}, {1.f, 5.f});
  auto b = floats("b", {3}, {2.f, 4.f, std::nanf("")});
  auto c = floats("c", {}, {3.f});
  std::vector<double> mx = doublesOf(fold("Max", {a, b, c}));
  ASSERT_EQ(mx.size(), 6u);
  EXPECT_EQ(mx[0], 3);
  EXPECT_EQ(mx[1], 4);
  EXPECT_TRUE(std::isnan(mx[2])); // NaN propagates
  EXPECT_EQ(mx[3], 5);
  EXPECT_EQ(doublesOf(fold("Min", {a})), (std::vector<double>{1, 5})); // one input: itself
  EXPECT_EQ(doublesOf(fold("Sum", {a, c})), (std::vector<double>{4, 8}));
  EXPECT_EQ(doublesOf(fold("Mean", {a, c, c, c})), (std::vector<double>{2.5, 3.5}));
  EXPECT_EQ(intsOf(fold("Max", {ints("i", {2}, {-3, 7}), ints("j", {1}, {2})})),
            (std::vector<int64_t>{2, 7}));
}

TEST(ExporterOps, FoldCastLikeCumSumGatherElements) {
  auto x = floats("x", {3}, {1.7f, -2.5f, 3.f});
  auto like = ints("like", {}, {0});
  auto r = fold("CastLike", {x, like});
  ASSERT_TRUE(r.hasValue()) << r.status().message();
  EXPECT_EQ((*r)[0]->dtype(), ir::DType::kInt64);
  EXPECT_EQ(*(*r)[0]->toInt64s(), (std::vector<int64_t>{1, -2, 3}));

  auto m = ints("m", {2, 3}, {1, 1, 0, 0, 1, 1});
  auto axis = ints("axis", {}, {1});
  EXPECT_EQ(intsOf(fold("CumSum", {m, axis})), (std::vector<int64_t>{1, 2, 2, 0, 1, 2}));
  EXPECT_EQ(intsOf(fold("CumSum", {m, axis}, {{"exclusive", ir::Attribute(int64_t{1})}})),
            (std::vector<int64_t>{0, 1, 2, 0, 0, 1}));
  EXPECT_EQ(
      intsOf(fold("CumSum", {m, ints("a0", {1}, {-2})}, {{"reverse", ir::Attribute(int64_t{1})}})),
      (std::vector<int64_t>{1, 2, 1, 0, 1, 1}));
  EXPECT_EQ(doublesOf(fold("CumSum", {x, ints("a", {}, {0})})),
            (std::vector<double>{1.7f, 1.7f + -2.5f, 1.7f + -2.5f + 3.f}));
  auto err = fold("CumSum", {m, ints("bad", {}, {2})});
  ASSERT_FALSE(err.hasValue());
  EXPECT_EQ(err.status().message(), "node 'n' (CumSum): axis 2 is out of range for rank 2");

  auto data = floats("d", {2, 3}, {0, 1, 2, 3, 4, 5});
  auto idx = ints("i", {2, 2}, {2, -1, 0, 1});
  EXPECT_EQ(doublesOf(fold("GatherElements", {data, idx}, {{"axis", ir::Attribute(int64_t{1})}})),
            (std::vector<double>{2, 2, 3, 4}));
  err = fold("GatherElements", {data, ints("i", {1, 2}, {0, 2})});
  ASSERT_FALSE(err.hasValue());
  EXPECT_EQ(err.status().message(),
            "node 'n' (GatherElements): index 2 is out of range for axis 0 of size 2");
}

TEST(ExporterOps, FoldGatherNDAndRounding) {
  auto data = ints("d", {2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(intsOf(fold("GatherND", {data, ints("i", {2, 2}, {1, 0, 0, -1})})),
            (std::vector<int64_t>{4, 5, 2, 3}));
  EXPECT_EQ(intsOf(fold("GatherND", {data, ints("i", {2, 1}, {1, 0})},
                        {{"batch_dims", ir::Attribute(int64_t{1})}})),
            (std::vector<int64_t>{2, 3, 4, 5}));
  auto err = fold("GatherND", {data, ints("i", {1, 4}, {0, 0, 0, 0})});
  ASSERT_FALSE(err.hasValue());
  EXPECT_EQ(err.status().message(), "node 'n' (GatherND): the last dim of 'indices' [1,4] is 4; "
                                    "it must be in [1, 3] for 'data' [2,2,2] and batch_dims 0");
  auto x = floats("x", {5}, {0.5f, 1.5f, -2.5f, -0.3f, 2.7f});
  EXPECT_EQ(doublesOf(fold("Round", {x})), (std::vector<double>{0, 2, -2, -0.0, 3}));
  EXPECT_EQ(doublesOf(fold("Floor", {x})), (std::vector<double>{0, 1, -3, -1, 2}));
  EXPECT_EQ(doublesOf(fold("Ceil", {x})), (std::vector<double>{1, 2, -2, -0.0, 3}));
  EXPECT_EQ(doublesOf(fold("Sign", {x})), (std::vector<double>{1, 1, -1, -1, 1}));
  EXPECT_EQ(intsOf(fold("Sign", {ints("s", {3}, {-7, 0, int64_t{1} << 62})})),
            (std::vector<int64_t>{-1, 0, 1}));
}

TEST(ExporterOps, ArgMaxArgMinTriluSize) {
  auto x = floats("x", {2, 3}, {1, 5, 5, std::nanf(""), -1, 7});
  EXPECT_EQ(intsOf(fold("ArgMax", {x}, {{"axis", ir::Attribute(int64_t{1})}})),
            (std::vector<int64_t>{1, 0})); // first of the tied maxima; NaN wins
  EXPECT_EQ(intsOf(fold("ArgMax", {x},
                        {{"axis", ir::Attribute(int64_t{-1})},
                         {"select_last_index", ir::Attribute(int64_t{1})}})),
            (std::vector<int64_t>{2, 0}));
  auto r = fold("ArgMin", {x}, {{"keepdims", ir::Attribute(int64_t{0})}});
  ASSERT_TRUE(r.hasValue()) << r.status().message();
  EXPECT_EQ((*r)[0]->dims(), (std::vector<int64_t>{3}));
  EXPECT_EQ(*(*r)[0]->toInt64s(), (std::vector<int64_t>{1, 1, 0}));
  EXPECT_EQ(intsOf(fold("Trilu", {ints("m", {3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})})),
            (std::vector<int64_t>{1, 2, 3, 0, 5, 6, 0, 0, 9}));
  EXPECT_EQ(intsOf(fold("Trilu", {ints("m", {2, 3}, {1, 2, 3, 4, 5, 6}), ints("k", {}, {-1})},
                        {{"upper", ir::Attribute(int64_t{0})}})),
            (std::vector<int64_t>{0, 0, 0, 4, 0, 0}));
  auto g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[N, 3, 4] x, float[2, 5] s) => (int64[N, 1, 4] a, int64 n, int64 m, float[N, 3, 4] t) {
  a = ArgMax<axis = 1>(x)
  n = Size(x)
  m = Size(s)
  t = Trilu(x)
}
)",
                             {"canonicalize", "shape-inference"});
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  EXPECT_EQ(test::typeOf(**g, "a"), "i64[N,1,4]");
  EXPECT_EQ(test::typeOf(**g, "n"), "i64[]");
  const ir::Value *m = (*g)->findValue("m");
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(m->isInitializer()); // a static shape folds
  EXPECT_EQ(*m->initializer()->toInt64s(), (std::vector<int64_t>{10}));
  EXPECT_FALSE((*g)->findValue("n")->isInitializer());
  auto bad = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[4] x) => (float[4] t) {
  t = Trilu(x)
}
)");
  ASSERT_FALSE(bad.hasValue());
  EXPECT_NE(bad.status().message().find("node 'Trilu_0' (Trilu): input 'input' must have rank >= "
                                        "2, got [4]"),
            std::string::npos)
      << bad.status().message();
}

TEST(ExporterOps, ModAndOneHot) {
  auto a = ints("a", {4}, {7, -7, 7, -7});
  auto b = ints("b", {4}, {3, 3, -3, -3});
  EXPECT_EQ(intsOf(fold("Mod", {a, b})), (std::vector<int64_t>{1, 2, -2, -1})); // Python's %
  EXPECT_EQ(intsOf(fold("Mod", {a, b}, {{"fmod", ir::Attribute(int64_t{1})}})),
            (std::vector<int64_t>{1, -1, 1, -1})); // C's fmod
  auto byZero = fold("Mod", {a, ints("z", {1}, {0})});
  ASSERT_FALSE(byZero.hasValue());
  EXPECT_NE(byZero.status().message().find("division by zero"), std::string::npos);
  EXPECT_EQ(doublesOf(fold("Mod", {floats("x", {2}, {5.5f, -5.5f}), floats("q", {1}, {2.f})},
                           {{"fmod", ir::Attribute(int64_t{1})}})),
            (std::vector<double>{1.5, -1.5}));
  auto floatMod = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 13]>
agraph (float[2] x, float[2] y) => (float[2] z) {
  z = Mod(x, y)
}
)");
  ASSERT_FALSE(floatMod.hasValue());
  EXPECT_NE(floatMod.status().message().find(
                "node 'Mod_0' (Mod): fmod must be 1 for float inputs (got f32 with fmod = 0)"),
            std::string::npos)
      << floatMod.status().message();

  // OneHot: indices [2] = {1, -1}, depth 3, axis -1 and 0; an out-of-range index is all off.
  auto idx = ints("i", {3}, {1, -1, 5});
  auto depth = ints("d", {}, {3});
  auto values = floats("v", {2}, {0.5f, 2.f});
  EXPECT_EQ(doublesOf(fold("OneHot", {idx, depth, values})),
            (std::vector<double>{0.5, 2, 0.5, 0.5, 0.5, 2, 0.5, 0.5, 0.5}));
  EXPECT_EQ(doublesOf(fold("OneHot", {idx, depth, values}, {{"axis", ir::Attribute(int64_t{0})}})),
            (std::vector<double>{0.5, 0.5, 0.5, 2, 0.5, 0.5, 0.5, 2, 0.5}));
  auto g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 11]>
agraph (int64[N, 4] labels) => (float[N, 10, 4] y) {
  depth = Constant<value = int64 {10}>()
  values = Constant<value = float[2] {0, 1}>()
  y = OneHot<axis = 1>(labels, depth, values)
}
)");
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  EXPECT_EQ(test::typeOf(**g, "y"), "f32[N,10,4]");
}

TEST(ExporterOps, FoldScatter) {
  auto data = ints("d", {2, 3}, {0, 0, 0, 0, 0, 0});
  EXPECT_EQ(
      intsOf(fold("ScatterElements", {data, ints("i", {1, 2}, {2, -3}), ints("u", {1, 2}, {5, 6})},
                  {{"axis", ir::Attribute(int64_t{1})}})),
      (std::vector<int64_t>{6, 0, 5, 0, 0, 0}));
  EXPECT_EQ(intsOf(fold("ScatterND",
                        {data, ints("i", {2, 1}, {1, 1}), ints("u", {2, 3}, {1, 2, 3, 4, 5, 6})},
                        {{"reduction", ir::Attribute(std::string("add"))}})),
            (std::vector<int64_t>{0, 0, 0, 5, 7, 9}));
  auto bad = fold("ScatterND", {data, ints("i", {1, 2}, {0, 3}), ints("u", {1}, {1})});
  ASSERT_FALSE(bad.hasValue());
  EXPECT_EQ(bad.status().message(),
            "node 'n' (ScatterND): index 3 is out of range for axis 1 of size 3");
}

TEST(ExporterOps, FoldBitwise) {
  auto a = ints("a", {3}, {12, -1, 5});
  auto b = ints("b", {1}, {10});
  EXPECT_EQ(intsOf(fold("BitwiseAnd", {a, b})), (std::vector<int64_t>{8, 10, 0}));
  EXPECT_EQ(intsOf(fold("BitwiseOr", {a, b})), (std::vector<int64_t>{14, -1, 15}));
  EXPECT_EQ(intsOf(fold("BitwiseXor", {a, b})), (std::vector<int64_t>{6, -11, 15}));
  EXPECT_EQ(intsOf(fold("BitwiseNot", {a})), (std::vector<int64_t>{-13, 0, -6}));
  auto u8 = ir::TensorData::fromBytes("u", ir::DType::kUInt8, {2}, std::string("\x0f\xf0", 2));
  auto r = fold("BitwiseNot", {u8});
  ASSERT_TRUE(r.hasValue()) << r.status().message();
  EXPECT_EQ((*r)[0]->dtype(), ir::DType::kUInt8);
  EXPECT_EQ(*(*r)[0]->toInt64s(), (std::vector<int64_t>{0xf0, 0x0f}));
}

TEST(ExporterOps, CausalMaskAndPositionIdsFoldWithStaticShapes) {
  // The mask logic of GPT-2 exports: positions from Range, a causal mask from LessOrEqual of
  // the unsqueezed positions, Where to -inf; position ids as CumSum of a constant mask minus 1.
  // With static shapes, canonicalization folds the whole chain into constants.
  auto g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[1, 4, 4] scores) => (float[1, 4, 4] y, int64[1, 4] pos) {
  sh = Shape(scores)
  i1 = Constant<value = int64 {1}>()
  n = Gather<axis = 0>(sh, i1)
  zero = Constant<value = int64 {0}>()
  one = Constant<value = int64 {1}>()
  r = Range(zero, n, one)
  ax0 = Constant<value = int64[1] {0}>()
  ax1 = Constant<value = int64[1] {1}>()
  row = Unsqueeze(r, ax1)
  col = Unsqueeze(r, ax0)
  keep = LessOrEqual(col, row)
  big = Constant<value = float {-1e9}>()
  zf = Constant<value = float {0}>()
  bias = Where(keep, zf, big)
  y = Add(scores, bias)
  mask = Constant<value = int64[1, 4] {1, 1, 1, 1}>()
  cs = CumSum(mask, one)
  pos = Sub(cs, one)
}
)",
                             {"canonicalize", "shape-inference"});
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  int computeNodes = 0;
  for (const ir::Node *node : (*g)->nodes())
    computeNodes += node->opType() != "Add" ? 1 : 0;
  EXPECT_EQ(computeNodes, 0) << "the mask chain did not fold";
  const ir::Value *pos = (*g)->findValue("pos");
  ASSERT_NE(pos, nullptr);
  ASSERT_TRUE(pos->isInitializer());
  EXPECT_EQ(*pos->initializer()->toInt64s(), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(ExporterOps, FoldActivations) {
  auto x = floats("x", {4}, {-2.f, -0.5f, 0.f, 1.5f});
  auto near = [](const std::vector<double> &got, const std::vector<double> &want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 1e-6) << i;
  };
  std::vector<double> want;
  for (double v : {-2.0, -0.5, 0.0, 1.5})
    want.push_back(std::log1p(std::exp(v)));
  near(doublesOf(fold("Softplus", {x})), want);
  near(doublesOf(fold("Softsign", {x})), {-2.0 / 3, -0.5 / 1.5, 0, 1.5 / 2.5});
  near(doublesOf(fold("Elu", {x}, {{"alpha", ir::Attribute(0.5f)}})),
       {0.5 * std::expm1(-2.0), 0.5 * std::expm1(-0.5), 0, 1.5});
  const double a = 1.67326319217681884765625, g = 1.05070102214813232421875;
  near(doublesOf(fold("Selu", {x})),
       {g * a * std::expm1(-2.0), g * a * std::expm1(-0.5), 0, g * 1.5});
  near(doublesOf(fold("Celu", {x}, {{"alpha", ir::Attribute(2.f)}})),
       {2 * std::expm1(-1.0), 2 * std::expm1(-0.25), 0, 1.5});
  want.clear();
  for (double v : {-2.0, -0.5, 0.0, 1.5})
    want.push_back(v * std::tanh(std::log1p(std::exp(v))));
  near(doublesOf(fold("Mish", {x})), want);
  near(doublesOf(fold("Sin", {x})), {std::sin(-2.0), std::sin(-0.5), 0, std::sin(1.5)});
  near(doublesOf(fold("Cos", {x})), {std::cos(-2.0), std::cos(-0.5), 1, std::cos(1.5)});
  // PRelu: slope [2] broadcast over X [2, 2]; i64 too.
  near(doublesOf(fold(
           "PRelu", {floats("x", {2, 2}, {-2.f, -1.f, 3.f, -4.f}), floats("s", {2}, {0.5f, 2.f})})),
       {-1, -2, 3, -8});
  EXPECT_EQ(intsOf(fold("PRelu", {ints("x", {3}, {-2, 0, 5}), ints("s", {}, {3})})),
            (std::vector<int64_t>{-6, 0, 5}));
}

TEST(ExporterOps, FoldDepthToSpaceAndSpaceToDepth) {
  // (1, 8, 1, 1) with b = 2: DCR puts channel (i * 2 + j) * 2 + c at (c, i, j), CRD channel
  // c * 4 + i * 2 + j; SpaceToDepth undoes DCR.
  auto x = floats("x", {1, 8, 1, 1}, {0, 1, 2, 3, 4, 5, 6, 7});
  const ir::Attribute b(int64_t{2});
  auto dcr = fold("DepthToSpace", {x}, {{"blocksize", b}});
  EXPECT_EQ(doublesOf(dcr), (std::vector<double>{0, 2, 4, 6, 1, 3, 5, 7}));
  EXPECT_EQ((*dcr)[0]->dims(), (std::vector<int64_t>{1, 2, 2, 2}));
  EXPECT_EQ(
      doublesOf(fold("DepthToSpace", {x}, {{"blocksize", b}, {"mode", ir::Attribute("CRD")}})),
      (std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7}));
  auto back = fold("SpaceToDepth", {floats("d", {1, 2, 2, 2}, {0, 2, 4, 6, 1, 3, 5, 7})},
                   {{"blocksize", b}});
  EXPECT_EQ(doublesOf(back), (std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ((*back)[0]->dims(), (std::vector<int64_t>{1, 8, 1, 1}));
}

TEST(ExporterOps, BadInputsNameTheNode) {
  struct Case {
    const char *graph;
    const char *error;
  };
  const Case cases[] = {
      {"agraph (float[2, 3] x, float[4] b) => (float[2, 3] y) { y = Max(x, b) }",
       "node 'Max_0' (Max): shapes cannot be broadcast"},
      {"agraph (float[2, 3] x) => (float[2, 3] y) { a = Constant<value = int64 {2}>()\n"
       "y = CumSum(x, a) }",
       "node 'CumSum_1' (CumSum): axis 2 is out of range"},
      {"agraph (float[2, 3] x) => (float[2, 3] y) { a = Constant<value = int64[2] {0, 1}>()\n"
       "y = CumSum(x, a) }",
       "node 'CumSum_1' (CumSum): input 'axis' must hold one element, got 2"},
      {"agraph (float[2, 3] x) => (float[2, 3] y) { a = Constant<value = int64[1, 1] {0}>()\n"
       "y = CumSum(x, a) }",
       "node 'CumSum_1' (CumSum): input 'axis' must be a scalar, got rank 2"},
      {"agraph (float[2, 3] x, int64 a) => (float[2, 3] y) { y = CumSum(x, a) }", ""},
      {"agraph (float[2, 3] x, int64[2] i) => (float[2] y) { y = GatherElements(x, i) }",
       "node 'GatherElements_0' (GatherElements): input 'indices' [2] must have the rank of "
       "'data' [2,3]"},
      {"agraph (float[2, 3] x, int64[2, 4] i) => (float[2, 4] y) { y = GatherElements(x, i) }",
       "node 'GatherElements_0' (GatherElements): input 'indices' [2,4] is larger than 'data' "
       "[2,3] on axis 1"},
      {"agraph (float[2, 3] x, int64[2, 3] i) => (float[2, 3] y) { y = GatherElements<axis = "
       "2>(x, i) }",
       "node 'GatherElements_0' (GatherElements): axis 2 is out of range"},
      {"agraph (float[2, 3] x, float[2] s) => (float[2, 3] y) { y = PRelu(x, s) }",
       "node 'PRelu_0' (PRelu): slope [2] cannot be broadcast to X [2,3] (unidirectional "
       "broadcasting)"},
      {"agraph (float[3] x, float[2, 3] s) => (float[3] y) { y = PRelu(x, s) }",
       "node 'PRelu_0' (PRelu): slope [2,3] cannot be broadcast to X [3]"},
      {"agraph (float[2, 3, 4] x, float[3, 1] s) => (float[2, 3, 4] y) { y = PRelu(x, s) }", ""},
      {"agraph (float[1, 6, 2, 2] x) => (float[1, 1, 4, 4] y) { y = DepthToSpace<blocksize = "
       "2>(x) }",
       "node 'DepthToSpace_0' (DepthToSpace): channels 6 is not a multiple of 4"},
      {"agraph (float[1, 2, 3, 4] x) => (float[1, 8, 1, 2] y) { y = SpaceToDepth<blocksize = "
       "2>(x) }",
       "node 'SpaceToDepth_0' (SpaceToDepth): height 3 is not a multiple of 2"},
      {"agraph (float[1, 8, 2, 2] x) => (float[1, 2, 4, 4] y) { y = DepthToSpace<blocksize = 2, "
       "mode = \"CRD\">(x) }",
       ""},
  };
  for (const Case &c : cases) {
    auto g = test::compileText(std::string("<ir_version: 8, opset_import: [\"\" : 17]>\n") +
                               c.graph + "\n");
    if (!*c.error) { // accepted: a run-time axis is checked by the kernel
      EXPECT_TRUE(g.hasValue()) << g.status().message();
      continue;
    }
    ASSERT_FALSE(g.hasValue()) << c.graph;
    EXPECT_NE(g.status().message().find(c.error), std::string::npos) << g.status().message();
  }
}
