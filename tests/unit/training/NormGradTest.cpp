// Gradient rules of InstanceNormalization and GroupNormalization (both through
// ai.dtc.GroupNormGrad), checked by finite differences: dX, dscale and dbias, with 1-sized
// spatial and channel-per-group dims and a large epsilon.
#include "tests/unit/training/GradCheck.h"

#include <gtest/gtest.h>

namespace dtc {
namespace {

using test::gradCheck;
using test::GradCheckOptions;
using test::GradInput;

std::string norm(const std::string &op, std::vector<int64_t> x, int64_t groups, float epsilon,
                 uint32_t seed = 1) {
  GradCheckOptions opts;
  opts.atol = 1e-3;
  opts.seed = seed;
  opts.maxElements = 64;
  const std::vector<int64_t> c = {x[1]};
  std::map<std::string, ir::Attribute> attrs = {{"epsilon", ir::Attribute(epsilon)}};
  if (groups > 0)
    attrs["num_groups"] = ir::Attribute(groups);
  return gradCheck(op,
                   {GradInput::f32("x", x).range(-2.f, 2.f),
                    GradInput::f32("scale", c).range(0.5f, 1.5f), GradInput::f32("b", c)},
                   attrs, 1, opts);
}

TEST(NormGrad, InstanceNormalization) {
  EXPECT_EQ(norm("InstanceNormalization", {2, 3, 4, 5}, 0, 1e-5f), "");
  EXPECT_EQ(norm("InstanceNormalization", {3, 2, 7}, 0, 0.5f, 2), "");
  EXPECT_EQ(norm("InstanceNormalization", {1, 4, 3}, 0, 1e-5f, 3), "");
}

TEST(NormGrad, GroupNormalization) {
  EXPECT_EQ(norm("GroupNormalization", {2, 6, 3, 2}, 3, 1e-5f), "");
  EXPECT_EQ(norm("GroupNormalization", {2, 4, 5}, 1, 1e-5f, 2), ""); // one group: layer norm
  EXPECT_EQ(norm("GroupNormalization", {3, 4, 5}, 4, 1e-5f, 3), ""); // instance norm
  EXPECT_EQ(norm("GroupNormalization", {2, 6, 1}, 2, 0.1f, 4), "");  // 1-sized spatial dim
}

} // namespace
} // namespace dtc
