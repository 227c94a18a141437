// Gradient rules of Einsum (an Einsum per operand, expanded along indices summed away in the
// forward; diagonals written back through identity matrices; ellipsis broadcasting undone) and TopK
// (dValues scattered back to the selected positions), checked by finite differences; the forward
// kernels run in the same plans.
#include "tests/unit/training/GradCheck.h"

#include <gtest/gtest.h>

namespace dtc {
namespace {

using test::gradCheck;
using test::GradInput;

std::string einsum(const std::string &eq, const std::vector<std::vector<int64_t>> &shapes) {
  std::vector<GradInput> ins;
  for (size_t i = 0; i < shapes.size(); ++i)
    ins.push_back(GradInput::f32("x" + std::to_string(i), shapes[i]));
  return gradCheck("Einsum", ins, {{"equation", ir::Attribute(eq)}});
}

TEST(EinsumGrad, MatmulForms) {
  EXPECT_EQ(einsum("bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}}), "");
  EXPECT_EQ(einsum("bij,bjk->bik", {{2, 3, 4}, {2, 4, 2}}), "");
  EXPECT_EQ(einsum("ij,jk", {{3, 4}, {4, 2}}), "");                       // implicit output
  EXPECT_EQ(einsum("...ij,...jk->...ik", {{2, 1, 3, 4}, {3, 4, 2}}), ""); // broadcast batch
}

TEST(EinsumGrad, TransposeOuterReductionAndThreeOperands) {
  EXPECT_EQ(einsum("ij->ji", {{3, 4}}), "");
  EXPECT_EQ(einsum("i,j->ij", {{3}, {4}}), "");
  EXPECT_EQ(einsum("bij->j", {{2, 3, 4}}), "");
  EXPECT_EQ(einsum("ij,j->i", {{3, 4}, {4}}), "");
  EXPECT_EQ(einsum("ik,k->ik", {{3, 4}, {1}}).empty(), false); // sizes 4 and 1 do not match
  EXPECT_EQ(einsum("ab,bc,cd->ad", {{2, 3}, {3, 4}, {4, 2}}), "");
  EXPECT_EQ(einsum("ij,kl->i", {{2, 3}, {4, 2}}), ""); // both operands summed privately
}

TEST(EinsumGrad, DiagonalsAndTraces) {
  EXPECT_EQ(einsum("ii->i", {{3, 3}}), "");
  EXPECT_EQ(einsum("ii", {{4, 4}}), ""); // trace
  EXPECT_EQ(einsum("bii->bi", {{2, 3, 3}}), "");
  EXPECT_EQ(einsum("iij,jk->ik", {{3, 3, 2}, {2, 4}}), ""); // diagonal feeding a matmul
  EXPECT_EQ(einsum("iii->", {{2, 2, 2}}), "");
}

TEST(TopKGrad, ValuesScatterBack) {
  // Distinct values keep the selection stable under the finite-difference step.
  std::vector<float> x;
  for (int i = 0; i < 24; ++i)
    x.push_back(static_cast<float>((i * 7) % 24) * 0.25f);
  for (int64_t largest : {1, 0})
    EXPECT_EQ(gradCheck("TopK", {GradInput::f32("x", {4, 6}, x), GradInput::i64("k", {1}, {3})},
                        {{"axis", ir::Attribute(int64_t{1})}, {"largest", ir::Attribute(largest)}},
                        2,
                        [] {
                          test::GradCheckOptions o;
                          o.lossOutputs = {0};
                          return o;
                        }()),
              "");
  EXPECT_EQ(gradCheck("TopK", {GradInput::f32("x", {4, 6}, x), GradInput::i64("k", {1}, {2})},
                      {{"axis", ir::Attribute(int64_t{0})}}, 2,
                      [] {
                        test::GradCheckOptions o;
                        o.lossOutputs = {0};
                        return o;
                      }()),
            "");
}

} // namespace
} // namespace dtc
