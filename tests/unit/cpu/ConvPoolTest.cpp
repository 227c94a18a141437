// Tests of the CPU Conv, MaxPool/AveragePool/GlobalAveragePool and BatchNormalization kernels
// against naive reference loops computed here (padding, strides, dilations, groups, ceil_mode,
// count_include_pad).
#include "tests/unit/cpu/KernelTestUtil.h"

#include <algorithm>
#include <cmath>

namespace dtc::ops::cpu::test {
namespace {

/// Window attributes on up to 3 spatial dims (unused dims are size 1 / stride 1 / pad 0).
struct Win {
  std::vector<int64_t> kernel, strides, dilations, pads;
};

std::vector<int64_t> outShape(const std::vector<int64_t> &x, int64_t c, const Win &w,
                              bool ceil = false) {
  std::vector<int64_t> out = {x[0], c};
  size_t sp = x.size() - 2;
  for (size_t i = 0; i < sp; ++i) {
    int64_t eff = w.dilations[i] * (w.kernel[i] - 1) + 1;
    int64_t span = x[2 + i] + w.pads[i] + w.pads[i + sp] - eff, s = w.strides[i];
    int64_t o = (ceil ? (span + s - 1) / s : span / s) + 1;
    if (ceil && (o - 1) * s >= x[2 + i] + w.pads[i])
      --o;
    out.push_back(o);
  }
  return out;
}

/// Naive grouped convolution over any spatial rank (flattened index arithmetic).
std::vector<float> refConv(const Buf<float> &x, const std::vector<int64_t> &xs, const Buf<float> &w,
                           const std::vector<int64_t> &ws, const float *bias, const Win &win,
                           int64_t group, const std::vector<int64_t> &ys) {
  size_t sp = xs.size() - 2;
  int64_t cin = xs[1], cout = ws[0], cpg = cin / group, mpg = cout / group;
  std::vector<int64_t> inSp(xs.begin() + 2, xs.end()), outSp(ys.begin() + 2, ys.end()),
      kSp(ws.begin() + 2, ws.end());
  int64_t inN = count(inSp), outN = count(outSp), kN = count(kSp);
  std::vector<float> y(static_cast<size_t>(count(ys)));
  for (int64_t n = 0; n < xs[0]; ++n)
    for (int64_t m = 0; m < cout; ++m)
      for (int64_t o = 0; o < outN; ++o) {
        std::vector<int64_t> oc(sp);
        for (int64_t r = o, d = static_cast<int64_t>(sp) - 1; d >= 0; --d) {
          oc[static_cast<size_t>(d)] = r % outSp[static_cast<size_t>(d)];
          r /= outSp[static_cast<size_t>(d)];
        }
        double s = bias ? bias[m] : 0.0;
        int64_t g = m / mpg;
        for (int64_t c = 0; c < cpg; ++c)
          for (int64_t kk = 0; kk < kN; ++kk) {
            int64_t ioff = 0;
            bool inside = true;
            for (int64_t r = kk, d = static_cast<int64_t>(sp) - 1; d >= 0; --d) {
              size_t ud = static_cast<size_t>(d);
              int64_t kc = r % kSp[ud];
              r /= kSp[ud];
              int64_t pos = oc[ud] * win.strides[ud] - win.pads[ud] + kc * win.dilations[ud];
              if (pos < 0 || pos >= inSp[ud])
                inside = false;
              int64_t mult = 1;
              for (size_t e = ud + 1; e < sp; ++e)
                mult *= inSp[e];
              ioff += pos * mult;
            }
            if (!inside)
              continue;
            s += double(x[static_cast<size_t>((n * cin + g * cpg + c) * inN + ioff)]) *
                 w[static_cast<size_t>((m * cpg + c) * kN + kk)];
          }
        y[static_cast<size_t>((n * cout + m) * outN + o)] = static_cast<float>(s);
      }
  return y;
}

struct ConvCase {
  std::vector<int64_t> x;
  int64_t cout, group;
  Win win;
  bool bias;
};

TEST(CpuConv, PaddingStridesDilationsGroups) {
  const std::vector<ConvCase> cases = {
      {{2, 3, 7, 6}, 4, 1, {{3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}}, true},
      {{2, 4, 9, 8}, 6, 2, {{3, 2}, {2, 1}, {1, 2}, {1, 0, 2, 1}}, true},
      {{1, 6, 8, 8}, 6, 6, {{3, 3}, {1, 2}, {2, 1}, {2, 1, 0, 1}}, false},
      {{2, 3, 10}, 4, 1, {{3}, {2}, {2}, {1, 2}}, true},
      {{1, 2, 5, 4, 6}, 4, 2, {{2, 3, 2}, {1, 1, 2}, {2, 1, 1}, {1, 0, 1, 0, 1, 1}}, true},
      {{8, 16, 12, 12}, 32, 1, {{3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}}, true}};
  for (const ConvCase &c : cases) {
    std::vector<int64_t> ws = {c.cout, c.x[1] / c.group};
    ws.insert(ws.end(), c.win.kernel.begin(), c.win.kernel.end());
    std::vector<int64_t> ys = outShape(c.x, c.cout, c.win);
    Buf<float> x = randomBuf(static_cast<size_t>(count(c.x)), 21);
    Buf<float> w = randomBuf(static_cast<size_t>(count(ws)), 22);
    Buf<float> b = randomBuf(static_cast<size_t>(c.cout), 23);
    Buf<float> y(static_cast<size_t>(count(ys)));
    std::vector<TensorDesc> ins = {f32(c.x), f32(ws)};
    std::vector<const void *> ptrs = {x.data(), w.data()};
    if (c.bias) {
      ins.push_back(f32({c.cout}));
      ptrs.push_back(b.data());
    }
    KernelSpec s = makeSpec("Conv", ins, {f32(ys)},
                            {{"kernel_shape", c.win.kernel},
                             {"strides", c.win.strides},
                             {"dilations", c.win.dilations},
                             {"pads", c.win.pads},
                             {"group", c.group}});
    EXPECT_EQ(inPlaceInput(s), -1);
    runKernel(s, ptrs, {y.data()});
    SCOPED_TRACE("x=" + std::to_string(count(c.x)) + " group=" + std::to_string(c.group));
    expectNear(y.data(), refConv(x, c.x, w, ws, c.bias ? b.data() : nullptr, c.win, c.group, ys));
  }
}

TEST(CpuConv, Errors) {
  auto msg = [](const KernelSpec &s) { return checkKernel(s).message(); };
  EXPECT_EQ(msg(makeSpec("Conv", {f32({1, 0, 5, 5}), f32({4, 0, 3, 3})}, {f32({1, 4, 3, 3})})),
            "node 'n0' (Conv): input [1,0,5,5] or weights [4,0,3,3] have a zero-sized channel "
            "or spatial dim");
  KernelSpec s = makeSpec("Conv", {f32({1, 3, 5, 5}), f32({4, 3, 3, 3})}, {f32({1, 4, 3, 3})},
                          {{"auto_pad", "SAME_UPPER"}});
  EXPECT_EQ(msg(s), "node 'n0' (Conv): auto_pad=SAME_UPPER is not supported by the CPU kernel "
                    "(expected explicit pads)");
  s.attrs = {{"group", int64_t{2}}};
  EXPECT_EQ(msg(s), "node 'n0' (Conv): group 2 does not fit input [1,3,5,5] and weights "
                    "[4,3,3,3]");
  s.attrs = {};
  s.outputs = {f32({1, 4, 5, 5})};
  EXPECT_EQ(msg(s), "node 'n0' (Conv): output 0 has shape [1,4,5,5], expected [1,4,3,3]");
}

/// Naive pooling on 2-D spatial dims, ONNX semantics (divisor with count_include_pad counts the
/// explicit pads but not the ceil_mode extension).
std::vector<float> refPool2d(const Buf<float> &x, const std::vector<int64_t> &xs, const Win &w,
                             bool max, bool includePad, const std::vector<int64_t> &ys) {
  std::vector<float> y(static_cast<size_t>(count(ys)));
  size_t o = 0;
  for (int64_t nc = 0; nc < xs[0] * xs[1]; ++nc)
    for (int64_t oh = 0; oh < ys[2]; ++oh)
      for (int64_t ow = 0; ow < ys[3]; ++ow) {
        double acc = max ? -1e30 : 0.0;
        int64_t cnt = 0, padded = 0;
        for (int64_t kh = 0; kh < w.kernel[0]; ++kh)
          for (int64_t kw = 0; kw < w.kernel[1]; ++kw) {
            int64_t h = oh * w.strides[0] - w.pads[0] + kh * w.dilations[0];
            int64_t ww = ow * w.strides[1] - w.pads[1] + kw * w.dilations[1];
            if (h < xs[2] + w.pads[2] && ww < xs[3] + w.pads[3])
              ++padded;
            if (h < 0 || h >= xs[2] || ww < 0 || ww >= xs[3])
              continue;
            double v = x[static_cast<size_t>((nc * xs[2] + h) * xs[3] + ww)];
            acc = max ? std::max(acc, v) : acc + v;
            ++cnt;
          }
        y[o++] = static_cast<float>(max ? acc : acc / double(includePad ? padded : cnt));
      }
  return y;
}

TEST(CpuPool, MaxAndAverageWithCeilModeAndPads) {
  const std::vector<int64_t> xs = {2, 3, 7, 8};
  Buf<float> x = randomBuf(static_cast<size_t>(count(xs)), 31);
  const std::vector<Win> wins = {{{2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}},
                                 {{3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}},
                                 {{3, 2}, {2, 3}, {1, 1}, {1, 0, 2, 1}},
                                 {{2, 3}, {1, 2}, {2, 2}, {1, 1, 0, 1}}};
  for (const std::string op : {"MaxPool", "AveragePool"})
    for (int64_t ceil : {0, 1})
      for (int64_t include : {0, 1})
        for (size_t wi = 0; wi < wins.size(); ++wi) {
          const Win &w = wins[wi];
          if (op == "AveragePool" && w.dilations[0] != 1 && include == 1)
            continue;
          std::vector<int64_t> ys = outShape(xs, xs[1], w, ceil == 1);
          std::map<std::string, ir::Attribute> attrs = {{"kernel_shape", w.kernel},
                                                        {"strides", w.strides},
                                                        {"pads", w.pads},
                                                        {"ceil_mode", ceil}};
          if (op == "MaxPool")
            attrs["dilations"] = w.dilations;
          else
            attrs["count_include_pad"] = include;
          if (op == "AveragePool" && w.dilations[0] != 1)
            attrs["dilations"] = w.dilations;
          Buf<float> y(static_cast<size_t>(count(ys)));
          runKernel(makeSpec(op, {f32(xs)}, {f32(ys)}, attrs), {x.data()}, {y.data()});
          SCOPED_TRACE(op + " ceil=" + std::to_string(ceil) +
                       " include=" + std::to_string(include) + " window " + std::to_string(wi));
          expectNear(y.data(), refPool2d(x, xs, w, op == "MaxPool", include == 1, ys));
        }
}

TEST(CpuPool, CeilModeOutputSizes) {
  // 7 wide, kernel 2, stride 2: floor gives 3, ceil gives 4; with pad 1 on both sides and
  // kernel 2 stride 2, ceil would give 5 but the last window would start in the right padding.
  Buf<float> x = randomBuf(7, 32);
  KernelSpec s = makeSpec("MaxPool", {f32({1, 1, 7})}, {f32({1, 1, 4})},
                          {{"kernel_shape", std::vector<int64_t>{2}},
                           {"strides", std::vector<int64_t>{2}},
                           {"ceil_mode", int64_t{1}}});
  Buf<float> y(4);
  runKernel(s, {x.data()}, {y.data()});
  EXPECT_FLOAT_EQ(y[3], x[6]);
  EXPECT_FLOAT_EQ(y[0], std::max(x[0], x[1]));
  s.attrs["pads"] = std::vector<int64_t>{1, 1};
  EXPECT_TRUE(checkKernel(s).isOk()) << checkKernel(s).message();
  s.outputs = {f32({1, 1, 5})};
  EXPECT_EQ(checkKernel(s).message(),
            "node 'n0' (MaxPool): output 0 has shape [1,1,5], expected [1,1,4]");
}

TEST(CpuPool, GlobalAveragePool) {
  for (std::vector<int64_t> xs : {std::vector<int64_t>{2, 3, 5, 4}, {2, 3, 6}, {1, 2, 3, 2, 4}}) {
    Buf<float> x = randomBuf(static_cast<size_t>(count(xs)), 33);
    std::vector<int64_t> ys(xs.size(), 1);
    ys[0] = xs[0];
    ys[1] = xs[1];
    Buf<float> y(static_cast<size_t>(count(ys)));
    runKernel(makeSpec("GlobalAveragePool", {f32(xs)}, {f32(ys)}), {x.data()}, {y.data()});
    int64_t sp = count(xs) / (xs[0] * xs[1]);
    std::vector<float> want;
    for (int64_t nc = 0; nc < xs[0] * xs[1]; ++nc) {
      double s = 0;
      for (int64_t i = 0; i < sp; ++i)
        s += x[static_cast<size_t>(nc * sp + i)];
      want.push_back(static_cast<float>(s / double(sp)));
    }
    expectNear(y.data(), want);
  }
}

TEST(CpuBatchNorm, InferenceMode) {
  const std::vector<int64_t> xs = {2, 3, 4, 5};
  Buf<float> x = randomBuf(120, 41), scale = randomBuf(3, 42), bias = randomBuf(3, 43),
             mean = randomBuf(3, 44), var = randomBuf(3, 45);
  for (size_t i = 0; i < 3; ++i)
    var[i] = std::fabs(var[i]) + 0.1f;
  const float eps = 1e-3f;
  Buf<float> y(120);
  KernelSpec s = makeSpec("BatchNormalization", {f32(xs), f32({3}), f32({3}), f32({3}), f32({3})},
                          {f32(xs)}, {{"epsilon", eps}});
  runKernel(s, {x.data(), scale.data(), bias.data(), mean.data(), var.data()}, {y.data()});
  std::vector<float> want(120);
  for (size_t i = 0; i < 120; ++i) {
    size_t c = (i / 20) % 3;
    want[i] = static_cast<float>(
        scale[c] * (double(x[i]) - mean[c]) / std::sqrt(double(var[c]) + eps) + bias[c]);
  }
  expectNear(y.data(), want);
  // Rank 2 ([N, C]).
  Buf<float> y2(6);
  runKernel(makeSpec("BatchNormalization", {f32({2, 3}), f32({3}), f32({3}), f32({3}), f32({3})},
                     {f32({2, 3})}, {{"epsilon", eps}}),
            {x.data(), scale.data(), bias.data(), mean.data(), var.data()}, {y2.data()});
  for (size_t i = 0; i < 6; ++i)
    EXPECT_NEAR(y2[i],
                scale[i % 3] * (x[i] - mean[i % 3]) / std::sqrt(var[i % 3] + eps) + bias[i % 3],
                1e-5);
  s.attrs["training_mode"] = int64_t{1};
  EXPECT_EQ(checkKernel(s).message(), "node 'n0' (BatchNormalization): training_mode=1 is not "
                                      "supported by the CPU kernel (inference only)");
}

} // namespace
} // namespace dtc::ops::cpu::test

