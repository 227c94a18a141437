// Unit tests of the elementwise binary family: broadcasting inference (symbolic dims), type
// constraints, folding, and shape-value propagation through shape arithmetic.
#include "ops/OpDef.h"
#include "ops/ShapeHelpers.h"
#include "tests/unit/ops/TestUtil.h"

#include <gtest/gtest.h>

using namespace dtc;
using dtc::ir::Dim;
using dtc::ir::Shape;

TEST(ElementwiseBroadcast, NumpyRules) {
  auto s = ops::broadcastShapes({Shape({Dim::symbol("N"), Dim::fixed(1), Dim::fixed(4)}),
                                 Shape::ofStatic({3, 1})},
                                "here");
  ASSERT_TRUE(s.hasValue()) << s.status().message();
  EXPECT_EQ(s->str(), "[N,3,4]");
  auto scalar = ops::broadcastShapes({Shape::ofStatic({}), Shape::ofStatic({2, 2})}, "here");
  EXPECT_EQ(scalar->str(), "[2,2]");
  auto symVsStatic = ops::broadcastShapes({Shape({Dim::symbol("N")}), Shape::ofStatic({5})}, "x");
  EXPECT_EQ(symVsStatic->str(), "[5]");
  auto twoSyms = ops::broadcastShapes({Shape({Dim::symbol("N")}), Shape({Dim::symbol("M")})}, "x");
  EXPECT_EQ(twoSyms->str(), "[?]");
  EXPECT_TRUE(ops::broadcastShapes({Shape::unknownRank(), Shape::ofStatic({2})}, "x")->str() ==
              "[*]");
}

TEST(ElementwiseBroadcast, MismatchNamesWhere) {
  auto s = ops::broadcastShapes({Shape::ofStatic({2, 3}), Shape::ofStatic({4})}, "node 'a' (Add)");
  ASSERT_FALSE(s.hasValue());
  EXPECT_EQ(s.status().message(), "node 'a' (Add): shapes cannot be broadcast: dimension 1 is 3 in "
                                  "one input and 4 in another");
}

TEST(ElementwiseSlidingWindow, CeilModeDropsWindowStartingInPadding) {
  // Output = floor_or_ceil((in + pads - kernel) / stride) + 1; with ceil_mode a last window
  // starting at or past in + padBegin is dropped (PyTorch's pooling_output_shape rule).
  auto floorOut = ops::slidingWindowDim(Dim::fixed(6), 2, 2, 1, 1, 1, false, "w");
  EXPECT_EQ(floorOut->value(), 4);
  auto ceilOut = ops::slidingWindowDim(Dim::fixed(5), 2, 2, 0, 1, 1, true, "w");
  // (5+1-2)/2 = 2 -> ceil 2 -> +1 = 3; third window starts at 4 < 5: kept.
  EXPECT_EQ(ceilOut->value(), 3);
  auto dropped = ops::slidingWindowDim(Dim::fixed(4), 2, 2, 1, 1, 1, true, "w");
  // span = 4+2-2 = 4; ceil(4/2)+1 = 3; third window starts at 4 >= in+padBegin = 5? no: kept.
  EXPECT_EQ(dropped->value(), 3);
  auto dropped2 = ops::slidingWindowDim(Dim::fixed(5), 3, 3, 0, 2, 1, true, "w");
  // span = 5+2-3 = 4; ceil(4/3)+1 = 3; third window starts at 6 >= 5 -> dropped -> 2.
  EXPECT_EQ(dropped2->value(), 2);
  EXPECT_FALSE(ops::slidingWindowDim(Dim::fixed(2), 5, 1, 0, 0, 1, false, "w").hasValue());
  EXPECT_TRUE(ops::slidingWindowDim(Dim::symbol("H"), 3, 1, 1, 1, 1, false, "w")->isUnknown());
}

namespace {
const char *kAddModel = R"(
<ir_version: 8, opset_import: ["" : 13]>
agraph (float[N, 3, 4] x, float[4] b) => (float[N, 3, 4] y) {
  y = Add(x, b)
}
)";
} // namespace

