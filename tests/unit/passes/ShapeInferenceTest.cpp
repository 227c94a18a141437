// Unit tests of the shape-inference pass: declared types merged, static conflicts rejected,
// unknown types reported, element-count overflow rejected.
#include "tests/unit/ops/TestUtil.h"

#include <gtest/gtest.h>

using namespace dtc;

TEST(ShapeInference, DeclaredDimsFillUnknowns) {
  // MatMul against a graph input whose shape is only declared on the output.
  auto g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 13]>
agraph (float[N, 4] x, float[4, 3] w) => (float[N, 3] y) {
  y = MatMul(x, w)
}
)");
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  EXPECT_EQ(test::typeOf(**g, "y"), "f32[N,3]");
}

TEST(ShapeInference, ConflictingDeclarationIsAnError) {
  auto g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 13]>
agraph (float[N, 4] x) => (float[N, 5] y) {
  y = Relu(x)
}
)");
  ASSERT_FALSE(g.hasValue());
  EXPECT_NE(g.status().message().find("output 'y' is declared with shape [N,5] but computes [N,4]"),
            std::string::npos)
      << g.status().message();
}

TEST(ShapeInference, ConflictingDTypeIsAnError) {
  auto g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 13]>
agraph (float[4] x) => (int64[4] y) {
  y = Relu(x)
}
)");
  ASSERT_FALSE(g.hasValue());
  EXPECT_NE(g.status().message().find("declared i64 but computes f32"), std::string::npos)
      << g.status().message();
}
