// CPU kernels of GroupNormalization, InstanceNormalization, ai.dtc.GroupNormGrad, Einsum and TopK
// on small hand-computed cases, and their spec checks (errors name the node). Random-input parity
// with onnxruntime is tests/e2e/ops_parity.py; gradients are checked by finite differences in
// tests/unit/training.
#include "tests/unit/cpu/KernelTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>

namespace dtc::ops::cpu {
namespace {

using test::Buf;
using test::f32;
using test::i64;
using test::makeSpec;
using test::runKernel;

TEST(GroupNormKernel, TwoGroupsMatchTheFormula) {
  // X (1, 4, 2): groups {c0, c1} and {c2, c3}, 4 elements each.
  Buf<float> x(std::vector<float>{0, 1, 2, 3, 10, 10, 10, 14});
  Buf<float> s(std::vector<float>{1, 2, 1, 0.5f}), b(std::vector<float>{0, 0, 1, -1});
  Buf<float> y(8);
  const float eps = 1e-5f;
  runKernel(makeSpec("GroupNormalization", {f32({1, 4, 2}), f32({4}), f32({4})}, {f32({1, 4, 2})},
                     {{"num_groups", ir::Attribute(int64_t{2})}, {"epsilon", ir::Attribute(eps)}}),
            {x.data(), s.data(), b.data()}, {y.data()});
  const float r0 = 1.0f / std::sqrt(1.25f + eps), r1 = 1.0f / std::sqrt(3.0f + eps);
  test::expectNear(y.data(), {-1.5f * r0, -0.5f * r0, 2 * 0.5f * r0, 2 * 1.5f * r0, -r1 + 1,
                              -r1 + 1, 0.5f * -r1 - 1, 0.5f * 3 * r1 - 1});
}

TEST(GroupNormKernel, InstanceNormalizationIsOneGroupPerChannel) {
  Buf<float> x(std::vector<float>{1, 3, 5, 5, 2, 4});
  Buf<float> s(std::vector<float>{2, 1, 1}), b(std::vector<float>{0, 7, 0});
  Buf<float> y(6);
  runKernel(makeSpec("InstanceNormalization", {f32({1, 3, 2}), f32({3}), f32({3})},
                     {f32({1, 3, 2})}, {{"epsilon", ir::Attribute(0.0f)}}),
            {x.data(), s.data(), b.data()}, {y.data()});
  // Channel 1 is constant: variance 0 and epsilon 0 give 0 * inf; ONNX and onnxruntime give NaN.
  EXPECT_FLOAT_EQ(y[0], -2);
  EXPECT_FLOAT_EQ(y[1], 2);
  EXPECT_FLOAT_EQ(y[4], -1);
  EXPECT_FLOAT_EQ(y[5], 1);
}

TEST(GroupNormKernel, GradOfOneGroupSumsToZero) {
  // dX of a normalization sums to zero over each group, and is orthogonal to xhat.
  Buf<float> x = test::randomBuf(24, 3), dy = test::randomBuf(24, 4);
  Buf<float> s(std::vector<float>{1, 2, 3, 4, 5, 6}), dx(24), ds(6), db(6);
  KernelSpec spec =
      makeSpec("GroupNormGrad", {f32({2, 6, 2}), f32({2, 6, 2}), f32({6})},
               {f32({2, 6, 2}), f32({6}), f32({6})}, {{"num_groups", ir::Attribute(int64_t{3})}});
  spec.domain = "ai.dtc";
  runKernel(spec, {dy.data(), x.data(), s.data()}, {dx.data(), ds.data(), db.data()});
  for (int g = 0; g < 6; ++g) { // (sample, group) blocks of 4 contiguous elements
    double sum = 0;
    for (int i = 0; i < 4; ++i)
      sum += dx[static_cast<size_t>(g * 4 + i)];
    EXPECT_NEAR(sum, 0, 1e-5) << "block " << g;
  }
  double db0 = 0;
  for (int n = 0; n < 2; ++n)
    db0 += dy[static_cast<size_t>(n * 12)] + dy[static_cast<size_t>(n * 12 + 1)];
  EXPECT_NEAR(db[0], db0, 1e-5);
}

TEST(EinsumKernel, MatmulDiagonalAndFullSum) {
  Buf<float> a(std::vector<float>{1, 2, 3, 4, 5, 6}), b(std::vector<float>{1, 0, 0, 1, 2, 3});
  Buf<float> c(4);
  runKernel(makeSpec("Einsum", {f32({2, 3}), f32({3, 2})}, {f32({2, 2})},
                     {{"equation", ir::Attribute("ij,jk->ik")}}),
            {a.data(), b.data()}, {c.data()});
  test::expectNear(c.data(), {7, 11, 16, 23});
  Buf<float> sq(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9}), d(3), t(1);
  runKernel(makeSpec("Einsum", {f32({3, 3})}, {f32({3})}, {{"equation", ir::Attribute("ii->i")}}),
            {sq.data()}, {d.data()});
  test::expectNear(d.data(), {1, 5, 9});
  runKernel(makeSpec("Einsum", {f32({3, 3})}, {f32({})}, {{"equation", ir::Attribute("ij->")}}),
            {sq.data()}, {t.data()});
  EXPECT_FLOAT_EQ(t[0], 45);
}

TEST(TopKKernel, TiesGoToTheLowerIndex) {
  Buf<float> x(std::vector<float>{2, 7, 7, 1, 7, 2});
  Buf<float> v(3);
  Buf<int64_t> i(3);
  Buf<int64_t> k(std::vector<int64_t>{3});
  runKernel(makeSpec("TopK", {f32({6}), i64({1})}, {f32({3}), i64({3})}), {x.data(), k.data()},
            {v.data(), i.data()});
  EXPECT_EQ(v.vec(), (std::vector<float>{7, 7, 7}));
  EXPECT_EQ(i.vec(), (std::vector<int64_t>{1, 2, 4}));
  runKernel(makeSpec("TopK", {f32({6}), i64({1})}, {f32({3}), i64({3})},
                     {{"largest", ir::Attribute(int64_t{0})}}),
            {x.data(), k.data()}, {v.data(), i.data()});
  EXPECT_EQ(v.vec(), (std::vector<float>{1, 2, 2}));
  EXPECT_EQ(i.vec(), (std::vector<int64_t>{3, 0, 5}));
}

TEST(NormEinsumTopKKernels, CheckErrors) {
  auto msg = [](const KernelSpec &s) { return checkKernel(s).message(); };
  EXPECT_EQ(
      msg(makeSpec("GroupNormalization", {f32({1, 6, 2}), f32({6}), f32({6})}, {f32({1, 6, 2})},
                   {{"num_groups", ir::Attribute(int64_t{4})}})),
      "node 'n0' (GroupNormalization): the channel count 6 is not a multiple of num_groups 4");
  EXPECT_EQ(msg(makeSpec("InstanceNormalization", {f32({1, 6, 2}), f32({3}), f32({6})},
                         {f32({1, 6, 2})})),
            "node 'n0' (InstanceNormalization): input 1 has shape [3], expected [6]");
  EXPECT_EQ(msg(makeSpec("Einsum", {f32({2, 3}), f32({3, 2})}, {f32({2, 3})},
                         {{"equation", ir::Attribute("ij,jk->ik")}})),
            "node 'n0' (Einsum): output 0 has shape [2,3], expected [2,2]");
  EXPECT_EQ(msg(makeSpec("Einsum", {f32({2, 3}), f32({4, 2})}, {f32({2, 2})},
                         {{"equation", ir::Attribute("ij,jk->ik")}})),
            "node 'n0' (Einsum): equation 'ij,jk->ik': index 'j' has sizes 3 and 4");
  EXPECT_EQ(msg(makeSpec("TopK", {f32({4}), i64({1})}, {f32({5}), i64({5})})),
            "node 'n0' (TopK): k 5 is larger than axis 0 of X [4]");
}

} // namespace
} // namespace dtc::ops::cpu
