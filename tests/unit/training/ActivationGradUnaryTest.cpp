// Gradient rules of the activations added for today's exporters (Softplus, Softsign, Elu, Selu,
// Celu, Mish, Sin, Cos, PRelu), checked by finite differences through the autodiff pass and the
// ai.dtc.EltwiseGrad kernels, with their attributes and, for PRelu, every slope broadcast.
#include "tests/unit/training/GradCheck.h"

#include <gtest/gtest.h>

namespace dtc {
namespace {

using ir::Attribute;
using test::GradInput;

/// n values with |x| in [0.1, 2] and a random sign (away from the kinks at 0).
std::vector<float> awayFromZero(size_t n, uint32_t seed = 5) {
  return test::awayFromZero(n, seed, 0.1f, 2.f);
}

TEST(ActivationGradUnary, SmoothActivations) {
  for (std::vector<int64_t> shape : {std::vector<int64_t>{3, 5}, {1}, {}}) {
    for (const char *op : {"Softplus", "Softsign", "Mish", "Sin", "Cos"}) {
      SCOPED_TRACE(op);
      EXPECT_EQ(test::gradCheck(op, {GradInput::f32("x", shape).range(-3.f, 3.f)}, {}), "");
    }
  }
}

TEST(ActivationGradUnary, EluSeluCeluWithAttributes) {
  const std::vector<float> x = awayFromZero(12);
  const std::vector<std::pair<const char *, std::map<std::string, Attribute>>> cases = {
      {"Elu", {}},  {"Elu", {{"alpha", Attribute(0.4f)}}},
      {"Selu", {}}, {"Selu", {{"alpha", Attribute(2.f)}, {"gamma", Attribute(0.5f)}}},
      {"Celu", {}}, {"Celu", {{"alpha", Attribute(0.7f)}}},
  };
  for (const auto &[op, attrs] : cases) {
    SCOPED_TRACE(op);
    EXPECT_EQ(test::gradCheck(op, {GradInput::f32("x", {3, 4}, x)}, attrs), "");
  }
}

TEST(ActivationGradUnary, PReluSlopeReducedOverBroadcastAxes) {
  const std::vector<float> x = awayFromZero(24, 9);
  for (std::vector<int64_t> slope :
       {std::vector<int64_t>{3, 1}, {4}, {}, {2, 3, 4}, {1, 4}, {2, 1, 1}}) {
    SCOPED_TRACE(testing::PrintToString(slope));
    EXPECT_EQ(test::gradCheck("PRelu",
                              {GradInput::f32("x", {2, 3, 4}, x), GradInput::f32("s", slope)}, {}),
              "");
  }
  // Only the slope trained (X fixed), and only X (slope a constant).
  EXPECT_EQ(test::gradCheck(
                "PRelu",
                {GradInput::f32("x", {2, 3}, awayFromZero(6)).fixed(), GradInput::f32("s", {3})},
                {}),
            "");
  EXPECT_EQ(test::gradCheck("PRelu",
                            {GradInput::f32("x", {2, 3}, awayFromZero(6)),
                             GradInput::f32("s", {1}, {0.3f}).asConstant()},
                            {}),
            "");
}

} // namespace
} // namespace dtc
