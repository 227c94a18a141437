// Tests of the CPU math kernels (Add/Sub/Mul/Div, Relu/Sigmoid/Tanh, Softmax, MatMul, Gemm)
// against naive reference loops computed here, including in-place runs.
#include "tests/unit/cpu/KernelTestUtil.h"

#include <cmath>
#include <limits>

namespace dtc::ops::cpu::test {
namespace {

/// Reference numpy broadcast of a binary op over shapes a, b -> out.
template <typename T, typename F>
std::vector<T> refBinary(const std::vector<T> &a, std::vector<int64_t> sa, const std::vector<T> &b,
                         std::vector<int64_t> sb, const std::vector<int64_t> &out, F fn) {
  size_t r = out.size();
  sa.insert(sa.begin(), r - sa.size(), 1);
  sb.insert(sb.begin(), r - sb.size(), 1);
  std::vector<T> y(static_cast<size_t>(count(out)));
  for (int64_t i = 0; i < count(out); ++i) {
    int64_t rem = i, ia = 0, ib = 0, ma = 1, mb = 1;
    for (size_t d = r; d-- > 0;) {
      int64_t c = rem % out[d];
      rem /= out[d];
      ia += (sa[d] == 1 ? 0 : c) * ma;
      ib += (sb[d] == 1 ? 0 : c) * mb;
      ma *= sa[d];
      mb *= sb[d];
    }
    y[static_cast<size_t>(i)] = fn(a[static_cast<size_t>(ia)], b[static_cast<size_t>(ib)]);
  }
  return y;
}

struct BinCase {
  std::vector<int64_t> a, b, out;
};

float applyF(const std::string &op, float x, float y) {
  return op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : x / y;
}

TEST(CpuBinary, F32BroadcastBothDirections) {
  const std::vector<BinCase> cases = {{{2, 3, 4}, {2, 3, 4}, {2, 3, 4}},
                                      {{2, 3, 4}, {4}, {2, 3, 4}},
                                      {{2, 3, 4}, {3, 1}, {2, 3, 4}},
                                      {{4}, {2, 3, 4}, {2, 3, 4}},
                                      {{3, 1}, {2, 1, 4}, {2, 3, 4}},
                                      {{2, 1, 4}, {3, 1}, {2, 3, 4}},
                                      {{}, {2, 3}, {2, 3}},
                                      {{2, 3}, {}, {2, 3}},
                                      {{1, 3, 1, 5}, {2, 1, 4, 1}, {2, 3, 4, 5}}};
  for (std::string op : {"Add", "Sub", "Mul", "Div"})
    for (const BinCase &c : cases) {
      Buf<float> a = randomBuf(static_cast<size_t>(count(c.a)), 1);
      Buf<float> b = randomBuf(static_cast<size_t>(count(c.b)), 2);
      if (op == "Div")
        for (size_t i = 0; i < b.size(); ++i)
          b[i] = b[i] >= 0 ? b[i] + 0.5f : b[i] - 0.5f;
      Buf<float> y(static_cast<size_t>(count(c.out)));
      runKernel(makeSpec(op, {f32(c.a), f32(c.b)}, {f32(c.out)}), {a.data(), b.data()}, {y.data()});
      auto want = refBinary<float>(a.vec(), c.a, b.vec(), c.b, c.out,
                                   [&](float x, float z) { return applyF(op, x, z); });
      SCOPED_TRACE(op + " " + std::to_string(c.a.size()) + "/" + std::to_string(c.b.size()));
      expectNear(y.data(), want);
    }
}

TEST(CpuBinary, InPlaceOnEitherInput) {
  for (std::string op : {"Add", "Sub", "Mul", "Div"}) {
    // Input 0 has the output shape: output aliases input 0.
    Buf<float> a = randomBuf(24, 3), b = randomBuf(4, 4);
    KernelSpec s = makeSpec(op, {f32({2, 3, 4}), f32({4})}, {f32({2, 3, 4})});
    EXPECT_EQ(inPlaceInput(s), 0);
    auto want = refBinary<float>(a.vec(), {2, 3, 4}, b.vec(), {4}, {2, 3, 4},
                                 [&](float x, float z) { return applyF(op, x, z); });
    runKernel(s, {a.data(), b.data()}, {a.data()});
    expectNear(a.data(), want);
    // Input 1 has the output shape (Add/Mul swap into oneDNN; Sub/Div use the loop).
    Buf<float> c = randomBuf(3, 5), d = randomBuf(6, 6);
    KernelSpec s1 = makeSpec(op, {f32({3, 1}), f32({2, 3, 1})}, {f32({2, 3, 1})});
    EXPECT_EQ(inPlaceInput(s1), 1);
    auto want1 = refBinary<float>(c.vec(), {3, 1}, d.vec(), {2, 3, 1}, {2, 3, 1},
                                  [&](float x, float z) { return applyF(op, x, z); });
    runKernel(s1, {c.data(), d.data()}, {d.data()});
    expectNear(d.data(), want1);
  }
  // Both broadcast: no in-place.
  EXPECT_EQ(inPlaceInput(makeSpec("Add", {f32({3, 1}), f32({1, 4})}, {f32({3, 4})})), -1);
}

TEST(CpuBinary, Int64ArithmeticTruncatesAndWraps) {
  Buf<int64_t> a(std::vector<int64_t>{7, -7, 9, std::numeric_limits<int64_t>::min(),
                                      std::numeric_limits<int64_t>::max(), 6});
  Buf<int64_t> b(std::vector<int64_t>{2, 2, -4, -1, 1, 3});
  auto run = [&](const std::string &op) {
    Buf<int64_t> y(6);
    runKernel(makeSpec(op, {i64({6}), i64({6})}, {i64({6})}), {a.data(), b.data()}, {y.data()});
    return y.vec();
  };
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(run("Div"), (std::vector<int64_t>{3, -3, -2, kMin, kMax, 2}));
  EXPECT_EQ(run("Add"), (std::vector<int64_t>{9, -5, 5, kMax, kMin, 9}));
  EXPECT_EQ(run("Sub"), (std::vector<int64_t>{5, -9, 13, kMin + 1, kMax - 1, 3}));
  EXPECT_EQ(run("Mul"), (std::vector<int64_t>{14, -14, -36, kMin, kMax, 18}));
  // Broadcast a scalar (the shape-arithmetic case): [2,3] * [] and [] - [3].
  Buf<int64_t> s(std::vector<int64_t>{10}), v(std::vector<int64_t>{1, 2, 3}), y(3);
  runKernel(makeSpec("Sub", {i64({}), i64({3})}, {i64({3})}), {s.data(), v.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<int64_t>{9, 8, 7}));
}

TEST(CpuBinary, Int64DivisionByZeroIsAnError) {
  Buf<int64_t> a(std::vector<int64_t>{1, 2}), b(std::vector<int64_t>{1, 0}), y(2);
  CpuContext ctx;
  auto k = createKernel(makeSpec("Div", {i64({2}), i64({2})}, {i64({2})}), ctx);
  ASSERT_TRUE(k.hasValue());
  const void *ins[] = {a.data(), b.data()};
  void *outs[] = {y.data()};
  Status st = (*k)->run({ins, 2, outs, 1});
  EXPECT_EQ(st.message(), "node 'n0' (Div): integer division by zero");
}

TEST(CpuEltwise, ValuesAndInPlace) {
  for (std::string op : {"Relu", "Sigmoid", "Tanh"}) {
    Buf<float> x = randomBuf(60, 7);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] *= 5.f;
    std::vector<float> want;
    for (float v : x.vec())
      want.push_back(op == "Relu"   ? std::max(v, 0.f)
                     : op == "Tanh" ? static_cast<float>(std::tanh(double(v)))
                                    : static_cast<float>(1.0 / (1.0 + std::exp(-double(v)))));
    KernelSpec s = makeSpec(op, {f32({3, 4, 5})}, {f32({3, 4, 5})});
    EXPECT_EQ(inPlaceInput(s), 0);
    Buf<float> y(60);
    runKernel(s, {x.data()}, {y.data()});
    expectNear(y.data(), want);
    runKernel(s, {x.data()}, {x.data()}); // in place
    expectNear(x.data(), want);
  }
}

std::vector<float> refSoftmax(const std::vector<float> &x, const std::vector<int64_t> &shape,
                              int64_t axis) {
  if (axis < 0)
    axis += static_cast<int64_t>(shape.size());
  int64_t outer = 1, inner = 1, n = shape[static_cast<size_t>(axis)];
  for (int64_t i = 0; i < axis; ++i)
    outer *= shape[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(axis) + 1; i < shape.size(); ++i)
    inner *= shape[i];
  std::vector<float> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      double mx = -1e30, sum = 0;
      for (int64_t j = 0; j < n; ++j)
        mx = std::max(mx, double(x[static_cast<size_t>((o * n + j) * inner + in)]));
      for (int64_t j = 0; j < n; ++j)
        sum += std::exp(double(x[static_cast<size_t>((o * n + j) * inner + in)]) - mx);
      for (int64_t j = 0; j < n; ++j) {
        size_t k = static_cast<size_t>((o * n + j) * inner + in);
        y[k] = static_cast<float>(std::exp(double(x[k]) - mx) / sum);
      }
    }
  return y;
}

