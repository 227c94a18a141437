// Unit tests of dims (symbolic monomials), shapes and dtypes.
#include "compiler/ir/Types.h"

#include <gtest/gtest.h>

using namespace dtc::ir;

TEST(Dim, StaticSymbolicUnknown) {
  EXPECT_TRUE(Dim::fixed(3).isStatic());
  EXPECT_EQ(Dim::fixed(3).value(), 3);
  EXPECT_TRUE(Dim::symbol("N").isSymbolic());
  EXPECT_TRUE(Dim::unknown().isUnknown());
  EXPECT_EQ(Dim::symbol("N").str(), "N");
  EXPECT_EQ(Dim::unknown().str(), "?");
}

TEST(Dim, MonomialArithmetic) {
  Dim n = Dim::symbol("N");
  EXPECT_EQ((n * Dim::fixed(3)).str(), "3*N");
  EXPECT_EQ((Dim::fixed(3) * n), (n * Dim::fixed(3)));
  EXPECT_EQ((n * Dim::symbol("B")).str(), "B*N"); // symbols sorted
  auto q = (n * Dim::fixed(12)).dividedBy(Dim::fixed(4));
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->str(), "3*N");
  EXPECT_FALSE((n * Dim::fixed(3)).dividedBy(Dim::fixed(2)).has_value());
  auto one = n.dividedBy(n);
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(*one, Dim::fixed(1));
  EXPECT_FALSE(Dim::fixed(6).dividedBy(n).has_value());
  EXPECT_EQ((n + n).str(), "2*N");
  EXPECT_TRUE((n + Dim::fixed(1)).isUnknown());
  EXPECT_TRUE((n * Dim::unknown()).isUnknown());
  EXPECT_EQ(n * Dim::fixed(0), Dim::fixed(0));
}

TEST(Dim, OverflowBecomesUnknown) {
  Dim big = Dim::fixed(int64_t{1} << 40);
  EXPECT_TRUE((big * big).isUnknown());
}

TEST(Shape, ElementCountAndText) {
  Shape s = Shape::ofStatic({2, 3, 4});
  EXPECT_TRUE(s.isStatic());
  EXPECT_EQ(*s.numElements(), 24);
  EXPECT_EQ(s.str(), "[2,3,4]");
  EXPECT_EQ(Shape::ofStatic({}).str(), "[]");
  EXPECT_EQ(*Shape::ofStatic({}).numElements(), 1);
  EXPECT_EQ(Shape::unknownRank().str(), "[*]");
  Shape sym({Dim::symbol("N"), Dim::fixed(3)});
  EXPECT_FALSE(sym.isStatic());
  EXPECT_FALSE(sym.numElements().has_value());
  EXPECT_EQ(sym.product().str(), "3*N");
  EXPECT_FALSE(Shape::ofStatic({int64_t{1} << 40, int64_t{1} << 40}).numElements().has_value());
}

TEST(DType, NamesSizesAndRoundTrip) {
  EXPECT_STREQ(dtypeName(DType::kFloat32), "f32");
  EXPECT_EQ(dtypeSize(DType::kInt64), 8);
  EXPECT_EQ(dtypeSize(DType::kBool), 1);
  EXPECT_EQ(*dtypeFromName("i64"), DType::kInt64);
  EXPECT_FALSE(dtypeFromName("complex64").has_value());
  EXPECT_TRUE(isKnownDType(16));
  EXPECT_FALSE(isKnownDType(14)); // complex128
  EXPECT_TRUE(isFloat(DType::kBFloat16));
  EXPECT_FALSE(isInteger(DType::kBool));
  EXPECT_EQ((TensorType{DType::kFloat32, Shape({Dim::symbol("N"), Dim::fixed(10)})}).str(),
            "f32[N,10]");
}

TEST(CheckedProduct, RejectsNegativeAndOverflow) {
  EXPECT_EQ(*checkedProduct({2, 3}), 6);
  EXPECT_FALSE(checkedProduct({-1, 3}).has_value());
  EXPECT_FALSE(checkedProduct({int64_t{1} << 62, 4}).has_value());
}
