// Gradient rules of ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceLogSumExp and
// ReduceSumSquare, checked by finite differences over several axes sets and keepdims, and their
// singular points: ReduceProd with one and with two zeros in a slice (a product is linear in each
// element, so the central difference is exact there) and ReduceL2 of an all-zero slice (0).
#include "tests/unit/training/GradCheck.h"

#include <gtest/gtest.h>

namespace dtc {
namespace {

using test::distinct;
using test::gradCheck;
using test::GradInput;

std::map<std::string, ir::Attribute> keep(int64_t k) { return {{"keepdims", ir::Attribute(k)}}; }

/// n values with |x| in [0.3, 1.2] and alternating signs (away from the kinks of |x|).
std::vector<float> awayFromZero(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] =
        (0.3f + 0.9f * static_cast<float>((i * 7) % n) / static_cast<float>(n)) *
        (i % 2 ? -1.f : 1.f);
  return v;
}

TEST(ReduceGrad, EveryNewReductionOverAxesSets) {
  for (const char *op :
       {"ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare"}) {
    SCOPED_TRACE(op);
    EXPECT_EQ(
        gradCheck(op,
                  {GradInput::f32("x", {3, 4, 2}, awayFromZero(24)), GradInput::i64("a", {1}, {1})},
                  keep(0)),
        "");
    EXPECT_EQ(
        gradCheck(op,
                  {GradInput::f32("x", {2, 3, 4}, distinct(24)), GradInput::i64("a", {2}, {0, -1})},
                  keep(1)),
        "");
    EXPECT_EQ(gradCheck(op, {GradInput::f32("x", {4, 3}, awayFromZero(12))}, keep(0)), "");
  }
}

TEST(ReduceGrad, ProdWithZerosIsExact) {
  // Row 0 has no zero, row 1 one zero, row 2 two zeros.
  std::vector<float> x = {0.5f, -1.5f, 2.f, 0.8f, 0.f, -1.2f, 0.f, 0.f, 1.5f};
  EXPECT_EQ(gradCheck("ReduceProd", {GradInput::f32("x", {3, 3}, x), GradInput::i64("a", {1}, {1})},
                      keep(1)),
            "");
  EXPECT_EQ(gradCheck("ReduceProd", {GradInput::f32("x", {3, 3}, x)}, keep(0)), ""); // 3 zeros
}

TEST(ReduceGrad, L2OfZeroSliceHasZeroGradient) {
  std::vector<float> x = {0.f, 0.f, 0.f, 0.6f, -0.8f, 0.3f};
  EXPECT_EQ(gradCheck("ReduceL2", {GradInput::f32("x", {2, 3}, x), GradInput::i64("a", {1}, {1})},
                      keep(0)),
            "");
}

} // namespace
} // namespace dtc
