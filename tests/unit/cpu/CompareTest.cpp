// Tests of the CPU kernels of Equal, Less, Greater, Not and Where against naive reference loops:
// numpy broadcasting (two- and three-way, scalars, size-1 and zero-size dims), f32/i64/bool
// paths, NaN, in-place rules, and check errors for unsupported dtypes and shapes.
#include "tests/unit/cpu/KernelTestUtil.h"

#include <cmath>
#include <limits>

namespace dtc::ops::cpu::test {
namespace {

TensorDesc boolT(std::vector<int64_t> shape) { return {ir::DType::kBool, shape}; }

std::string checkMsg(const KernelSpec &s) { return checkKernel(s).message(); }

std::string dimsStr(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

/// Element index of an operand of shape `in` that numpy-broadcasts to output element `o` of
/// shape `out`.
int64_t sourceIndex(int64_t o, std::vector<int64_t> in, const std::vector<int64_t> &out) {
  in.insert(in.begin(), out.size() - in.size(), 1);
  int64_t idx = 0, mul = 1;
  for (size_t d = out.size(); d-- > 0;) {
    int64_t c = o % out[d];
    o /= out[d];
    idx += (in[d] == 1 ? 0 : c) * mul;
    mul *= in[d];
  }
  return idx;
}

/// Small integers as floats (so that Equal hits), deterministic.
Buf<float> smallInts(size_t n, uint32_t seed) {
  Buf<float> b = randomBuf(n, seed);
  for (size_t i = 0; i < n; ++i)
    b[i] = std::round(b[i] * 2.f);
  return b;
}

struct Shapes {
  std::vector<int64_t> a, b, out;
};
const std::vector<Shapes> kShapes = {
    {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {3, 1}, {2, 3, 4}}, {{4}, {2, 3, 4}, {2, 3, 4}},
    {{3, 1}, {2, 1, 4}, {2, 3, 4}},    {{}, {2, 3}, {2, 3}},           {{}, {}, {}},
    {{1, 5}, {5, 1}, {5, 5}}};

bool cmp(const std::string &op, double x, double y) {
  if (op == "LessOrEqual")
    return x <= y;
  if (op == "GreaterOrEqual")
    return x >= y;
  return op == "Equal" ? x == y : op == "Less" ? x < y : x > y;
}

TEST(CpuCompare, F32AndI64Broadcasting) {
  for (std::string op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"})
    for (const Shapes &s : kShapes) {
      SCOPED_TRACE(op + " " + dimsStr(s.a) + " vs " + dimsStr(s.b));
      size_t na = static_cast<size_t>(count(s.a)), nb = static_cast<size_t>(count(s.b));
      size_t no = static_cast<size_t>(count(s.out));
      Buf<float> a = smallInts(na, 1), b = smallInts(nb, 2);
      Buf<uint8_t> y(no);
      runKernel(makeSpec(op, {f32(s.a), f32(s.b)}, {boolT(s.out)}), {a.data(), b.data()},
                {y.data()});
      Buf<int64_t> ai(na), bi(nb);
      for (size_t i = 0; i < na; ++i)
        ai[i] = static_cast<int64_t>(a[i]) * 1000000000000LL;
      for (size_t i = 0; i < nb; ++i)
        bi[i] = static_cast<int64_t>(b[i]) * 1000000000000LL;
      Buf<uint8_t> yi(no);
      runKernel(makeSpec(op, {i64(s.a), i64(s.b)}, {boolT(s.out)}), {ai.data(), bi.data()},
                {yi.data()});
      int hits = 0;
      for (size_t o = 0; o < no; ++o) {
        int64_t ia = sourceIndex(static_cast<int64_t>(o), s.a, s.out);
        int64_t ib = sourceIndex(static_cast<int64_t>(o), s.b, s.out);
        uint8_t want = cmp(op, a[static_cast<size_t>(ia)], b[static_cast<size_t>(ib)]) ? 1 : 0;
        hits += want;
        ASSERT_EQ(y[o], want) << "f32 at " << o;
        ASSERT_EQ(yi[o], want) << "i64 at " << o;
      }
      if (no >= 20) {
        EXPECT_GT(hits, 0); // the data exercises both outcomes
        EXPECT_LT(hits, static_cast<int>(no));
      }
    }
}

TEST(CpuCompare, NaNAndInt64Extremes) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Buf<float> a(std::vector<float>{nan, nan, 1.f, -0.f}), b(std::vector<float>{nan, 1.f, nan, 0.f});
  for (std::string op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}) {
    Buf<uint8_t> y(4);
    runKernel(makeSpec(op, {f32({4}), f32({4})}, {boolT({4})}), {a.data(), b.data()}, {y.data()});
    // Comparisons with NaN are false (LessOrEqual and GreaterOrEqual too: not Not(Greater));
    // -0 == 0.
    const bool eq = op == "Equal" || op == "LessOrEqual" || op == "GreaterOrEqual";
    EXPECT_EQ(y.vec(), (std::vector<uint8_t>{0, 0, 0, eq ? uint8_t{1} : uint8_t{0}})) << op;
  }
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  Buf<int64_t> c(std::vector<int64_t>{kMax, kMax - 1}), d(std::vector<int64_t>{kMax - 1});
  Buf<uint8_t> y(2);
  runKernel(makeSpec("Greater", {i64({2}), i64({1})}, {boolT({2})}), {c.data(), d.data()},
            {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<uint8_t>{1, 0})); // exact, not through float
}

TEST(CpuCompare, BoolEqualAndNot) {
  Buf<uint8_t> a(std::vector<uint8_t>{0, 1, 0, 1, 2, 0}), b(std::vector<uint8_t>{0, 1}), y(6);
  runKernel(makeSpec("Equal", {boolT({3, 2}), boolT({2})}, {boolT({3, 2})}), {a.data(), b.data()},
            {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<uint8_t>{1, 1, 1, 1, 0, 0}));
  Buf<uint8_t> n(6);
  runKernel(makeSpec("Not", {boolT({2, 3})}, {boolT({2, 3})}), {a.data()}, {n.data()});
  EXPECT_EQ(n.vec(), (std::vector<uint8_t>{1, 0, 1, 0, 0, 1}));
  // Not in place; scalar.
  KernelSpec s = makeSpec("Not", {boolT({})}, {boolT({})});
  EXPECT_EQ(inPlaceInput(s), 0);
  Buf<uint8_t> t(std::vector<uint8_t>{1});
  runKernel(s, {t.data()}, {t.data()});
  EXPECT_EQ(t[0], 0);
}

template <typename T>
void checkWhere(ir::DType dt, const std::vector<T> &xs, const std::vector<T> &ys) {
  const std::vector<int64_t> sc = {2, 1, 4}, sx = {3, 1}, sy = {}, so = {2, 3, 4};
  Buf<uint8_t> c(8);
  for (size_t i = 0; i < 8; ++i)
    c[i] = (i * 7 % 3) == 0 ? 1 : 0;
  Buf<T> x(xs), y(ys), out(24);
  runKernel(makeSpec("Where", {boolT(sc), {dt, sx}, {dt, sy}}, {{dt, so}}),
            {c.data(), x.data(), y.data()}, {out.data()});
  for (int64_t o = 0; o < 24; ++o) {
    bool cond = c[static_cast<size_t>(sourceIndex(o, sc, so))] != 0;
    T want = cond ? xs[static_cast<size_t>(sourceIndex(o, sx, so))] : ys[0];
    ASSERT_EQ(out[static_cast<size_t>(o)], want) << "at " << o;
  }
}

TEST(CpuWhere, ThreeWayBroadcasting) {
  checkWhere<float>(ir::DType::kFloat32, {1.5f, -2.f, 3.f}, {9.f});
  checkWhere<int64_t>(ir::DType::kInt64, {int64_t{1} << 40, -2, 3}, {-(int64_t{1} << 50)});
  checkWhere<int32_t>(ir::DType::kInt32, {7, 8, 9}, {-1});
  checkWhere<uint8_t>(ir::DType::kBool, {1, 0, 1}, {0});
}

TEST(CpuWhere, ScalarsZeroSizeAndInPlace) {
  Buf<uint8_t> c(std::vector<uint8_t>{1});
  Buf<float> x(std::vector<float>{2.f}), y(std::vector<float>{3.f}), o(1);
  runKernel(makeSpec("Where", {boolT({}), f32({}), f32({})}, {f32({})}),
            {c.data(), x.data(), y.data()}, {o.data()});
  EXPECT_EQ(o[0], 2.f);
  // Zero-size output: nothing to do.
  CpuContext ctx;
  auto k = createKernel(makeSpec("Where", {boolT({0, 3}), f32({3}), f32({})}, {f32({0, 3})}), ctx);
  ASSERT_TRUE(k.hasValue()) << k.status().message();
  const void *ins[] = {nullptr, x.data(), y.data()};
  void *outs[] = {nullptr};
  EXPECT_TRUE((*k)->run({ins, 3, outs, 1}).isOk());
  // In place on X (the output's shape), then on Y.
  KernelSpec s = makeSpec("Where", {boolT({4}), f32({4}), f32({})}, {f32({4})});
  EXPECT_EQ(inPlaceInput(s), 1);
  Buf<uint8_t> c4(std::vector<uint8_t>{1, 0, 0, 1});
  Buf<float> x4(std::vector<float>{1.f, 2.f, 3.f, 4.f}), zero(std::vector<float>{0.f});
  runKernel(s, {c4.data(), x4.data(), zero.data()}, {x4.data()});
  EXPECT_EQ(x4.vec(), (std::vector<float>{1.f, 0.f, 0.f, 4.f}));
  EXPECT_EQ(inPlaceInput(makeSpec("Where", {boolT({4}), f32({}), f32({4})}, {f32({4})})), 2);
  EXPECT_EQ(inPlaceInput(makeSpec("Where", {boolT({4}), f32({}), f32({})}, {f32({4})})), -1);
  EXPECT_EQ(inPlaceInput(makeSpec("Less", {f32({4}), f32({4})}, {boolT({4})})), -1);
  EXPECT_EQ(inPlaceInput(makeSpec("Equal", {boolT({4}), boolT({4})}, {boolT({4})})), 0);
}

TEST(CpuCompare, NarrowAndUnsignedIntegerTypes) {
  // u8 compares as unsigned (200 > 100), i8 as signed (-56 < 100), u64 above 2^63 exactly.
  Buf<uint8_t> a(std::vector<uint8_t>{200, 100, 7}), b(std::vector<uint8_t>{100, 200, 7}), y(3);
  TensorDesc u8{ir::DType::kUInt8, {3}}, s8{ir::DType::kInt8, {3}}, u64{ir::DType::kUInt64, {2}};
  runKernel(makeSpec("GreaterOrEqual", {u8, u8}, {boolT({3})}), {a.data(), b.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<uint8_t>{1, 0, 1}));
  runKernel(makeSpec("Less", {s8, s8}, {boolT({3})}), {a.data(), b.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<uint8_t>{1, 0, 0})); // -56 < 100, 100 < -56 false
  Buf<uint64_t> c(std::vector<uint64_t>{(1ull << 63) + 1, 5}),
      d(std::vector<uint64_t>{1ull << 63, 5});
  Buf<uint8_t> z(2);
  runKernel(makeSpec("LessOrEqual", {u64, u64}, {boolT({2})}), {c.data(), d.data()}, {z.data()});
  EXPECT_EQ(z.vec(), (std::vector<uint8_t>{0, 1}));
}

TEST(CpuLogical, AndOrXorBroadcasting) {
  // a [2,1] against b [3]: every pair of truth values; nonzero bytes are true.
  Buf<uint8_t> a(std::vector<uint8_t>{0, 2}), b(std::vector<uint8_t>{0, 1, 1}), y(6);
  struct Case {
    const char *op;
    std::vector<uint8_t> want;
  };
  for (const Case &c : {Case{"And", {0, 0, 0, 0, 1, 1}}, Case{"Or", {0, 1, 1, 1, 1, 1}},
                        Case{"Xor", {0, 1, 1, 1, 0, 0}}}) {
    runKernel(makeSpec(c.op, {boolT({2, 1}), boolT({3})}, {boolT({2, 3})}), {a.data(), b.data()},
              {y.data()});
    EXPECT_EQ(y.vec(), c.want) << c.op;
  }
  EXPECT_EQ(inPlaceInput(makeSpec("And", {boolT({2, 3}), boolT({3})}, {boolT({2, 3})})), 0);
  EXPECT_EQ(inPlaceInput(makeSpec("Or", {boolT({3}), boolT({2, 3})}, {boolT({2, 3})})), 1);
  EXPECT_EQ(checkMsg(makeSpec("Xor", {boolT({2}), f32({2})}, {boolT({2})})),
            "node 'n0' (Xor): input 1 has dtype f32; the CPU kernel supports bool");
  EXPECT_EQ(checkMsg(makeSpec("And", {boolT({2}), boolT({3})}, {boolT({3})})),
            "node 'n0' (And): input shapes [2], [3] do not broadcast");
}

TEST(CpuFloatClass, IsNaNAndIsInf) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  Buf<float> x(std::vector<float>{1.f, nan, inf, -inf, -0.f, 3e38f});
  Buf<uint8_t> y(6);
  runKernel(makeSpec("IsNaN", {f32({6})}, {boolT({6})}), {x.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<uint8_t>{0, 1, 0, 0, 0, 0}));
  runKernel(makeSpec("IsInf", {f32({6})}, {boolT({6})}), {x.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<uint8_t>{0, 0, 1, 1, 0, 0}));
  runKernel(
      makeSpec("IsInf", {f32({6})}, {boolT({6})}, {{"detect_negative", ir::Attribute(int64_t{0})}}),
      {x.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<uint8_t>{0, 0, 1, 0, 0, 0}));
  Buf<double> xd(std::vector<double>{-std::numeric_limits<double>::infinity(), 1e300});
  Buf<uint8_t> yd(2);
  runKernel(makeSpec("IsInf", {{ir::DType::kFloat64, {2}}}, {boolT({2})},
                     {{"detect_positive", ir::Attribute(int64_t{0})}}),
            {xd.data()}, {yd.data()});
  EXPECT_EQ(yd.vec(), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(checkMsg(makeSpec("IsNaN", {i64({2})}, {boolT({2})})),
            "node 'n0' (IsNaN): input 0 has dtype i64; the CPU kernel supports f32 or f64");
  EXPECT_EQ(checkMsg(makeSpec("IsInf", {f32({2})}, {boolT({2})},
                              {{"detect_positive", ir::Attribute(1.5f)}})),
            "node 'n0' (IsInf): attribute 'detect_positive' is float, expected int");
}

TEST(CpuCompare, CheckErrors) {
  EXPECT_EQ(checkMsg(makeSpec("Less", {boolT({2}), boolT({2})}, {boolT({2})})),
            "node 'n0' (Less): input 0 has dtype bool; the CPU kernel supports f32, f64, i8, i16, "
            "i32, i64, u8, u16, u32 or u64");
  EXPECT_EQ(checkMsg(makeSpec("Equal", {f32({2}), i64({2})}, {boolT({2})})),
            "node 'n0' (Equal): input 1 has dtype i64; the CPU kernel supports f32");
  EXPECT_EQ(checkMsg(makeSpec("Greater", {f32({2}), f32({2})}, {f32({2})})),
            "node 'n0' (Greater): output 0 has dtype f32; the CPU kernel supports bool");
  EXPECT_EQ(checkMsg(makeSpec("Equal", {f32({2, 3}), f32({2})}, {boolT({2, 3})})),
            "node 'n0' (Equal): input shapes [2,3], [2] do not broadcast");
  EXPECT_EQ(checkMsg(makeSpec("Equal", {f32({2, 3}), f32({3})}, {boolT({3})})),
            "node 'n0' (Equal): output 0 has shape [3], expected [2,3]");
  EXPECT_EQ(checkMsg(makeSpec("Not", {f32({2})}, {boolT({2})})),
            "node 'n0' (Not): input 0 has dtype f32; the CPU kernel supports bool");
  EXPECT_EQ(checkMsg(makeSpec("Where", {f32({2}), f32({2}), f32({2})}, {f32({2})})),
            "node 'n0' (Where): input 0 has dtype f32; the CPU kernel supports bool");
  EXPECT_EQ(checkMsg(makeSpec("Where", {boolT({2}), f32({2}), i64({2})}, {f32({2})})),
            "node 'n0' (Where): input 2 has dtype i64; the CPU kernel supports f32");
  EXPECT_EQ(checkMsg(makeSpec("Where",
                              {boolT({2}), {ir::DType::kFloat64, {2}}, {ir::DType::kFloat64, {2}}},
                              {{ir::DType::kFloat64, {2}}})),
            "node 'n0' (Where): input 1 has dtype f64; the CPU kernel supports f32, i64, i32 or "
            "bool");
  EXPECT_EQ(checkMsg(makeSpec("Where", {boolT({2}), f32({3}), f32({})}, {f32({3})})),
            "node 'n0' (Where): input shapes [2], [3], [] do not broadcast");
  EXPECT_EQ(checkMsg(makeSpec("Where", {boolT({2, 1}), f32({3}), f32({})}, {f32({2, 3, 1})})),
            "node 'n0' (Where): output 0 has shape [2,3,1], expected [2,3]");
}

} // namespace
} // namespace dtc::ops::cpu::test
