// Tests of channels-last operands in the CPU kernels (Conv, pools, BatchNormalization, the
// activations, Add/Sub/Mul/Div, Concat), of ai.dtc.Reorder and of ai.dtc.FusedConv: every
// channels-last run is compared with the row-major run of the same data, permuted here.
#include "ops/cpu/OneDnnUtil.h"
#include "tests/unit/cpu/KernelTestUtil.h"

#include <algorithm>

namespace dtc::ops::cpu::test {
namespace {

constexpr Layout kRM = Layout::kRowMajor, kCL = Layout::kChannelsLast;

TensorDesc withLayout(TensorDesc t, Layout l) {
  t.layout = l;
  return t;
}

/// Memory offset of the row-major element `i` of `shape` in a channels-last tensor.
int64_t channelsLastOffset(int64_t i, const std::vector<int64_t> &shape) {
  size_t rank = shape.size();
  std::vector<int64_t> idx(rank);
  for (size_t d = rank; d-- > 0;) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  int64_t off = idx[0];
  for (size_t d = 2; d < rank; ++d)
    off = off * shape[d] + idx[d];
  return off * shape[1] + idx[1];
}

/// Row-major data -> the same tensor in channels-last memory order.
template <typename T> Buf<T> toCL(const Buf<T> &rm, const std::vector<int64_t> &shape) {
  Buf<T> out(rm.size());
  for (int64_t i = 0; i < count(shape); ++i)
    out[static_cast<size_t>(channelsLastOffset(i, shape))] = rm[static_cast<size_t>(i)];
  return out;
}

/// Channels-last data -> row-major.
template <typename T> std::vector<T> fromCL(const T *cl, const std::vector<int64_t> &shape) {
  std::vector<T> out(static_cast<size_t>(count(shape)));
  for (int64_t i = 0; i < count(shape); ++i)
    out[static_cast<size_t>(i)] = cl[channelsLastOffset(i, shape)];
  return out;
}

/// Data of `rm` in layout `l`.
Buf<float> inLayout(const Buf<float> &rm, const std::vector<int64_t> &shape, Layout l) {
  return l == kCL ? toCL(rm, shape) : rm;
}

/// Output data in layout `l` read back as row-major.
std::vector<float> rowMajor(const Buf<float> &b, const std::vector<int64_t> &shape, Layout l) {
  return l == kCL ? fromCL(b.data(), shape) : b.vec();
}

std::string msg(const KernelSpec &s) { return checkKernel(s).message(); }

/// Runs a one-input one-output f32 op row-major and with both operands in layout `l`; expects
/// the same values.
void expectSameOneInput(const std::string &op, const std::vector<int64_t> &xs,
                        const std::vector<int64_t> &ys,
                        const std::map<std::string, ir::Attribute> &attrs, uint32_t seed) {
  Buf<float> x = randomBuf(static_cast<size_t>(count(xs)), seed);
  Buf<float> yRef(static_cast<size_t>(count(ys))), y(static_cast<size_t>(count(ys)));
  runKernel(makeSpec(op, {f32(xs)}, {f32(ys)}, attrs), {x.data()}, {yRef.data()});
  Buf<float> xcl = toCL(x, xs);
  KernelSpec s = makeSpec(op, {withLayout(f32(xs), kCL)}, {withLayout(f32(ys), kCL)}, attrs);
  ASSERT_TRUE(checkKernel(s).isOk()) << msg(s);
  runKernel(s, {xcl.data()}, {y.data()});
  expectNear(fromCL(y.data(), ys).data(), yRef.vec());
}

// ---- Conv and FusedConv ------------------------------------------------------------------------

struct ConvCase {
  std::vector<int64_t> x, w, y;
  std::map<std::string, ir::Attribute> attrs;
};

std::vector<ConvCase> convCases() {
  return {
      {{2, 16, 8, 8}, {16, 16, 3, 3}, {2, 16, 8, 8}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}},
      {{2, 4, 9, 8},
       {6, 2, 3, 2},
       {2, 6, 5, 7},
       {{"strides", std::vector<int64_t>{2, 1}},
        {"dilations", std::vector<int64_t>{1, 2}},
        {"pads", std::vector<int64_t>{1, 0, 2, 1}},
        {"group", int64_t{2}}}},
      {{2, 3, 10},
       {4, 3, 3},
       {2, 4, 5},
       {{"strides", std::vector<int64_t>{2}}, {"pads", std::vector<int64_t>{1, 1}}}},
      {{1, 2, 5, 4, 6}, {4, 2, 2, 3, 2}, {1, 4, 4, 2, 5}, {}},
  };
}

TEST(CpuLayout, ConvEverySrcDstLayoutCombination) {
  uint32_t seed = 100;
  for (const ConvCase &c : convCases())
    for (bool bias : {false, true}) {
      Buf<float> x = randomBuf(static_cast<size_t>(count(c.x)), ++seed);
      Buf<float> w = randomBuf(static_cast<size_t>(count(c.w)), ++seed);
      Buf<float> b = randomBuf(static_cast<size_t>(c.w[0]), ++seed);
      std::vector<TensorDesc> ins = {f32(c.x), f32(c.w)};
      if (bias)
        ins.push_back(f32({c.w[0]}));
      Buf<float> yRef(static_cast<size_t>(count(c.y)));
      std::vector<const void *> ptrs = {x.data(), w.data()};
      if (bias)
        ptrs.push_back(b.data());
      runKernel(makeSpec("Conv", ins, {f32(c.y)}, c.attrs), ptrs, {yRef.data()});
      for (Layout src : {kRM, kCL})
        for (Layout dst : {kRM, kCL}) {
          SCOPED_TRACE("x " + shapeStr(c.x) + " bias " + std::to_string(bias) + " " +
                       layoutName(src) + " -> " + layoutName(dst));
          std::vector<TensorDesc> lins = ins;
          lins[0].layout = src;
          KernelSpec s = makeSpec("Conv", lins, {withLayout(f32(c.y), dst)}, c.attrs);
          ASSERT_TRUE(checkKernel(s).isOk()) << msg(s);
          Buf<float> xl = inLayout(x, c.x, src), y(yRef.size());
          ptrs[0] = xl.data();
          runKernel(s, ptrs, {y.data()});
          expectNear(rowMajor(y, c.y, dst).data(), yRef.vec(), 1e-4);
        }
    }
}

TEST(CpuLayout, ConvWeightsMustBeRowMajor) {
  KernelSpec s =
      makeSpec("Conv", {withLayout(f32({1, 3, 5, 5}), kCL), withLayout(f32({4, 3, 3, 3}), kCL)},
               {withLayout(f32({1, 4, 3, 3}), kCL)});
  EXPECT_EQ(msg(s), "node 'n0' (Conv): input 1 (weights) is channels-last; the CPU kernel takes "
                    "row-major weights");
}

/// Reference of FusedConv: the row-major Conv kernel, then + Z, then Relu.
std::vector<float> fusedRef(const ConvCase &c, const Buf<float> &x, const Buf<float> &w,
                            const float *b, const float *z, bool relu) {
  std::vector<TensorDesc> ins = {f32(c.x), f32(c.w)};
  if (b)
    ins.push_back(f32({c.w[0]}));
  Buf<float> y(static_cast<size_t>(count(c.y)));
  CpuContext ctx;
  auto k = createKernel(makeSpec("Conv", ins, {f32(c.y)}, c.attrs), ctx);
  EXPECT_TRUE(k.hasValue());
  if (!k.hasValue())
    return {};
  std::vector<const void *> ptrs = {x.data(), w.data(), b};
  void *out = y.data();
  EXPECT_TRUE((*k)->run({ptrs.data(), ins.size(), &out, 1}).isOk());
  std::vector<float> r = y.vec();
  for (size_t i = 0; i < r.size(); ++i) {
    if (z)
      r[i] += z[i];
    if (relu)
      r[i] = std::max(r[i], 0.f);
  }
  return r;
}

KernelSpec fusedSpec(const ConvCase &c, Layout src, Layout dst, bool bias, bool z,
                     const std::string &act) {
  std::vector<TensorDesc> ins = {withLayout(f32(c.x), src), f32(c.w)};
  if (bias || z)
    ins.push_back(bias ? f32({c.w[0]}) : TensorDesc{});
  if (z)
    ins.push_back(withLayout(f32(c.y), dst));
  std::map<std::string, ir::Attribute> attrs = c.attrs;
  attrs["activation"] = act;
  KernelSpec s = makeSpec("FusedConv", ins, {withLayout(f32(c.y), dst)}, attrs);
  s.domain = "ai.dtc";
  return s;
}

TEST(CpuLayout, FusedConvBiasSumReluLayoutsAndInPlace) {
  std::vector<ConvCase> cases = convCases();
  uint32_t seed = 200;
  for (size_t ci : {size_t{0}, size_t{1}, size_t{3}})
    for (Layout src : {kRM, kCL})
      for (Layout dst : {kRM, kCL})
        for (bool bias : {false, true})
          for (bool hasZ : {false, true})
            for (const std::string act : {"", "Relu"})
              for (bool inPlace : {false, true}) {
                if (inPlace && !hasZ)
                  continue;
                const ConvCase &c = cases[ci];
                SCOPED_TRACE("case " + std::to_string(ci) + " " + layoutName(src) + " -> " +
                             layoutName(dst) + " bias " + std::to_string(bias) + " Z " +
                             std::to_string(hasZ) + " act '" + act + "' in place " +
                             std::to_string(inPlace));
                Buf<float> x = randomBuf(static_cast<size_t>(count(c.x)), ++seed);
                Buf<float> w = randomBuf(static_cast<size_t>(count(c.w)), ++seed);
                Buf<float> b = randomBuf(static_cast<size_t>(c.w[0]), ++seed);
                Buf<float> z = randomBuf(static_cast<size_t>(count(c.y)), ++seed);
                std::vector<float> want = fusedRef(c, x, w, bias ? b.data() : nullptr,
                                                   hasZ ? z.data() : nullptr, act == "Relu");
                KernelSpec s = fusedSpec(c, src, dst, bias, hasZ, act);
                ASSERT_TRUE(checkKernel(s).isOk()) << msg(s);
                EXPECT_EQ(inPlaceInput(s), hasZ ? 3 : -1);
                Buf<float> xl = inLayout(x, c.x, src), zl = inLayout(z, c.y, dst);
                const Buf<float> zCopy = zl;
                Buf<float> y(static_cast<size_t>(count(c.y)));
                float *out = inPlace ? zl.data() : y.data();
                std::vector<const void *> ptrs = {xl.data(), w.data()};
                if (bias || hasZ)
                  ptrs.push_back(bias ? b.data() : nullptr);
                if (hasZ)
                  ptrs.push_back(zl.data());
                CpuContext ctx;
                auto k = createKernel(s, ctx);
                ASSERT_TRUE(k.hasValue()) << k.status().message();
                void *outs[] = {out};
                // Twice: a second run must not add Z again (unless Z was overwritten in place).
                for (int run = 0; run < (inPlace ? 1 : 2); ++run) {
                  std::fill(y.data(), y.data() + y.size(), 7.f);
                  Status st = (*k)->run({ptrs.data(), ptrs.size(), outs, 1});
                  ASSERT_TRUE(st.isOk()) << st.message();
                  Buf<float> got(y.size());
                  std::copy(out, out + y.size(), got.data());
                  expectNear(rowMajor(got, c.y, dst).data(), want, 1e-4);
                }
                if (!inPlace) {
                  EXPECT_EQ(zl.vec(), zCopy.vec()) << "Z was modified";
                }
              }
}

TEST(CpuLayout, FusedConvErrors) {
  const ConvCase c = convCases()[0];
  KernelSpec s = fusedSpec(c, kCL, kCL, true, true, "Tanh");
  EXPECT_EQ(msg(s), "node 'n0' (ai.dtc.FusedConv): activation 'Tanh' is not supported by the CPU "
                    "kernel (expected \"\" or \"Relu\")");
  EXPECT_EQ(inPlaceInput(s), -1);
  s.attrs["activation"] = int64_t{1};
  EXPECT_EQ(msg(s), "node 'n0' (ai.dtc.FusedConv): attribute 'activation' must be a string");
  s = fusedSpec(c, kCL, kCL, true, true, "Relu");
  s.inputs[3].shape = {2, 16, 8, 7};
  EXPECT_EQ(msg(s), "node 'n0' (ai.dtc.FusedConv): input 3 (Z) is f32[2,16,8,7] channels-last; "
                    "expected the output's f32[2,16,8,8] channels-last");
  EXPECT_EQ(inPlaceInput(s), -1);
  s = fusedSpec(c, kCL, kCL, false, true, "");
  s.inputs[3].layout = kRM;
  EXPECT_EQ(msg(s), "node 'n0' (ai.dtc.FusedConv): input 3 (Z) is f32[2,16,8,8]; expected the "
                    "output's f32[2,16,8,8] channels-last");
  s = fusedSpec(c, kCL, kCL, false, true, "");
  s.inputs[3].dtype = ir::DType::kInt64;
  EXPECT_EQ(msg(s), "node 'n0' (ai.dtc.FusedConv): input 3 has dtype i64; the CPU kernel "
                    "supports f32");
  s = fusedSpec(c, kCL, kCL, false, true, "");
  s.inputs.push_back(f32({1}));
  EXPECT_EQ(msg(s), "node 'n0' (ai.dtc.FusedConv): expected 2 to 4 inputs, got 5");
}

// ---- pools, BatchNormalization, activations ----------------------------------------------------

TEST(CpuLayout, PoolsChannelsLast) {
  using V = std::vector<int64_t>;
  expectSameOneInput("MaxPool", {2, 16, 9, 9}, {2, 16, 5, 5},
                     {{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"pads", V{1, 1, 1, 1}}}, 1);
  expectSameOneInput("MaxPool", {2, 5, 11}, {2, 5, 5}, {{"kernel_shape", V{3}}, {"strides", V{2}}},
                     2);
  expectSameOneInput("MaxPool", {1, 3, 4, 5, 6}, {1, 3, 3, 4, 5}, {{"kernel_shape", V{2, 2, 2}}},
                     3);
  expectSameOneInput("AveragePool", {2, 6, 7, 8}, {2, 6, 4, 4},
                     {{"kernel_shape", V{3, 2}}, {"strides", V{2, 2}}, {"pads", V{1, 0, 1, 0}}}, 4);
  expectSameOneInput("AveragePool", {2, 6, 7, 8}, {2, 6, 4, 4},
                     {{"kernel_shape", V{3, 2}},
                      {"strides", V{2, 2}},
                      {"pads", V{1, 0, 1, 0}},
                      {"count_include_pad", int64_t{1}}},
                     5);
  // count_include_pad with ceil windows past the pads: the hand-written loop.
  expectSameOneInput("AveragePool", {2, 3, 8, 7}, {2, 3, 5, 4},
                     {{"kernel_shape", V{3, 2}},
                      {"strides", V{2, 2}},
                      {"pads", V{1, 0, 1, 0}},
                      {"ceil_mode", int64_t{1}},
                      {"count_include_pad", int64_t{1}}},
                     6);
  expectSameOneInput("AveragePool", {2, 4, 5, 5, 5}, {2, 4, 3, 3, 3},
                     {{"kernel_shape", V{2, 2, 2}},
                      {"strides", V{2, 2, 2}},
                      {"pads", V{0, 0, 0, 0, 0, 0}},
                      {"ceil_mode", int64_t{1}},
                      {"count_include_pad", int64_t{1}}},
                     7);
  expectSameOneInput("GlobalAveragePool", {2, 16, 7, 7}, {2, 16, 1, 1}, {}, 8);
  expectSameOneInput("GlobalAveragePool", {3, 5, 9}, {3, 5, 1}, {}, 9);
  KernelSpec s = makeSpec("MaxPool", {withLayout(f32({1, 2, 4, 4}), kCL)}, {f32({1, 2, 2, 2})},
                          {{"kernel_shape", V{2, 2}}, {"strides", V{2, 2}}});
  EXPECT_EQ(msg(s), "node 'n0' (MaxPool): input 0 is channels-last but output 0 is row-major; "
                    "the CPU kernel needs one layout");
}

TEST(CpuLayout, BatchNormChannelsLast) {
  const std::vector<int64_t> xs = {2, 8, 5, 6};
  Buf<float> x = randomBuf(static_cast<size_t>(count(xs)), 11);
  Buf<float> scale = randomBuf(8, 12), bias = randomBuf(8, 13), mean = randomBuf(8, 14);
  Buf<float> var = randomBuf(8, 15);
  for (size_t i = 0; i < 8; ++i)
    var[i] = var[i] * var[i] + 0.1f;
  std::vector<TensorDesc> cs(4, f32({8}));
  auto spec = [&](Layout lx, Layout ly) {
    std::vector<TensorDesc> ins = {withLayout(f32(xs), lx)};
    ins.insert(ins.end(), cs.begin(), cs.end());
    return makeSpec("BatchNormalization", ins, {withLayout(f32(xs), ly)}, {{"epsilon", 1e-3f}});
  };
  Buf<float> yRef(x.size()), y(x.size());
  runKernel(spec(kRM, kRM), {x.data(), scale.data(), bias.data(), mean.data(), var.data()},
            {yRef.data()});
  // The row-major run against the formula, so a wrong channel mapping cannot hide.
  EXPECT_NEAR(yRef[31], scale[1] * (x[31] - mean[1]) / std::sqrt(var[1] + 1e-3f) + bias[1], 1e-5);
  Buf<float> xcl = toCL(x, xs);
  runKernel(spec(kCL, kCL), {xcl.data(), scale.data(), bias.data(), mean.data(), var.data()},
            {y.data()});
  expectNear(fromCL(y.data(), xs).data(), yRef.vec());
  EXPECT_EQ(msg(spec(kRM, kCL)), "node 'n0' (BatchNormalization): input 0 is row-major but "
                                 "output 0 is channels-last; the CPU kernel needs one layout");
}

TEST(CpuLayout, ActivationsChannelsLast) {
  for (const std::string op : {"Relu", "Sigmoid", "Tanh"}) {
    SCOPED_TRACE(op);
    expectSameOneInput(op, {2, 3, 4, 5}, {2, 3, 4, 5}, {}, 21);
    expectSameOneInput(op, {2, 3, 7}, {2, 3, 7}, {}, 22);
    expectSameOneInput(op, {1, 2, 3, 4, 5}, {1, 2, 3, 4, 5}, {}, 23);
    EXPECT_EQ(inPlaceInput(makeSpec(op, {withLayout(f32({2, 3, 4}), kCL)},
                                    {withLayout(f32({2, 3, 4}), kCL)})),
              0);
    EXPECT_EQ(msg(makeSpec(op, {withLayout(f32({2, 3, 4}), kCL)}, {f32({2, 3, 4})})),
              "node 'n0' (" + op +
                  "): input 0 is channels-last but output 0 is row-major; the CPU kernel needs "
                  "one layout");
  }
}

// ---- Add, Sub, Mul, Div ------------------------------------------------------------------------

TEST(CpuLayout, BinarySameShapeChannelsLast) {
  const std::vector<int64_t> xs = {2, 3, 4, 5};
  Buf<float> a = randomBuf(static_cast<size_t>(count(xs)), 31);
  Buf<float> b = randomBuf(static_cast<size_t>(count(xs)), 32);
  for (size_t i = 0; i < b.size(); ++i)
    b[i] += b[i] >= 0 ? 0.5f : -0.5f; // no division by ~0
  Buf<float> acl = toCL(a, xs), bcl = toCL(b, xs);
  for (const std::string op : {"Add", "Sub", "Mul", "Div"}) {
    SCOPED_TRACE(op);
    Buf<float> yRef(a.size()), y(a.size());
    runKernel(makeSpec(op, {f32(xs), f32(xs)}, {f32(xs)}), {a.data(), b.data()}, {yRef.data()});
    KernelSpec s = makeSpec(op, {withLayout(f32(xs), kCL), withLayout(f32(xs), kCL)},
                            {withLayout(f32(xs), kCL)});
    EXPECT_EQ(inPlaceInput(s), 0);
    runKernel(s, {acl.data(), bcl.data()}, {y.data()});
    expectNear(fromCL(y.data(), xs).data(), yRef.vec());
    // In place over input 0.
    Buf<float> inPlace = acl;
    runKernel(s, {inPlace.data(), bcl.data()}, {inPlace.data()});
    expectNear(fromCL(inPlace.data(), xs).data(), yRef.vec());
  }
  // i64 takes the loop.
  const std::vector<int64_t> is = {1, 2, 3};
  Buf<int64_t> ia(std::vector<int64_t>{1, 2, 3, 4, 5, 6}),
      ib(std::vector<int64_t>{10, 20, 30, 40, 50, 60});
  Buf<int64_t> iacl = toCL(ia, is), ibcl = toCL(ib, is), iy(6);
  TensorDesc t = withLayout(i64(is), kCL);
  runKernel(makeSpec("Sub", {t, t}, {t}), {iacl.data(), ibcl.data()}, {iy.data()});
  EXPECT_EQ(fromCL(iy.data(), is), (std::vector<int64_t>{-9, -18, -27, -36, -45, -54}));
}

TEST(CpuLayout, BinaryChannelsLastNeedsOneShapeAndLayout) {
  TensorDesc x = withLayout(f32({2, 3, 4, 4}), kCL);
  EXPECT_EQ(msg(makeSpec("Add", {x, withLayout(f32({1, 3, 1, 1}), kCL)}, {x})),
            "node 'n0' (Add): channels-last operands need one shape and one layout (no "
            "broadcasting); got f32[2,3,4,4] channels-last, f32[1,3,1,1] channels-last -> "
            "f32[2,3,4,4] channels-last");
  EXPECT_EQ(msg(makeSpec("Mul", {x, f32({3, 1, 1})}, {x})),
            "node 'n0' (Mul): channels-last operands need one shape and one layout (no "
            "broadcasting); got f32[2,3,4,4] channels-last, f32[3,1,1] -> f32[2,3,4,4] "
            "channels-last");
  EXPECT_EQ(msg(makeSpec("Sub", {x, f32({2, 3, 4, 4})}, {x})),
            "node 'n0' (Sub): channels-last operands need one shape and one layout (no "
            "broadcasting); got f32[2,3,4,4] channels-last, f32[2,3,4,4] -> f32[2,3,4,4] "
            "channels-last");
  EXPECT_FALSE(checkKernel(makeSpec("Div", {x, x}, {f32({2, 3, 4, 4})})).isOk());
  // Broadcasting stays fine row-major.
  EXPECT_TRUE(checkKernel(makeSpec("Add", {f32({2, 3, 4, 4}), f32({3, 1, 1})}, {f32({2, 3, 4, 4})}))
                  .isOk());
}

// ---- Concat ------------------------------------------------------------------------------------

TEST(CpuLayout, ConcatChannelsLastEveryAxis) {
  const std::vector<int64_t> base = {2, 3, 4, 5};
  for (int64_t axis : {0, 1, 2, 3, -1, -3}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    size_t a = static_cast<size_t>(axis < 0 ? axis + 4 : axis);
    std::vector<int64_t> s0 = base, s1 = base, s2 = base, ys = base;
    s1[a] = 2;
    s2[a] = 1;
    ys[a] = base[a] + 3;
    Buf<float> x0 = randomBuf(static_cast<size_t>(count(s0)), 41);
    Buf<float> x1 = randomBuf(static_cast<size_t>(count(s1)), 42);
    Buf<float> x2 = randomBuf(static_cast<size_t>(count(s2)), 43);
    Buf<float> yRef(static_cast<size_t>(count(ys))), y(yRef.size());
    std::map<std::string, ir::Attribute> attrs = {{"axis", axis}};
    runKernel(makeSpec("Concat", {f32(s0), f32(s1), f32(s2)}, {f32(ys)}, attrs),
              {x0.data(), x1.data(), x2.data()}, {yRef.data()});
    Buf<float> c0 = toCL(x0, s0), c1 = toCL(x1, s1), c2 = toCL(x2, s2);
    KernelSpec s = makeSpec(
        "Concat", {withLayout(f32(s0), kCL), withLayout(f32(s1), kCL), withLayout(f32(s2), kCL)},
        {withLayout(f32(ys), kCL)}, attrs);
    runKernel(s, {c0.data(), c1.data(), c2.data()}, {y.data()});
    expectNear(fromCL(y.data(), ys).data(), yRef.vec());
  }
}

TEST(CpuLayout, ConcatChannelsLastLoopPaths) {
  // i64 (the copy loop in memory order) along C and along H.
  const std::vector<int64_t> s0 = {2, 2, 3}, s1 = {2, 1, 3};
  Buf<int64_t> x0(12), x1(6);
  for (size_t i = 0; i < 12; ++i)
    x0[i] = static_cast<int64_t>(i);
  for (size_t i = 0; i < 6; ++i)
    x1[i] = 100 + static_cast<int64_t>(i);
  Buf<int64_t> c0 = toCL(x0, s0), c1 = toCL(x1, s1), y(18);
  runKernel(makeSpec("Concat", {withLayout(i64(s0), kCL), withLayout(i64(s1), kCL)},
                     {withLayout(i64({2, 3, 3}), kCL)}, {{"axis", int64_t{1}}}),
            {c0.data(), c1.data()}, {y.data()});
  EXPECT_EQ(fromCL(y.data(), {2, 3, 3}), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 100, 101, 102, 6,
                                                               7, 8, 9, 10, 11, 103, 104, 105}));
  const std::vector<int64_t> t1 = {2, 2, 1};
  Buf<int64_t> x2(std::vector<int64_t>{-1, -2, -3, -4}), c2 = toCL(x2, t1), y2(16);
  runKernel(makeSpec("Concat", {withLayout(i64(s0), kCL), withLayout(i64(t1), kCL)},
                     {withLayout(i64({2, 2, 4}), kCL)}, {{"axis", int64_t{-1}}}),
            {c0.data(), c2.data()}, {y2.data()});
  EXPECT_EQ(fromCL(y2.data(), {2, 2, 4}),
            (std::vector<int64_t>{0, 1, 2, -1, 3, 4, 5, -2, 6, 7, 8, -3, 9, 10, 11, -4}));
  // f32 with a single non-empty input (also the loop).
  Buf<float> f = randomBuf(12, 44), fcl = toCL(f, s0), fy(12);
  runKernel(makeSpec("Concat", {withLayout(f32(s0), kCL), withLayout(f32({2, 0, 3}), kCL)},
                     {withLayout(f32(s0), kCL)}, {{"axis", int64_t{1}}}),
            {fcl.data(), nullptr}, {fy.data()});
  EXPECT_EQ(fromCL(fy.data(), s0), f.vec());
  EXPECT_EQ(msg(makeSpec("Concat", {withLayout(f32(s0), kCL), f32(s1)},
                         {withLayout(f32({2, 3, 3}), kCL)}, {{"axis", int64_t{1}}})),
            "node 'n0' (Concat): input 1 is row-major but output 0 is channels-last; the CPU "
            "kernel needs one layout");
}

