// Unit tests of Einsum and TopK (issue 12): inference with symbolic dims (ellipsis, implicit
// outputs, diagonals), TopK's opset 1 attribute k moved into a K input, folding, cost, and the
// errors for bad equations or a run-time K, each naming the node.
#include "compiler/ir/Sharding.h"
#include "ops/Cost.h"
#include "ops/OpDef.h"
#include "ops/Sharding.h"
#include "tests/unit/ops/TestUtil.h"

#include <gtest/gtest.h>

using namespace dtc;

namespace {

TEST(EinsumOps, InferenceWithSymbolicDims) {
  auto g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 13]>
agraph (float[B, H, Q, 8] q, float[B, H, K, 8] k, float[N, 3, 4] x, float[4, 5] w,
        float[5, 5] sq, float[N, 1, 2, 3] e, float[7, 3, 6] f)
    => (float[B, H, Q, K] s) {
  s = Einsum<equation = "bhqd,bhkd->bhqk">(q, k)
  mm = Einsum<equation = "bij,jk->bik">(x, w)
  t = Einsum<equation = "ij->ji">(w)
  d = Einsum<equation = "ii->i">(sq)
  tr = Einsum<equation = "ii">(sq)
  imp = Einsum<equation = "ij,jk">(w, sq)
  el = Einsum<equation = "...ij,...jk->...ik">(e, f)
  outer = Einsum<equation = "i,j->ij">(d, d)
  red = Einsum<equation = "bij->j">(x)
}
)");
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  EXPECT_EQ(test::typeOf(**g, "s"), "f32[B,H,Q,K]");
  EXPECT_EQ(test::typeOf(**g, "mm"), "f32[N,3,5]");
  EXPECT_EQ(test::typeOf(**g, "t"), "f32[5,4]");
  EXPECT_EQ(test::typeOf(**g, "d"), "f32[5]");
  EXPECT_EQ(test::typeOf(**g, "tr"), "f32[]");
  EXPECT_EQ(test::typeOf(**g, "imp"), "f32[4,5]");
  EXPECT_EQ(test::typeOf(**g, "el"), "f32[N,7,2,6]");
  EXPECT_EQ(test::typeOf(**g, "outer"), "f32[5,5]");
  EXPECT_EQ(test::typeOf(**g, "red"), "f32[4]");
}

TEST(EinsumOps, CostCountsTheIndexSpace) {
  auto g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 13]>
agraph (float[2, 3, 4] a, float[2, 4, 5] b) => (float[2, 3, 5] c) {
  c = Einsum<equation = "bij,bjk->bik">(a, b)
}
)");
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  auto c = ops::nodeCost(*(*g)->nodes().front());
  ASSERT_TRUE(c.hasValue()) << c.status().message();
  EXPECT_DOUBLE_EQ(c->flops, 2.0 * 2 * 3 * 4 * 5);
}

/// Einsum's sharding rule on a node with the given input layouts and global dims (two ranks).
ops::ShardingContext askEinsum(ir::Graph &g, const std::string &equation,
                               const std::vector<std::vector<int64_t>> &ins,
                               const std::vector<ir::Sharding> &layouts, std::vector<int64_t> out) {
  std::vector<ir::Value *> values;
  for (const auto &d : ins) {
    ir::Value *v = g.createValue(g.uniqueName("x"), {ir::DType::kFloat32, ir::Shape::ofStatic(d)});
    g.addInput(v);
    values.push_back(v);
  }
  ir::Node *n = g.addNode("Einsum", values, {g.uniqueName("y")}, "", g.uniqueNodeName("e"));
  n->setAttr("equation", ir::Attribute(equation));
  ops::ShardingContext ctx(*n, layouts, std::vector<bool>(ins.size(), false), ins, {out}, 2,
                           [](const ir::Value *, const ir::Sharding &) { return true; });
  Status st = ops::lookupOp("", "Einsum")->sharding(ctx);
  EXPECT_TRUE(st.isOk()) << st.message();
  return ctx;
}

TEST(EinsumOps, ShardingFollowsAKeptIndex) {
  using ir::Sharding;
  ir::Graph g;
  // Attention scores split by head: both operands split on h, the output too.
  auto c = askEinsum(g, "bhqd,bhkd->bhqk", {{2, 4, 3, 8}, {2, 4, 5, 8}},
                     {Sharding::split(1, 2), Sharding::replicated()}, {2, 4, 3, 5});
  EXPECT_EQ(c.required(0), Sharding::split(1, 2));
  EXPECT_EQ(c.required(1), Sharding::split(1, 2));
  EXPECT_EQ(c.output(0), Sharding::split(1, 2));
  // A transpose moves the split; an operand without the index stays replicated.
  auto t = askEinsum(g, "ij,j->ji", {{4, 6}, {6}}, {Sharding::split(0, 2), Sharding::replicated()},
                     {6, 4});
  EXPECT_TRUE(t.required(1).isReplicated());
  EXPECT_EQ(t.output(0), Sharding::split(1, 2));
  // A split contraction index: everything replicated.
  auto k = askEinsum(g, "ij,jk->ik", {{4, 6}, {6, 2}},
                     {Sharding::split(1, 2), Sharding::replicated()}, {4, 2});
  EXPECT_TRUE(k.required(0).isReplicated());
  EXPECT_TRUE(k.output(0).isReplicated());
}