TEST(CpuSoftmax, Axes) {
  std::vector<int64_t> shape = {3, 4, 5};
  Buf<float> x = randomBuf(60, 8);
  for (int64_t axis : {0, 1, 2, -1, -2}) {
    Buf<float> y(60);
    runKernel(makeSpec("Softmax", {f32(shape)}, {f32(shape)}, {{"axis", axis}}), {x.data()},
              {y.data()});
    SCOPED_TRACE(axis);
    expectNear(y.data(), refSoftmax(x.vec(), shape, axis));
  }
  Buf<float> y(60); // default axis -1
  runKernel(makeSpec("Softmax", {f32(shape)}, {f32(shape)}), {x.data()}, {y.data()});
  expectNear(y.data(), refSoftmax(x.vec(), shape, -1));
  EXPECT_EQ(checkKernel(makeSpec("Softmax", {f32(shape)}, {f32(shape)}, {{"axis", 3}})).message(),
            "node 'n0' (Softmax): axis 3 is out of range for rank 3");
}

/// Reference batched matmul on padded dims [batch..., M, K] x [batch..., K, N].
std::vector<float> refMatMul(const std::vector<float> &a, std::vector<int64_t> sa,
                             const std::vector<float> &b, std::vector<int64_t> sb) {
  if (sa.size() == 1)
    sa.insert(sa.begin(), 1);
  if (sb.size() == 1)
    sb.push_back(1);
  size_t r = std::max(sa.size(), sb.size());
  sa.insert(sa.begin(), r - sa.size(), 1);
  sb.insert(sb.begin(), r - sb.size(), 1);
  int64_t m = sa[r - 2], k = sa[r - 1], n = sb[r - 1];
  std::vector<int64_t> batch;
  for (size_t i = 0; i + 2 < r; ++i)
    batch.push_back(std::max(sa[i], sb[i]));
  int64_t nb = count(batch);
  std::vector<float> y(static_cast<size_t>(nb * m * n));
  for (int64_t bi = 0; bi < nb; ++bi) {
    int64_t rem = bi, oa = 0, ob = 0, ma = 1, mb = 1;
    for (size_t d = batch.size(); d-- > 0;) {
      int64_t c = rem % batch[d];
      rem /= batch[d];
      oa += (sa[d] == 1 ? 0 : c) * ma;
      ob += (sb[d] == 1 ? 0 : c) * mb;
      ma *= sa[d];
      mb *= sb[d];
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t q = 0; q < k; ++q)
          s += double(a[static_cast<size_t>(oa * m * k + i * k + q)]) *
               b[static_cast<size_t>(ob * k * n + q * n + j)];
        y[static_cast<size_t>((bi * m + i) * n + j)] = static_cast<float>(s);
      }
  }
  return y;
}