namespace dtc::ops::cpu::test {
namespace {

// Weights marked constant are re-laid-out once: changing their bytes behind the kernel's back
// does not change the result (that is the contract inference plans rely on), while weights not
// marked constant are re-read on every run.
TEST(CpuConv, ConstantWeightsAreReorderedOnce) {
  const std::vector<int64_t> xs = {2, 16, 8, 8}, ws = {16, 16, 3, 3}, ys = {2, 16, 8, 8};
  const Win win{{3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}};
  Buf<float> x = randomBuf(static_cast<size_t>(count(xs)), 31);
  Buf<float> w = randomBuf(static_cast<size_t>(count(ws)), 32);
  Buf<float> w2 = randomBuf(static_cast<size_t>(count(ws)), 33);
  for (bool constant : {true, false}) {
    SCOPED_TRACE(constant ? "constant weights" : "weights that may change");
    TensorDesc wd = f32(ws);
    wd.constant = constant;
    KernelSpec s = makeSpec("Conv", {f32(xs), wd}, {f32(ys)},
                            {{"kernel_shape", win.kernel},
                             {"strides", win.strides},
                             {"dilations", win.dilations},
                             {"pads", win.pads},
                             {"group", int64_t{1}}});
    CpuContext ctx;
    auto k = createKernel(s, ctx);
    ASSERT_TRUE(k.hasValue()) << k.status().message();
    Buf<float> wbuf(w.size());
    std::copy(w.data(), w.data() + w.size(), wbuf.data());
    Buf<float> y(static_cast<size_t>(count(ys)));
    std::vector<const void *> ins = {x.data(), wbuf.data()};
    std::vector<void *> outs = {y.data()};
    ASSERT_TRUE((*k)->run({ins.data(), 2, outs.data(), 1}).isOk());
    expectNear(y.data(), refConv(x, xs, w, ws, nullptr, win, 1, ys));
    std::copy(w2.data(), w2.data() + w2.size(), wbuf.data());
    ASSERT_TRUE((*k)->run({ins.data(), 2, outs.data(), 1}).isOk());
    expectNear(y.data(), refConv(x, xs, constant ? w : w2, ws, nullptr, win, 1, ys));
  }
}

} // namespace
} // namespace dtc::ops::cpu::test