TEST(ElementwiseAdd, InfersBroadcastWithSymbolicBatch) {
  auto g = test::compileText(kAddModel);
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  EXPECT_EQ(test::typeOf(**g, "y"), "f32[N,3,4]");
}

TEST(ElementwiseAdd, RejectsMixedTypes) {
  auto g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 13]>
agraph (float[2] x, int64[2] b) => (float[2] y) {
  y = Add(x, b)
}
)");
  ASSERT_FALSE(g.hasValue());
  EXPECT_NE(g.status().message().find("(Add): input 1 ('B') has type i64 but another input bound "
                                      "to the same type T has f32"),
            std::string::npos)
      << g.status().message();
}

TEST(ElementwiseEqual, OutputIsBool) {
  auto g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 13]>
agraph (int64[N] x, int64[1] b) => (bool[N] y) {
  y = Equal(x, b)
}
)");
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  EXPECT_EQ(test::typeOf(**g, "y"), "bool[N]");
}

TEST(ElementwiseFold, IntegerArithmeticFoldsAndChecksOverflow) {
  auto g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 13]>
agraph (float[N, 12] x) => (float[N, 3, 4] y) {
  a = Constant <value = int64[2] {3, 2}> ()
  b = Constant <value = int64[1] {2}> ()
  c = Mul(a, b)
  d = Div(c, b)
  e = Sub(d, b)
  s = Constant <value = int64[3] {0, 3, 4}> ()
  y = Reshape(x, s)
  f = Add(e, b)
}
)",
                             {"canonicalize"});
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  EXPECT_EQ(test::typeOf(**g, "y"), "f32[N,3,4]");
}

TEST(ElementwiseFold, DivisionByZeroIsNotFolded) {
  const ops::OpDef *div = ops::lookupOp("", "Div");
  ASSERT_NE(div, nullptr);
  ASSERT_TRUE(div->fold);
  ir::Graph g;
  ir::Value *a = g.addConstant("a", ir::TensorData::fromInt64s("a", {1}, {4}));
  ir::Value *b = g.addConstant("b", ir::TensorData::fromInt64s("b", {1}, {0}));
  ir::Node *n = g.addNode("Div", {a, b}, {"c"});
  ops::FoldContext ctx(*n, {a->initializer(), b->initializer()});
  auto r = div->fold(ctx);
  ASSERT_FALSE(r.hasValue());
  EXPECT_NE(r.status().message().find("division by zero"), std::string::npos);

  ir::Value *c = g.addConstant("c", ir::TensorData::fromInt64s("c", {2, 1}, {6, 8}));
  ir::Value *d = g.addConstant("d", ir::TensorData::fromInt64s("d", {2}, {2, -4}));
  ir::Node *m = g.addNode("Div", {c, d}, {"q"});
  ops::FoldContext ctx2(*m, {c->initializer(), d->initializer()});
  auto q = div->fold(ctx2);
  ASSERT_TRUE(q.hasValue()) << q.status().message();
  EXPECT_EQ((*q)[0]->dims(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(*(*q)[0]->toInt64s(), (std::vector<int64_t>{3, -1, 4, -2}));
}

TEST(ElementwiseShapeValues, ShapeArithmeticStaysSymbolic) {
  // x.view(N, C*H*W) written with Mul of gathered dims: the reshape stays exact on symbolic N.
  auto g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 13]>
agraph (float[N, 2, 3, 4] x) => (float[N, 24] y) {
  s = Shape(x)
  i0 = Constant <value = int64[1] {0}> ()
  i1 = Constant <value = int64[1] {1}> ()
  i2 = Constant <value = int64[1] {2}> ()
  i3 = Constant <value = int64[1] {3}> ()
  n = Gather <axis = 0> (s, i0)
  c = Gather <axis = 0> (s, i1)
  h = Gather <axis = 0> (s, i2)
  w = Gather <axis = 0> (s, i3)
  ch = Mul(c, h)
  chw = Mul(ch, w)
  t = Concat <axis = 0> (n, chw)
  y = Reshape(x, t)
}
)");
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  EXPECT_EQ(test::typeOf(**g, "y"), "f32[N,24]");
}