TEST(CpuMatMul, BatchBroadcastAndVectors) {
  struct Case {
    std::vector<int64_t> a, b, out;
  };
  const std::vector<Case> cases = {{{3, 4}, {4, 5}, {3, 5}},
                                   {{2, 3, 4}, {4, 5}, {2, 3, 5}},
                                   {{3, 4}, {2, 4, 5}, {2, 3, 5}},
                                   {{2, 1, 3, 4}, {1, 3, 4, 5}, {2, 3, 3, 5}},
                                   {{4}, {4, 5}, {5}},
                                   {{3, 4}, {4}, {3}},
                                   {{4}, {4}, {}},
                                   {{4}, {2, 4, 5}, {2, 5}},
                                   {{2, 3, 4}, {4}, {2, 3}}};
  for (const Case &c : cases) {
    Buf<float> a = randomBuf(static_cast<size_t>(count(c.a)), 9);
    Buf<float> b = randomBuf(static_cast<size_t>(count(c.b)), 10);
    Buf<float> y(static_cast<size_t>(count(c.out)));
    runKernel(makeSpec("MatMul", {f32(c.a), f32(c.b)}, {f32(c.out)}), {a.data(), b.data()},
              {y.data()});
    SCOPED_TRACE(std::to_string(c.a.size()) + "x" + std::to_string(c.b.size()));
    expectNear(y.data(), refMatMul(a.vec(), c.a, b.vec(), c.b));
  }
  EXPECT_EQ(checkKernel(makeSpec("MatMul", {f32({3, 4}), f32({5, 6})}, {f32({3, 6})})).message(),
            "node 'n0' (MatMul): inner dimensions differ: [3,4] x [5,6]");
  EXPECT_EQ(checkKernel(makeSpec("MatMul", {f32({3, 4}), f32({4, 6})}, {f32({3, 5})})).message(),
            "node 'n0' (MatMul): output 0 has shape [3,5], expected [3,6]");
}

