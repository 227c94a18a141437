// Tests of the CPU kernels of the variadic elementwise ops (Max, Min, Sum, Mean), CumSum,
// GatherElements and its gradient ai.dtc.GatherElementsGrad against naive reference loops:
// broadcasting of 1 to 3 inputs, NaN, integer types, every CumSum direction with the axis read
// at run time, negative and out-of-range indices, in-place rules and check errors.
#include "tests/unit/cpu/KernelTestUtil.h"

#include <cmath>
#include <limits>

namespace dtc::ops::cpu::test {
namespace {

std::string checkMsg(const KernelSpec &s) { return checkKernel(s).message(); }

TensorDesc boolT(std::vector<int64_t> shape) { return {ir::DType::kBool, shape}; }

/// Element index of an operand of shape `in` that numpy-broadcasts to output element `o`.
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

TEST(CpuVariadic, MaxMinSumMeanBroadcasting) {
  const std::vector<std::vector<int64_t>> shapes = {{2, 1, 4}, {3, 1}, {}};
  const std::vector<int64_t> out = {2, 3, 4};
  std::vector<Buf<float>> ins;
  for (size_t k = 0; k < shapes.size(); ++k)
    ins.push_back(randomBuf(static_cast<size_t>(count(shapes[k])), static_cast<uint32_t>(k + 3)));
  for (std::string op : {"Max", "Min", "Sum", "Mean"})
    for (size_t n = 1; n <= shapes.size(); ++n) {
      SCOPED_TRACE(op + " of " + std::to_string(n));
      std::vector<TensorDesc> descs;
      std::vector<const void *> ptrs;
      std::vector<std::vector<int64_t>> used;
      for (size_t k = 0; k < n; ++k) {
        descs.push_back(f32(shapes[k]));
        ptrs.push_back(ins[k].data());
        used.push_back(shapes[k]);
      }
      std::vector<int64_t> o = n == 1 ? shapes[0] : n == 2 ? std::vector<int64_t>{2, 3, 4} : out;
      Buf<float> y(static_cast<size_t>(count(o)));
      runKernel(makeSpec(op, descs, {f32(o)}), ptrs, {y.data()});
      std::vector<float> want(y.size());
      for (size_t i = 0; i < want.size(); ++i) {
        float acc = ins[0][static_cast<size_t>(sourceIndex(static_cast<int64_t>(i), used[0], o))];
        for (size_t k = 1; k < n; ++k) {
          float v = ins[k][static_cast<size_t>(sourceIndex(static_cast<int64_t>(i), used[k], o))];
          acc = op == "Max" ? std::max(acc, v) : op == "Min" ? std::min(acc, v) : acc + v;
        }
        want[i] = op == "Mean" ? acc / static_cast<float>(n) : acc;
      }
      expectNear(y.data(), want, 1e-6);
    }
}

TEST(CpuVariadic, NaNPropagatesAndIntegersAreExact) {
  const float nan = std::nanf("");
  Buf<float> a(std::vector<float>{nan, 1.f, 2.f}), b(std::vector<float>{0.f, nan, 3.f}), y(3);
  for (std::string op : {"Max", "Min"}) {
    runKernel(makeSpec(op, {f32({3}), f32({3})}, {f32({3})}), {a.data(), b.data()}, {y.data()});
    EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1])) << op;
    EXPECT_EQ(y[2], op == "Max" ? 3.f : 2.f);
  }
  const int64_t big = std::numeric_limits<int64_t>::max();
  Buf<int64_t> c(std::vector<int64_t>{big, -5}), d(std::vector<int64_t>{big - 1}), z(2);
  runKernel(makeSpec("Min", {i64({2}), i64({1})}, {i64({2})}), {c.data(), d.data()}, {z.data()});
  EXPECT_EQ(z.vec(), (std::vector<int64_t>{big - 1, -5}));
  Buf<uint8_t> e(std::vector<uint8_t>{200, 3}), f(std::vector<uint8_t>{100, 4}), w(2);
  TensorDesc u8{ir::DType::kUInt8, {2}};
  runKernel(makeSpec("Max", {u8, u8}, {u8}), {e.data(), f.data()}, {w.data()});
  EXPECT_EQ(w.vec(), (std::vector<uint8_t>{200, 4}));
}