TEST(TopKOps, FormsAndInference) {
  auto g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 9]>
agraph (float[N, 10] x) => (float[N, 3] v, int64[N, 3] i) {
  v, i = TopK<k = 3>(x)
}
)");
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  EXPECT_EQ(test::typeOf(**g, "v"), "f32[N,3]");
  EXPECT_EQ(test::typeOf(**g, "i"), "i64[N,3]");
  EXPECT_EQ((*g)->nodes().front()->numInputs(), 2u);
  auto h = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 11]>
agraph (float[5, N] x) => (float[2, N] v, int64[2, N] i) {
  k = Constant<value = int64[1] {2}>()
  v, i = TopK<axis = 0, largest = 0>(x, k)
}
)");
  ASSERT_TRUE(h.hasValue()) << h.status().message();
  EXPECT_EQ(test::typeOf(**h, "v"), "f32[2,N]");
}

TEST(TopKOps, FoldTiesByLowerIndex) {
  const ops::OpDef *def = ops::lookupOp("", "TopK");
  ASSERT_NE(def, nullptr);
  ir::Graph g;
  auto x = ir::TensorData::fromInt64s("x", {2, 4}, {3, 1, 3, 2, 5, 5, 5, 0});
  auto k = ir::TensorData::fromInt64s("k", {1}, {2});
  ir::Node *n =
      g.addNode("TopK", {g.addConstant("x", x), g.addConstant("k", k)}, {"v", "i"}, "", "n");
  ops::FoldContext ctx(*n, {x, k});
  auto r = def->fold(ctx);
  ASSERT_TRUE(r.hasValue()) << r.status().message();
  EXPECT_EQ(*(*r)[0]->toInt64s(), (std::vector<int64_t>{3, 3, 5, 5}));
  EXPECT_EQ(*(*r)[1]->toInt64s(), (std::vector<int64_t>{0, 2, 0, 1}));
  n->setAttr("largest", ir::Attribute(int64_t{0}));
  ops::FoldContext small(*n, {x, k});
  r = def->fold(small);
  ASSERT_TRUE(r.hasValue()) << r.status().message();
  EXPECT_EQ(*(*r)[0]->toInt64s(), (std::vector<int64_t>{1, 2, 0, 5}));
  EXPECT_EQ(*(*r)[1]->toInt64s(), (std::vector<int64_t>{1, 3, 3, 0}));
}

TEST(EinsumTopKOps, BadInputsNameTheNode) {
  struct Case {
    const char *text;
    const char *error;
  };
  const Case cases[] = {
      {"<ir_version: 8, opset_import: [\"\" : 13]>\n"
       "agraph (float[2, 3] a, float[4, 5] b) => (float[2, 5] c) {\n"
       "  c = Einsum<equation = \"ij,jk->ik\">(a, b)\n}",
       "node 'Einsum_0' (Einsum): equation 'ij,jk->ik': index 'j' has sizes 3 and 4"},
      {"<ir_version: 8, opset_import: [\"\" : 13]>\n"
       "agraph (float[2, 3] a) => (float[2] c) {\n  c = Einsum<equation = \"ijk->i\">(a)\n}",
       "node 'Einsum_0' (Einsum): equation 'ijk->i': term 'ijk' does not match input 0 of rank 2"},
      {"<ir_version: 8, opset_import: [\"\" : 13]>\n"
       "agraph (float[2, 3] a) => (float[2] c) {\n  c = Einsum<equation = \"ij->iz\">(a)\n}",
       "equation 'ij->iz': the output's 'z' is in no input term"},
      {"<ir_version: 8, opset_import: [\"\" : 13]>\n"
       "agraph (float[2, 3] a) => (float[2] c) {\n  c = Einsum<equation = \"i1->i\">(a)\n}",
       "term 'i1' has the character '1'"},
      {"<ir_version: 8, opset_import: [\"\" : 13]>\n"
       "agraph (float[2, 3] a, float[2, 3] b) => (float[2] c) {\n"
       "  c = Einsum<equation = \"ij->i\">(a, b)\n}",
       "it has 1 input term(s) for 2 input(s)"},
      {"<ir_version: 8, opset_import: [\"\" : 13]>\n"
       "agraph (float[2, 3, 4] a) => (float[2] c) {\n  c = Einsum<equation = \"b...->b\">(a)\n}",
       "equation 'b...->b': the inputs' '...' stands for 2 dim(s) but the output has no '...'"},
      {"<ir_version: 8, opset_import: [\"\" : 11]>\n"
       "agraph (float[4, 6] x, int64[1] k) => (float[4, 2] v, int64[4, 2] i) {\n"
       "  v, i = TopK(x, k)\n}",
       "node 'TopK_0' (TopK): K must be a compile-time constant"},
      {"<ir_version: 8, opset_import: [\"\" : 9]>\n"
       "agraph (float[4, 6] x) => (float[4, 7] v, int64[4, 7] i) {\n"
       "  v, i = TopK<k = 7>(x)\n}",
       "node 'TopK_0' (TopK): K 7 is larger than axis 1 of X [4,6]"},
  };
  for (const Case &c : cases) {
    auto g = test::compileText(c.text);
    ASSERT_FALSE(g.hasValue()) << c.text;
    EXPECT_NE(g.status().message().find(c.error), std::string::npos)
        << g.status().message() << "\nexpected: " << c.error;
  }
}

} // namespace