TEST(CpuGemm, TransposesAlphaBetaAndCBroadcasts) {
  const int64_t m = 3, k = 4, n = 5;
  const std::vector<std::vector<int64_t>> cShapes = {{}, {n}, {1, n}, {m, 1}, {m, n}, {1, 1}};
  for (int64_t ta : {0, 1})
    for (int64_t tb : {0, 1})
      for (float beta : {1.f, 0.5f, 0.f})
        for (float alpha : {1.f, 2.f})
          for (int withC = 0; withC <= static_cast<int>(cShapes.size()); ++withC) {
            std::vector<int64_t> sa = ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k};
            std::vector<int64_t> sb = tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n};
            Buf<float> a = randomBuf(static_cast<size_t>(m * k), 11);
            Buf<float> b = randomBuf(static_cast<size_t>(k * n), 12);
            std::vector<TensorDesc> ins = {f32(sa), f32(sb)};
            std::vector<int64_t> sc;
            Buf<float> c(1);
            if (withC > 0) {
              sc = cShapes[static_cast<size_t>(withC - 1)];
              c = randomBuf(static_cast<size_t>(count(sc)), 13);
              ins.push_back(f32(sc));
            }
            Buf<float> y(static_cast<size_t>(m * n));
            for (size_t i = 0; i < y.size(); ++i)
              y[i] = 1e6f; // overwritten
            std::vector<const void *> ptrs = {a.data(), b.data()};
            if (withC > 0)
              ptrs.push_back(c.data());
            runKernel(makeSpec("Gemm", ins, {f32({m, n})},
                               {{"transA", ta}, {"transB", tb}, {"alpha", alpha}, {"beta", beta}}),
                      ptrs, {y.data()});
            std::vector<float> want(static_cast<size_t>(m * n));
            std::vector<int64_t> c2 = sc;
            c2.insert(c2.begin(), 2 - c2.size(), 1);
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j) {
                double s = 0;
                for (int64_t q = 0; q < k; ++q)
                  s += double(a[static_cast<size_t>(ta ? q * m + i : i * k + q)]) *
                       b[static_cast<size_t>(tb ? j * k + q : q * n + j)];
                s *= alpha;
                if (withC > 0)
                  s += beta * double(c[static_cast<size_t>((c2[0] == 1 ? 0 : i) * c2[1] +
                                                           (c2[1] == 1 ? 0 : j))]);
                want[static_cast<size_t>(i * n + j)] = static_cast<float>(s);
              }
            SCOPED_TRACE("transA=" + std::to_string(ta) + " transB=" + std::to_string(tb) +
                         " alpha=" + std::to_string(alpha) + " beta=" + std::to_string(beta) +
                         " C=" + std::to_string(withC));
            expectNear(y.data(), want);
          }
}

TEST(CpuGemm, EmptyInnerDimension) {
  // K = 0: MatMul gives zeros, Gemm gives beta * C.
  Buf<float> a(1), b(1), c(std::vector<float>{1, 2, 3}), y(6);
  for (size_t i = 0; i < 6; ++i)
    y[i] = 7.f;
  runKernel(makeSpec("MatMul", {f32({2, 0}), f32({0, 3})}, {f32({2, 3})}), {a.data(), b.data()},
            {y.data()});
  EXPECT_EQ(y.vec(), std::vector<float>(6, 0.f));
  runKernel(makeSpec("Gemm", {f32({2, 0}), f32({0, 3}), f32({3})}, {f32({2, 3})}, {{"beta", 2.f}}),
            {a.data(), b.data(), c.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<float>{2, 4, 6, 2, 4, 6}));
}

TEST(CpuGemm, Errors) {
  auto msg = [](const KernelSpec &s) { return checkKernel(s).message(); };
  EXPECT_EQ(msg(makeSpec("Gemm", {f32({3, 4}), f32({4, 5}), f32({2, 5})}, {f32({3, 5})})),
            "node 'n0' (Gemm): C of shape [2,5] does not broadcast to [3,5]");
  EXPECT_EQ(msg(makeSpec("Gemm", {f32({3, 4}), f32({4, 5})}, {f32({3, 5})}, {{"transA", 1}})),
            "node 'n0' (Gemm): inner dimensions differ: A [3,4] (transA=1), B [4,5] (transB=0)");
}

} // namespace
} // namespace dtc::ops::cpu::test