TEST(CpuVariadic, InPlaceAndChecks) {
  EXPECT_EQ(inPlaceInput(makeSpec("Max", {f32({2, 3}), f32({3})}, {f32({2, 3})})), 0);
  EXPECT_EQ(inPlaceInput(makeSpec("Sum", {f32({3}), f32({2, 3})}, {f32({2, 3})})), -1);
  EXPECT_EQ(checkMsg(makeSpec("Sum", {i64({2}), i64({2})}, {i64({2})})),
            "node 'n0' (Sum): input 0 has dtype i64; the CPU kernel supports f32 or f64");
  EXPECT_EQ(checkMsg(makeSpec("Max", {f32({2}), i64({2})}, {f32({2})})),
            "node 'n0' (Max): input 1 has dtype i64; the CPU kernel supports f32");
  EXPECT_EQ(checkMsg(makeSpec("Mean", {f32({2}), f32({3})}, {f32({3})})),
            "node 'n0' (Mean): input shapes [2], [3] do not broadcast");
  EXPECT_EQ(checkMsg(makeSpec("Min", {f32({2}), f32({2})}, {f32({3})})),
            "node 'n0' (Min): output 0 has shape [3], expected [2]");
}

/// Reference CumSum of a row-major [outer, n, inner] tensor along the middle axis.
std::vector<double> cumsumRef(const std::vector<double> &x, int64_t outer, int64_t n, int64_t inner,
                              bool exclusive, bool reverse) {
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t k = 0; k < n; ++k) {
          bool take = reverse ? (exclusive ? k > j : k >= j) : (exclusive ? k < j : k <= j);
          if (take)
            s += x[static_cast<size_t>((o * n + k) * inner + i)];
        }
        y[static_cast<size_t>((o * n + j) * inner + i)] = s;
      }
  return y;
}

TEST(CpuCumSum, EveryAxisAndDirection) {
  const std::vector<int64_t> shape = {2, 3, 4};
  Buf<float> x = randomBuf(24, 5);
  std::vector<double> xd(x.data(), x.data() + 24);
  for (int64_t axis : {0, 1, 2, -1})
    for (int64_t exclusive : {0, 1})
      for (int64_t reverse : {0, 1}) {
        SCOPED_TRACE("axis " + std::to_string(axis) + " exclusive " + std::to_string(exclusive) +
                     " reverse " + std::to_string(reverse));
        Buf<int64_t> a(std::vector<int64_t>{axis});
        Buf<float> y(24);
        runKernel(makeSpec("CumSum", {f32(shape), i64({})}, {f32(shape)},
                           {{"exclusive", ir::Attribute(exclusive)},
                            {"reverse", ir::Attribute(reverse)}}),
                  {x.data(), a.data()}, {y.data()});
        int64_t ax = axis < 0 ? axis + 3 : axis;
        int64_t outer = 1, inner = 1;
        for (int64_t k = 0; k < 3; ++k)
          (k < ax ? outer : inner) *= k == ax ? 1 : shape[static_cast<size_t>(k)];
        std::vector<double> want =
            cumsumRef(xd, outer, shape[static_cast<size_t>(ax)], inner, exclusive, reverse);
        expectNear(y.data(), std::vector<float>(want.begin(), want.end()), 1e-6);
      }
}

TEST(CpuCumSum, Int32AxisInt64DataInPlaceAndErrors) {
  Buf<int64_t> x(std::vector<int64_t>{1, 2, 3, 4000000000000LL});
  int32_t axis = 0;
  runKernel(makeSpec("CumSum", {i64({4}), {ir::DType::kInt32, {1}}}, {i64({4})}), {x.data(), &axis},
            {x.data()}); // in place
  EXPECT_EQ(x.vec(), (std::vector<int64_t>{1, 3, 6, 4000000000006LL}));
  EXPECT_EQ(inPlaceInput(makeSpec("CumSum", {f32({4}), i64({})}, {f32({4})})), 0);
  // An axis out of range is a run-time error naming the node.
  CpuContext ctx;
  auto k = createKernel(makeSpec("CumSum", {f32({2, 2}), i64({})}, {f32({2, 2})}), ctx);
  ASSERT_TRUE(k.hasValue()) << k.status().message();
  Buf<float> xf(4), yf(4);
  int64_t bad = 2;
  std::vector<const void *> ins = {xf.data(), &bad};
  std::vector<void *> outs = {yf.data()};
  EXPECT_EQ((*k)->run({ins.data(), 2, outs.data(), 1}).message(),
            "node 'n0' (CumSum): axis 2 is out of range for rank 2");
  EXPECT_EQ(checkMsg(makeSpec("CumSum", {f32({2}), i64({2})}, {f32({2})})),
            "node 'n0' (CumSum): input 1 (axis) has shape [2]; expected a scalar");
  EXPECT_EQ(checkMsg(makeSpec("CumSum", {boolT({2}), i64({})}, {boolT({2})})),
            "node 'n0' (CumSum): input 0 has dtype bool; the CPU kernel supports f32, f64, i32 "
            "or i64");
}

