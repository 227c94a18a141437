// Gradient rules of DepthToSpace (DCR and CRD) and SpaceToDepth, checked by finite differences:
// each is a permutation, so dX is dY under the inverse permutation.
#include "tests/unit/training/GradCheck.h"

#include <gtest/gtest.h>

namespace dtc {
namespace {

using test::gradCheck;
using test::GradInput;

TEST(SpaceDepthGrad, DepthToSpaceBothModesAndSpaceToDepth) {
  for (const char *mode : {"DCR", "CRD"}) {
    SCOPED_TRACE(mode);
    EXPECT_EQ(gradCheck("DepthToSpace", {GradInput::f32("x", {2, 8, 2, 3})},
                        {{"blocksize", ir::Attribute(int64_t{2})}, {"mode", ir::Attribute(mode)}}),
              "");
  }
  EXPECT_EQ(gradCheck("DepthToSpace", {GradInput::f32("x", {1, 9, 1, 2})},
                      {{"blocksize", ir::Attribute(int64_t{3})}}),
            "");
  EXPECT_EQ(gradCheck("SpaceToDepth", {GradInput::f32("x", {2, 3, 4, 6})},
                      {{"blocksize", ir::Attribute(int64_t{2})}}),
            "");
}

} // namespace
} // namespace dtc
