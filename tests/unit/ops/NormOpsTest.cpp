// Unit tests of InstanceNormalization and GroupNormalization (issue 12): inference with symbolic
// dims, opset 18's per-group scale and bias rewritten into the opset 21 per-channel form, cost,
// and the errors for bad inputs, each naming the node.
#include "compiler/ir/Printer.h"
#include "ops/Cost.h"
#include "ops/OpDef.h"
#include "tests/unit/ops/TestUtil.h"

#include <gtest/gtest.h>

using namespace dtc;

namespace {

TEST(NormOps, InstanceNormalizationSymbolicDims) {
  auto g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[N, 3, H, W] x, float[3] s, float[3] b) => (float[N, 3, H, W] y) {
  y = InstanceNormalization<epsilon = 0.001>(x, s, b)
}
)");
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  EXPECT_EQ(test::typeOf(**g, "y"), "f32[N,3,H,W]");
}

TEST(NormOps, GroupNormalization21PerChannel) {
  auto g = test::compileText(R"(
<ir_version: 10, opset_import: ["" : 21]>
agraph (float[N, 6, L] x, float[6] s, float[6] b) => (float[N, 6, L] y) {
  y = GroupNormalization<num_groups = 3>(x, s, b)
}
)");
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  EXPECT_EQ(test::typeOf(**g, "y"), "f32[N,6,L]");
  EXPECT_EQ((*g)->numNodes(), 1u);
}

TEST(NormOps, GroupNormalization18PerGroupBecomesGroupedView) {
  auto g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 18]>
agraph (float[N, 6, H, W] x, float[2] s, float[2] b) => (float[N, 6, H, W] y) {
  y = GroupNormalization<num_groups = 2, epsilon = 0.01>(x, s, b)
}
)");
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  EXPECT_EQ(test::typeOf(**g, "y"), "f32[N,6,H,W]");
  // X viewed as [N, 2, 6*H*W / 2] with one channel per group: opset 21's form with the groups'
  // scale and bias as per-channel ones.
  const ir::Node *norm = nullptr;
  for (const ir::Node *n : (*g)->nodes())
    if (n->opType() == "GroupNormalization")
      norm = n;
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->attrInt("num_groups", 0), 2);
  EXPECT_FLOAT_EQ(norm->attrFloat("epsilon", 0), 0.01f);
  EXPECT_EQ(norm->input(0)->shape().rank(), 3u);
  EXPECT_EQ(norm->input(0)->shape()[1].str(), "2");
  EXPECT_EQ(norm->input(1)->name(), "s");
}

TEST(NormOps, Cost) {
  auto g = test::compileText(R"(
<ir_version: 10, opset_import: ["" : 21]>
agraph (float[2, 6, 5] x, float[6] s, float[6] b) => (float[2, 6, 5] y, float[2, 6, 5] z) {
  y = GroupNormalization<num_groups = 3>(x, s, b)
  z = InstanceNormalization(x, s, b)
}
)");
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  for (const ir::Node *n : (*g)->nodes()) {
    auto c = ops::nodeCost(*n);
    ASSERT_TRUE(c.hasValue()) << c.status().message();
    // 8 per element of X, 5 per (sample, group): 3 groups, or 6 for the instance norm.
    const double groups = n->opType() == "GroupNormalization" ? 3 : 6;
    EXPECT_DOUBLE_EQ(c->flops, 8 * 60 + 5 * 2 * groups) << n->opType();
    EXPECT_DOUBLE_EQ(c->bytesRead, 4 * (60 + 12));
  }
}

TEST(NormOps, BadInputsNameTheNode) {
  struct Case {
    const char *text;
    const char *error;
  };
  const Case cases[] = {
      {"<ir_version: 10, opset_import: [\"\" : 21]>\n"
       "agraph (float[2, 6, 5] x, float[6] s, float[6] b) => (float[2, 6, 5] y) {\n"
       "  y = GroupNormalization<num_groups = 4>(x, s, b)\n}",
       "node 'GroupNormalization_0' (GroupNormalization): the channel count 6 is not a multiple "
       "of num_groups 4"},
      {"<ir_version: 10, opset_import: [\"\" : 21]>\n"
       "agraph (float[2, 6, 5] x, float[3] s, float[3] b) => (float[2, 6, 5] y) {\n"
       "  y = GroupNormalization<num_groups = 3>(x, s, b)\n}",
       "node 'GroupNormalization_0' (GroupNormalization): scale [3] must be [C] with C = 6"},
      {"<ir_version: 10, opset_import: [\"\" : 21]>\n"
       "agraph (float[2, 6, 5] x, float[6] s, float[6] b) => (float[2, 6, 5] y) {\n"
       "  y = GroupNormalization<num_groups = 0>(x, s, b)\n}",
       "num_groups must be >= 1, got 0"},
      {"<ir_version: 10, opset_import: [\"\" : 21]>\n"
       "agraph (float[2, 6, 5] x, float[6] s, float[6] b) => (float[2, 6, 5] y) {\n"
       "  y = GroupNormalization<num_groups = 3, stash_type = 7>(x, s, b)\n}",
       "stash_type 7 is not a float type"},
      {"<ir_version: 8, opset_import: [\"\" : 17]>\n"
       "agraph (float[6] x, float[6] s, float[6] b) => (float[6] y) {\n"
       "  y = InstanceNormalization(x, s, b)\n}",
       "node 'InstanceNormalization_0' (InstanceNormalization): X must have rank >= 2"},
      {"<ir_version: 8, opset_import: [\"\" : 17]>\n"
       "agraph (float[2, 6, 5] x, float[6] s, float[6] b) => (float[2, 6, 5] y) {\n"
       "  y = GroupNormalization<num_groups = 3>(x, s, b)\n}",
       "GroupNormalization does not exist in opset 17 (since 18)"},
  };
  for (const Case &c : cases) {
    auto g = test::compileText(c.text);
    ASSERT_FALSE(g.hasValue()) << c.text;
    EXPECT_NE(g.status().message().find(c.error), std::string::npos)
        << g.status().message() << "\nexpected: " << c.error;
  }
}

} // namespace