// ---- ai.dtc.Reorder ----------------------------------------------------------------------------

KernelSpec reorderSpec(const std::vector<int64_t> &shape, Layout from, Layout to) {
  KernelSpec s = makeSpec("Reorder", {withLayout(f32(shape), from)}, {withLayout(f32(shape), to)});
  s.domain = "ai.dtc";
  return s;
}

TEST(CpuLayout, ReorderBothDirectionsRank3To5) {
  for (const std::vector<int64_t> &shape :
       {std::vector<int64_t>{2, 3, 5}, std::vector<int64_t>{2, 3, 4, 5},
        std::vector<int64_t>{2, 3, 4, 5, 6}, std::vector<int64_t>{1, 17, 1, 3}}) {
    SCOPED_TRACE(shapeStr(shape));
    Buf<float> x = randomBuf(static_cast<size_t>(count(shape)), 51);
    Buf<float> cl(x.size()), back(x.size());
    KernelSpec to = reorderSpec(shape, kRM, kCL), from = reorderSpec(shape, kCL, kRM);
    EXPECT_EQ(inPlaceInput(to), -1);
    runKernel(to, {x.data()}, {cl.data()});
    EXPECT_EQ(cl.vec(), toCL(x, shape).vec());
    runKernel(from, {cl.data()}, {back.data()});
    EXPECT_EQ(back.vec(), x.vec());
    // Same layout on both sides: a copy.
    Buf<float> copy(x.size());
    runKernel(reorderSpec(shape, kCL, kCL), {cl.data()}, {copy.data()});
    EXPECT_EQ(copy.vec(), cl.vec());
  }
}

TEST(CpuLayout, ReorderErrors) {
  KernelSpec s = reorderSpec({2, 3, 4}, kRM, kCL);
  s.outputs[0].shape = {2, 4, 3};
  EXPECT_EQ(msg(s), "node 'n0' (ai.dtc.Reorder): output 0 has shape [2,4,3], expected [2,3,4]");
  s = reorderSpec({2, 3, 4}, kRM, kCL);
  s.inputs[0].dtype = ir::DType::kInt64;
  EXPECT_EQ(msg(s), "node 'n0' (ai.dtc.Reorder): input 0 has dtype i64; the CPU kernel supports "
                    "f32 or bf16");
  s = reorderSpec({2, 3}, kRM, kCL);
  EXPECT_EQ(msg(s), "node 'n0' (ai.dtc.Reorder): output 0 is channels-last but has rank 2 (needs "
                    "rank >= 3)");
  EXPECT_TRUE(hasKernel("ai.dtc", "Reorder"));
  EXPECT_TRUE(hasKernel("ai.dtc", "FusedConv"));
}

} // namespace
} // namespace dtc::ops::cpu::test