TEST(CpuGatherElements, AxesNegativeIndicesAndSmallerIndices) {
  // data [3,4] = 0..11; indices [2,3] (smaller than data on the other axis).
  Buf<float> data(12);
  for (size_t i = 0; i < 12; ++i)
    data[i] = static_cast<float>(i);
  Buf<int64_t> idx(std::vector<int64_t>{2, -1, 0, 1, 1, -3});
  Buf<float> y(6);
  runKernel(makeSpec("GatherElements", {f32({3, 4}), i64({2, 3})}, {f32({2, 3})}),
            {data.data(), idx.data()}, {y.data()});
  // axis 0: out[i][j] = data[idx[i][j]][j]
  EXPECT_EQ(y.vec(), (std::vector<float>{8, 9, 2, 4, 5, 2}));
  Buf<int32_t> idx32(std::vector<int32_t>{3, -4, 1, 0, 2, -1});
  runKernel(makeSpec("GatherElements", {f32({3, 4}), {ir::DType::kInt32, {2, 3}}}, {f32({2, 3})},
                     {{"axis", ir::Attribute(int64_t{-1})}}),
            {data.data(), idx32.data()}, {y.data()});
  // axis 1: out[i][j] = data[i][idx[i][j]]
  EXPECT_EQ(y.vec(), (std::vector<float>{3, 0, 1, 4, 6, 7}));
  // 3-D, axis 1, i64 data.
  Buf<int64_t> d3(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  Buf<int64_t> i3(std::vector<int64_t>{1, 0, 0, 0});
  Buf<int64_t> y3(4);
  runKernel(makeSpec("GatherElements", {i64({2, 2, 2}), i64({2, 1, 2})}, {i64({2, 1, 2})},
                     {{"axis", ir::Attribute(int64_t{1})}}),
            {d3.data(), i3.data()}, {y3.data()});
  EXPECT_EQ(y3.vec(), (std::vector<int64_t>{2, 1, 4, 5}));
}

TEST(CpuGatherElements, RuntimeAndCheckErrors) {
  CpuContext ctx;
  auto k = createKernel(makeSpec("GatherElements", {f32({2, 2}), i64({2, 2})}, {f32({2, 2})}), ctx);
  ASSERT_TRUE(k.hasValue()) << k.status().message();
  Buf<float> x(4), y(4);
  Buf<int64_t> idx(std::vector<int64_t>{0, 1, 2, 0});
  std::vector<const void *> ins = {x.data(), idx.data()};
  std::vector<void *> outs = {y.data()};
  EXPECT_EQ((*k)->run({ins.data(), 2, outs.data(), 1}).message(),
            "node 'n0' (GatherElements): index 2 is out of range for axis 0 of size 2");
  EXPECT_EQ(checkMsg(makeSpec("GatherElements", {f32({2, 2}), i64({2})}, {f32({2})})),
            "node 'n0' (GatherElements): indices [2] must have the rank of data [2,2]");
  EXPECT_EQ(checkMsg(makeSpec("GatherElements", {f32({2, 2}), i64({1, 3})}, {f32({1, 3})})),
            "node 'n0' (GatherElements): indices [1,3] is larger than data [2,2] on axis 1");
  EXPECT_EQ(checkMsg(makeSpec("GatherElements", {f32({2, 2}), i64({2, 2})}, {f32({2, 2})},
                              {{"axis", ir::Attribute(int64_t{2})}})),
            "node 'n0' (GatherElements): axis 2 is out of range for rank 2");
}

TEST(CpuGatherND, TuplesSlicesAndBatchDims) {
  Buf<float> data(24);
  for (size_t i = 0; i < 24; ++i)
    data[i] = static_cast<float>(i);
  // data [2,3,4]; tuples of 2 select rows: (1,2) -> 20..23, (-2,0) -> 0..3.
  Buf<int64_t> idx(std::vector<int64_t>{1, 2, -2, 0});
  Buf<float> y(8);
  runKernel(makeSpec("GatherND", {f32({2, 3, 4}), i64({2, 2})}, {f32({2, 4})}),
            {data.data(), idx.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<float>{20, 21, 22, 23, 0, 1, 2, 3}));
  // batch_dims 1: per batch one tuple (k) of length 2 -> data[b, i, j].
  Buf<int64_t> bidx(std::vector<int64_t>{0, 3, 2, -1});
  Buf<float> z(2);
  runKernel(makeSpec("GatherND", {f32({2, 3, 4}), i64({2, 2})}, {f32({2})},
                     {{"batch_dims", ir::Attribute(int64_t{1})}}),
            {data.data(), bidx.data()}, {z.data()});
  EXPECT_EQ(z.vec(), (std::vector<float>{3, 23}));
  CpuContext ctx;
  auto k = createKernel(makeSpec("GatherND", {f32({2, 3, 4}), i64({1, 1})}, {f32({1, 3, 4})}), ctx);
  ASSERT_TRUE(k.hasValue()) << k.status().message();
  Buf<int64_t> bad(std::vector<int64_t>{2});
  Buf<float> out(12);
  std::vector<const void *> ins = {data.data(), bad.data()};
  std::vector<void *> outs = {out.data()};
  EXPECT_EQ((*k)->run({ins.data(), 2, outs.data(), 1}).message(),
            "node 'n0' (GatherND): index 2 is out of range for axis 0 of size 2");
  EXPECT_EQ(checkMsg(makeSpec("GatherND", {f32({2, 3}), i64({1, 3})}, {f32({1})})),
            "node 'n0' (GatherND): the last dim of indices [1,3] must be in [1, 2]");
  EXPECT_EQ(checkMsg(makeSpec("GatherND", {f32({2, 3}), i64({3, 1})}, {f32({3, 3})},
                              {{"batch_dims", ir::Attribute(int64_t{1})}})),
            "node 'n0' (GatherND): batch dim 0 differs: data [2,3], indices [3,1]");
}

TEST(CpuMod, SignsBroadcastingAndDivisionByZero) {
  Buf<int64_t> a(std::vector<int64_t>{7, -7, 7, -7, std::numeric_limits<int64_t>::min()});
  Buf<int64_t> b(std::vector<int64_t>{3, 3, -3, -3, -1}), c(5);
  runKernel(makeSpec("Mod", {i64({5}), i64({5})}, {i64({5})}), {a.data(), b.data()}, {c.data()});
  EXPECT_EQ(c.vec(), (std::vector<int64_t>{1, 2, -2, -1, 0})); // Python's %
  runKernel(
      makeSpec("Mod", {i64({5}), i64({5})}, {i64({5})}, {{"fmod", ir::Attribute(int64_t{1})}}),
      {a.data(), b.data()}, {c.data()});
  EXPECT_EQ(c.vec(), (std::vector<int64_t>{1, -1, 1, -1, 0})); // C's fmod
  Buf<float> x(std::vector<float>{5.5f, -5.5f}), y(std::vector<float>{2.f}), z(2);
  runKernel(
      makeSpec("Mod", {f32({2}), f32({1})}, {f32({2})}, {{"fmod", ir::Attribute(int64_t{1})}}),
      {x.data(), y.data()}, {z.data()});
  EXPECT_EQ(z.vec(), (std::vector<float>{1.5f, -1.5f}));
  CpuContext ctx;
  auto k = createKernel(makeSpec("Mod", {i64({2}), i64({1})}, {i64({2})}), ctx);
  ASSERT_TRUE(k.hasValue()) << k.status().message();
  Buf<int64_t> zero(std::vector<int64_t>{0}), out(2);
  std::vector<const void *> ins = {a.data(), zero.data()};
  std::vector<void *> outs = {out.data()};
  EXPECT_EQ((*k)->run({ins.data(), 2, outs.data(), 1}).message(),
            "node 'n0' (Mod): integer division by zero");
  EXPECT_EQ(checkMsg(makeSpec("Mod", {f32({2}), f32({2})}, {f32({2})})),
            "node 'n0' (Mod): fmod must be 1 for float inputs");
}

TEST(CpuGatherElementsGrad, ScatterAddsRepeatedIndices) {
  // dx [2,3] = 0; axis 1: dx[i][idx[i][j]] += dy[i][j].
  Buf<float> dy(std::vector<float>{1, 2, 4, 8}), dx(6);
  Buf<int64_t> idx(std::vector<int64_t>{2, 2, -3, 1});
  KernelSpec s = makeSpec(
      "GatherElementsGrad", {f32({2, 2}), i64({2, 2})}, {f32({2, 3})},
      {{"axis", ir::Attribute(int64_t{1})}, {"shape", ir::Attribute(std::vector<int64_t>{2, 3})}});
  s.domain = "ai.dtc";
  runKernel(s, {dy.data(), idx.data()}, {dx.data()});
  EXPECT_EQ(dx.vec(), (std::vector<float>{0, 0, 3, 4, 8, 0}));
  KernelSpec bad = s;
  bad.inputs[1] = i64({2, 3});
  EXPECT_EQ(checkMsg(bad), "node 'n0' (ai.dtc.GatherElementsGrad): dy [2,2] and indices [2,3] must "
                           "have one shape of the rank of output 0 [2,3]");
}

} // namespace
} // namespace dtc::ops::cpu::test
