// Unit tests of the canonicalize pass: shape-chain folding on a symbolic batch, full constant
// folding, Identity and dead-node removal, parameters left alone, hard-coded batch warnings.
#include "compiler/ir/Printer.h"
#include "tests/unit/ops/TestUtil.h"

#include <gtest/gtest.h>

using namespace dtc;

namespace {

int countOps(const ir::Graph &g, const std::string &op) {
  int n = 0;
  for (const ir::Node *node : g.nodes())
    n += node->opType() == op;
  return n;
}

} // namespace

TEST(Canonicalize, PyTorchDynamicBatchReshapeChainFolds) {
  auto g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 13]>
agraph (float[N, 16, 7, 7] x) => (float[N, 784] y) {
  s = Shape(x)
  zero = Constant <value = int64 {0}> ()
  n = Gather <axis = 0> (s, zero)
  axes = Constant <value = int64[1] {0}> ()
  u = Unsqueeze(n, axes)
  minus1 = Constant <value = int64[1] {-1}> ()
  t = Concat <axis = 0> (u, minus1)
  y = Reshape(x, t)
}
)",
                             {"shape-inference", "canonicalize"});
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  const ir::Graph &graph = **g;
  EXPECT_EQ(graph.numNodes(), 1u) << ir::printGraph(graph);
  EXPECT_EQ(countOps(graph, "Reshape"), 1);
  EXPECT_EQ(test::typeOf(graph, "y"), "f32[N,784]");
  const ir::Value *target = graph.nodes()[0]->input(1);
  ASSERT_TRUE(target->isConstant());
  EXPECT_EQ(*target->initializer()->toInt64s(), (std::vector<int64_t>{0, -1}));
}

TEST(Canonicalize, StaticShapeChainFoldsToConstant) {
  auto g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 13]>
agraph (float[2, 3] x) => (float[3, 2] y) {
  s = Shape(x)
  idx = Constant <value = int64[2] {1, 0}> ()
  t = Gather <axis = 0> (s, idx)
  y = Reshape(x, t)
}
)",
                             {"canonicalize"});
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  EXPECT_EQ((*g)->numNodes(), 1u) << ir::printGraph(**g);
  const ir::Value *target = (*g)->nodes()[0]->input(1);
  ASSERT_TRUE(target->isConstant());
  EXPECT_EQ(*target->initializer()->toInt64s(), (std::vector<int64_t>{3, 2}));
}

TEST(Canonicalize, IdentityRemovedExceptOnGraphOutputs) {
  auto g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 13]>
agraph (float[N, 4] x) => (float[N, 4] y) {
  a = Identity(x)
  b = Relu(a)
  y = Identity(b)
}
)",
                             {"canonicalize"});
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  EXPECT_EQ(countOps(**g, "Identity"), 1);
  EXPECT_EQ((*g)->findNode((*g)->nodes()[0]->name())->input(0)->name(), "x");
}

TEST(Canonicalize, DeadNodesAndConstantsRemovedParametersKept) {
  auto g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 13]>
agraph (float[N, 4] x, float[4, 4] unused_w) => (float[N, 4] y)
<float[4, 4] unused_w = {1,0,0,0, 0,1,0,0, 0,0,1,0, 0,0,0,1}>
{
  dead = Sigmoid(x)
  c = Constant <value = float[1] {2}> ()
  y = Relu(x)
}
)",
                             {"canonicalize"});
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  EXPECT_EQ((*g)->numNodes(), 1u);
  EXPECT_EQ((*g)->findValue("dead"), nullptr);
  EXPECT_EQ((*g)->findValue("c"), nullptr);
}

TEST(Canonicalize, FloatParametersAreNotFolded) {
  // Folding Transpose(W) would freeze a trainable weight into a constant.
  auto g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 13]>
agraph (float[N, 2] x) => (float[N, 3] y)
<float[3, 2] w = {1, 2, 3, 4, 5, 6}>
{
  wt = Transpose <perm = [1, 0]> (w)
  y = MatMul(x, wt)
}
)",
                             {"canonicalize"});
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  EXPECT_EQ(countOps(**g, "Transpose"), 1);
  EXPECT_TRUE((*g)->findValue("w")->isParameter());
}

TEST(Canonicalize, WarnsWhenAConstantShapeHardCodesTheBatch) {
  Diagnostics diags;
  auto g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 13]>
agraph (float[N, 16] x) => (float[4, 4, 4] y) {
  t = Constant <value = int64[3] {4, 4, -1}> ()
  y = Reshape(x, t)
}
)",
                             {"canonicalize"}, &diags);
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  ASSERT_EQ(diags.items().size(), 1u);
  EXPECT_NE(diags.items()[0].message.find("batch size is hard-coded"), std::string::npos)
      << diags.items()[0].message;
  EXPECT_NE(diags.items()[0].message.find("(Reshape)"), std::string::npos);
}

TEST(Canonicalize, WarnsOnFixedBatchExport) {
  Diagnostics diags;
  auto g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 13]>
agraph (float[8, 2, 3] x) => (float[8, 6] y) {
  t = Constant <value = int64[2] {8, 6}> ()
  y = Reshape(x, t)
}
)",
                             {"canonicalize"}, &diags);
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  ASSERT_EQ(diags.items().size(), 1u);
  EXPECT_NE(diags.items()[0].message.find("fixed batch size 8"), std::string::npos);
}
