// Tests of the CPU ConvTranspose, LayerNormalization, ReduceMean/Sum/Max, SoftmaxCrossEntropyLoss,
// NegativeLogLikelihoodLoss and Dropout kernels against naive loops computed here (and a few
// values from onnx.reference pasted as literals), plus their check and run-time errors.
#include "tests/unit/cpu/KernelTestUtil.h"

#include <cmath>
#include <limits>

namespace dtc::ops::cpu::test {
namespace {

using ir::Attribute;

/// Runs `spec` once and returns the run's status (creation must succeed).
Status runStatus(const KernelSpec &spec, std::vector<const void *> ins, std::vector<void *> outs) {
  CpuContext ctx;
  auto k = createKernel(spec, ctx);
  if (!k.hasValue())
    return k.status();
  return (*k)->run({ins.data(), ins.size(), outs.data(), outs.size()});
}

void expectError(const Status &st, const std::string &part) {
  ASSERT_FALSE(st.isOk()) << "expected an error containing: " << part;
  EXPECT_NE(st.message().find(part), std::string::npos) << st.message();
}

// ---- ConvTranspose -----------------------------------------------------------------------------

struct DeconvCase {
  std::vector<int64_t> x, w; // x [N, C, sp...], w [C, M/g, k...]
  int64_t group;
  std::vector<int64_t> strides, pads, dilations, outputPadding;
  bool bias;
};

/// Spatial dims padded to 3 (D, H, W) with 1s in front.
std::vector<int64_t> sp3(const std::vector<int64_t> &v, size_t from, int64_t fill) {
  std::vector<int64_t> r(v.begin() + static_cast<long>(from), v.end());
  while (r.size() < 3)
    r.insert(r.begin(), fill);
  return r;
}

/// Naive scatter: every input element adds x * w to the output positions it reaches.
std::vector<float> refDeconv(const DeconvCase &c, const Buf<float> &x, const Buf<float> &w,
                             const float *bias, const std::vector<int64_t> &ys) {
  size_t sp = c.x.size() - 2;
  std::vector<int64_t> in = sp3(c.x, 2, 1), k = sp3(c.w, 2, 1), out = sp3(ys, 2, 1);
  std::vector<int64_t> st(c.strides), dl(c.dilations), pb(c.pads.begin(), c.pads.begin() + sp);
  while (st.size() < 3) {
    st.insert(st.begin(), 1);
    dl.insert(dl.begin(), 1);
    pb.insert(pb.begin(), 0);
  }
  int64_t n = c.x[0], cin = c.x[1], icg = cin / c.group, ocg = c.w[1], m = ocg * c.group;
  int64_t inN = count(in), kN = count(k), outN = count(out);
  std::vector<double> y(static_cast<size_t>(n * m * outN), 0.0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ci = 0; ci < cin; ++ci) {
      int64_t g = ci / icg;
      for (int64_t i = 0; i < inN; ++i) {
        int64_t id = i / (in[1] * in[2]), ih = i / in[2] % in[1], iw = i % in[2];
        double xv = x[static_cast<size_t>((b * cin + ci) * inN + i)];
        for (int64_t oc = 0; oc < ocg; ++oc)
          for (int64_t kk = 0; kk < kN; ++kk) {
            int64_t kd = kk / (k[1] * k[2]), kh = kk / k[2] % k[1], kw = kk % k[2];
            int64_t od = id * st[0] - pb[0] + kd * dl[0], oh = ih * st[1] - pb[1] + kh * dl[1],
                    ow = iw * st[2] - pb[2] + kw * dl[2];
            if (od < 0 || od >= out[0] || oh < 0 || oh >= out[1] || ow < 0 || ow >= out[2])
              continue;
            int64_t o = (od * out[1] + oh) * out[2] + ow;
            y[static_cast<size_t>((b * m + g * ocg + oc) * outN + o)] +=
                xv * w[static_cast<size_t>((ci * ocg + oc) * kN + kk)];
          }
      }
    }
  std::vector<float> r(y.size());
  for (size_t i = 0; i < y.size(); ++i)
    r[i] = static_cast<float>(
        y[i] + (bias ? bias[i / static_cast<size_t>(outN) % static_cast<size_t>(m)] : 0.0));
  return r;
}

std::vector<int64_t> deconvOut(const DeconvCase &c) {
  size_t sp = c.x.size() - 2;
  std::vector<int64_t> out = {c.x[0], c.w[1] * c.group};
  for (size_t i = 0; i < sp; ++i)
    out.push_back(c.strides[i] * (c.x[2 + i] - 1) + c.outputPadding[i] +
                  c.dilations[i] * (c.w[2 + i] - 1) + 1 - c.pads[i] - c.pads[i + sp]);
  return out;
}

void checkDeconv(const DeconvCase &c) {
  std::vector<int64_t> ys = deconvOut(c);
  int64_t m = ys[1];
  Buf<float> x = randomBuf(static_cast<size_t>(count(c.x)), 1);
  Buf<float> w = randomBuf(static_cast<size_t>(count(c.w)), 2);
  Buf<float> b = randomBuf(static_cast<size_t>(m), 3);
  Buf<float> y(static_cast<size_t>(count(ys)));
  std::vector<TensorDesc> ins = {f32(c.x), f32(c.w)};
  std::vector<const void *> ptrs = {x.data(), w.data()};
  if (c.bias) {
    ins.push_back(f32({m}));
    ptrs.push_back(b.data());
  }
  KernelSpec spec =
      makeSpec("ConvTranspose", ins, {f32(ys)},
               {{"group", Attribute(c.group)},
                {"strides", Attribute(c.strides)},
                {"pads", Attribute(c.pads)},
                {"dilations", Attribute(c.dilations)},
                {"output_padding", Attribute(c.outputPadding)},
                {"kernel_shape", Attribute(std::vector<int64_t>(c.w.begin() + 2, c.w.end()))}});
  runKernel(spec, ptrs, {y.data()});
  expectNear(y.data(), refDeconv(c, x, w, c.bias ? b.data() : nullptr, ys), 1e-4);
}

TEST(NNDeconv, Stride2PadsOutputPaddingBias) {
  checkDeconv({{1, 2, 3, 3}, {2, 3, 3, 3}, 1, {2, 2}, {1, 1, 1, 1}, {1, 1}, {1, 1}, true});
}

TEST(NNDeconv, GroupsDilationsAsymmetricPads) {
  checkDeconv({{2, 4, 3, 4}, {4, 1, 2, 3}, 2, {2, 1}, {0, 1, 1, 0}, {1, 2}, {0, 0}, false});
  checkDeconv({{1, 6, 2, 3}, {6, 2, 3, 3}, 3, {2, 2}, {1, 0, 0, 1}, {1, 1}, {1, 0}, true});
}

TEST(NNDeconv, OneAndThreeD) {
  checkDeconv({{1, 2, 5}, {2, 2, 3}, 1, {3}, {0, 0}, {1}, {2}, true});
  checkDeconv({{1, 1, 2, 2, 2},
               {1, 2, 2, 2, 2},
               1,
               {2, 2, 2},
               {0, 0, 0, 0, 0, 0},
               {1, 1, 1},
               {0, 0, 0},
               false});
}

TEST(NNDeconv, OutputShapeResolvesToPads) {
  // output_shape [5, 5]: total padding 2*(3-1) + 3 - 5 = 2, split 1 / 1.
  Buf<float> x = randomBuf(9, 4), w = randomBuf(9, 5), y(25);
  KernelSpec spec =
      makeSpec("ConvTranspose", {f32({1, 1, 3, 3}), f32({1, 1, 3, 3})}, {f32({1, 1, 5, 5})},
               {{"strides", Attribute(std::vector<int64_t>{2, 2})},
                {"output_shape", Attribute(std::vector<int64_t>{5, 5})}});
  runKernel(spec, {x.data(), w.data()}, {y.data()});
  DeconvCase c{{1, 1, 3, 3}, {1, 1, 3, 3}, 1, {2, 2}, {1, 1, 1, 1}, {1, 1}, {0, 0}, false};
  expectNear(y.data(), refDeconv(c, x, w, nullptr, {1, 1, 5, 5}), 1e-4);
  // SAME_UPPER: out = in * stride = 6, total padding 1 (odd): ambiguous, rejected.
  spec.attrs.erase("output_shape");
  spec.attrs["auto_pad"] = Attribute(std::string("SAME_UPPER"));
  spec.outputs = {f32({1, 1, 6, 6})};
  expectError(checkKernel(spec), "needs a total padding of 1");
}

TEST(NNDeconv, CheckErrors) {
  KernelSpec spec = makeSpec("ConvTranspose", {f32({1, 4, 3, 3}), f32({4, 2, 3, 3})},
                             {f32({1, 6, 5, 5})}, {{"group", Attribute(int64_t(3))}});
  expectError(checkKernel(spec), "group 3 does not fit");
  spec.attrs["group"] = Attribute(int64_t(1));
  expectError(checkKernel(spec), "output 0 has shape [1,6,5,5], expected [1,2,5,5]");
  spec.outputs = {f32({1, 2, 5, 5})};
  EXPECT_TRUE(checkKernel(spec).isOk()) << checkKernel(spec).message();
  spec.inputs[0].dtype = ir::DType::kFloat64;
  expectError(checkKernel(spec), "input 0 has dtype f64; the CPU kernel supports f32");
  spec.inputs[0].dtype = ir::DType::kFloat32;
  spec.attrs["output_padding"] = Attribute(std::vector<int64_t>{1, 1});
  expectError(checkKernel(spec), "output_padding [1,1] must be non-negative and smaller");
}

// ---- LayerNormalization ------------------------------------------------------------------------

struct LnRef {
  std::vector<float> y, mean, inv;
};

LnRef refLayerNorm(const Buf<float> &x, int64_t outer, int64_t inner, const Buf<float> &scale,
                   const std::vector<int64_t> &scaleIdx, const Buf<float> *b,
                   const std::vector<int64_t> &bIdx, float eps) {
  LnRef r;
  for (int64_t o = 0; o < outer; ++o) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < inner; ++i)
      mean += x[static_cast<size_t>(o * inner + i)];
    mean /= static_cast<double>(inner);
    for (int64_t i = 0; i < inner; ++i) {
      double d = x[static_cast<size_t>(o * inner + i)] - mean;
      var += d * d;
    }
    var /= static_cast<double>(inner);
    double inv = 1.0 / std::sqrt(var + eps);
    r.mean.push_back(static_cast<float>(mean));
    r.inv.push_back(static_cast<float>(inv));
    for (int64_t i = 0; i < inner; ++i) {
      size_t ui = static_cast<size_t>(i);
      double v = (x[static_cast<size_t>(o * inner + i)] - mean) * inv *
                     scale[static_cast<size_t>(scaleIdx[ui])] +
                 (b ? (*b)[static_cast<size_t>(bIdx[ui])] : 0.0);
      r.y.push_back(static_cast<float>(v));
    }
  }
  return r;
}

TEST(NNLayerNorm, LastAxisWithStats) {
  Buf<float> x = randomBuf(24, 6), s = randomBuf(4, 7), b = randomBuf(4, 8);
  Buf<float> y(24), mean(6), inv(6);
  KernelSpec spec = makeSpec("LayerNormalization", {f32({2, 3, 4}), f32({4}), f32({4})},
                             {f32({2, 3, 4}), f32({2, 3, 1}), f32({2, 3, 1})},
                             {{"axis", Attribute(int64_t(-1))}, {"epsilon", Attribute(1e-3f)}});
  runKernel(spec, {x.data(), s.data(), b.data()}, {y.data(), mean.data(), inv.data()});
  std::vector<int64_t> idx = {0, 1, 2, 3};
  LnRef r = refLayerNorm(x, 6, 4, s, idx, &b, idx, 1e-3f);
  expectNear(y.data(), r.y, 1e-4);
  expectNear(mean.data(), r.mean, 1e-5);
  expectNear(inv.data(), r.inv, 1e-4);
}

TEST(NNLayerNorm, Axis1BroadcastScaleAndOmittedOutputs) {
  // axis 1 of [2, 3, 4]: normalized part [3, 4]; Scale [3, 4] (full), B [4] (broadcast).
  Buf<float> x = randomBuf(24, 9), s = randomBuf(12, 10), b = randomBuf(4, 11);
  Buf<float> y(24), inv(2);
  KernelSpec spec =
      makeSpec("LayerNormalization", {f32({2, 3, 4}), f32({3, 4}), f32({4})},
               {f32({2, 3, 4}), TensorDesc{}, f32({2, 1, 1})}, {{"axis", Attribute(int64_t(1))}});
  runKernel(spec, {x.data(), s.data(), b.data()}, {y.data(), nullptr, inv.data()});
  std::vector<int64_t> sIdx(12), bIdx(12);
  for (int64_t i = 0; i < 12; ++i) {
    sIdx[static_cast<size_t>(i)] = i;
    bIdx[static_cast<size_t>(i)] = i % 4;
  }
  LnRef r = refLayerNorm(x, 2, 12, s, sIdx, &b, bIdx, 1e-5f);
  expectNear(y.data(), r.y, 1e-4);
  expectNear(inv.data(), r.inv, 1e-4);

  // No B, only Y; Scale [1, 4] broadcasts over the 3 rows.
  Buf<float> s2 = randomBuf(4, 12);
  KernelSpec spec2 = makeSpec("LayerNormalization", {f32({2, 3, 4}), f32({1, 4})}, {f32({2, 3, 4})},
                              {{"axis", Attribute(int64_t(-2))}});
  runKernel(spec2, {x.data(), s2.data()}, {y.data()});
  for (int64_t i = 0; i < 12; ++i)
    sIdx[static_cast<size_t>(i)] = i % 4;
  r = refLayerNorm(x, 2, 12, s2, sIdx, nullptr, bIdx, 1e-5f);
  expectNear(y.data(), r.y, 1e-4);
}

TEST(NNLayerNorm, CheckErrors) {
  KernelSpec spec = makeSpec("LayerNormalization", {f32({2, 3}), f32({3})}, {f32({2, 3})},
                             {{"stash_type", Attribute(int64_t(16))}});
  expectError(checkKernel(spec), "stash_type 16 is not supported");
  spec.attrs.clear();
  spec.inputs[1] = f32({2});
  expectError(checkKernel(spec), "Scale [2] does not broadcast to the normalized shape [3]");
  spec.inputs[1] = f32({3});
  spec.attrs["axis"] = Attribute(int64_t(2));
  expectError(checkKernel(spec), "axis 2 is out of range for rank 2");
  spec.attrs.clear();
  spec.outputs.push_back(f32({2, 3}));
  expectError(checkKernel(spec), "output 1 has shape [2,3], expected [2,1]");
}

// ---- Reductions --------------------------------------------------------------------------------

/// Naive reduction over the flagged axes (keepdims layout, which has keepdims=0's bytes too).
std::vector<double> refReduce(const std::vector<double> &x, const std::vector<int64_t> &shape,
                              const std::vector<bool> &red, const std::string &op) {
  std::vector<int64_t> keep = shape;
  for (size_t d = 0; d < shape.size(); ++d)
    if (red[d])
      keep[d] = 1;
  int64_t outN = count(keep), inN = count(shape);
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> acc(static_cast<size_t>(outN), op == "ReduceMax"    ? -inf
                                                     : op == "ReduceMin"  ? inf
                                                     : op == "ReduceProd" ? 1.0
                                                                          : 0.0);
  std::vector<int64_t> cnt(static_cast<size_t>(outN), 0);
  for (int64_t i = 0; i < inN; ++i) {
    int64_t rem = i, o = 0, mult = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      int64_t c = rem % shape[d];
      rem /= shape[d];
      o += (red[d] ? 0 : c) * mult;
      mult *= keep[d];
    }
    double &a = acc[static_cast<size_t>(o)];
    const double v = x[static_cast<size_t>(i)];
    if (op == "ReduceMax")
      a = std::max(a, v);
    else if (op == "ReduceMin")
      a = std::min(a, v);
    else if (op == "ReduceProd")
      a *= v;
    else if (op == "ReduceL1")
      a += std::fabs(v);
    else if (op == "ReduceL2" || op == "ReduceSumSquare")
      a += v * v;
    else if (op == "ReduceLogSumExp")
      a += std::exp(v);
    else
      a += v;
    ++cnt[static_cast<size_t>(o)];
  }
  for (size_t j = 0; j < acc.size(); ++j) {
    if (op == "ReduceMean")
      acc[j] /= static_cast<double>(cnt[j]);
    else if (op == "ReduceL2")
      acc[j] = std::sqrt(acc[j]);
    else if (op == "ReduceLogSumExp")
      acc[j] = std::log(acc[j]);
  }
  return acc;
}

struct ReduceCase {
  std::string op;
  std::vector<int64_t> in;
  std::vector<int64_t> axes; // run-time data
  bool axesInput;
  int64_t keepdims, noop;
  std::vector<int64_t> out;
  std::vector<bool> reduced;
};

void checkReduce(const ReduceCase &c) {
  SCOPED_TRACE(c.op + " in " + std::to_string(c.in.size()) + "-D");
  Buf<float> x = randomBuf(static_cast<size_t>(count(c.in)), 13);
  Buf<int64_t> axes(c.axes);
  Buf<float> y(static_cast<size_t>(count(c.out)));
  std::vector<TensorDesc> ins = {f32(c.in)};
  std::vector<const void *> ptrs = {x.data()};
  if (c.axesInput) {
    ins.push_back(i64({static_cast<int64_t>(c.axes.size())}));
    ptrs.push_back(c.axes.empty() ? nullptr : axes.data());
  }
  KernelSpec spec =
      makeSpec(c.op, ins, {f32(c.out)},
               {{"keepdims", Attribute(c.keepdims)}, {"noop_with_empty_axes", Attribute(c.noop)}});
  runKernel(spec, ptrs, {y.data()});
  std::vector<double> xd(x.data(), x.data() + x.size());
  std::vector<double> want = refReduce(xd, c.in, c.reduced, c.op);
  expectNear(y.data(), std::vector<float>(want.begin(), want.end()), 1e-5);
}

TEST(NNReduce, AxesKeepdimsNoop) {
  checkReduce({"ReduceSum", {2, 3, 4}, {1}, true, 1, 0, {2, 1, 4}, {false, true, false}});
  checkReduce({"ReduceMean", {2, 3, 4}, {0, 2}, true, 0, 0, {3}, {true, false, true}});
  checkReduce({"ReduceMax", {2, 3, 4}, {-1}, true, 0, 0, {2, 3}, {false, false, true}});
  checkReduce({"ReduceMax", {2, 3, 4}, {0, -2}, true, 1, 0, {1, 1, 4}, {true, true, false}});
  // Omitted axes: every axis; empty axes with noop_with_empty_axes: the input itself.
  checkReduce({"ReduceSum", {2, 3, 4}, {}, false, 0, 0, {}, {true, true, true}});
  checkReduce({"ReduceMax", {2, 3, 4}, {}, true, 1, 0, {1, 1, 1}, {true, true, true}});
  checkReduce({"ReduceMean", {2, 3, 4}, {}, true, 1, 1, {2, 3, 4}, {false, false, false}});
  // A size-1 axis only: a copy.
  checkReduce({"ReduceMean", {2, 1, 3}, {1}, true, 0, 0, {2, 3}, {false, true, false}});
  // Scalar input.
  checkReduce({"ReduceSum", {}, {}, false, 1, 0, {}, {}});
}

TEST(NNReduce, MinProdNormsLogSumExpSumSquare) {
  for (const char *op :
       {"ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare"}) {
    checkReduce({op, {2, 3, 4}, {1}, true, 1, 0, {2, 1, 4}, {false, true, false}});
    checkReduce({op, {2, 3, 4}, {0, 2}, true, 0, 0, {3}, {true, false, true}}); // loop or oneDNN
    checkReduce({op, {2, 3, 4}, {-1}, true, 0, 0, {2, 3}, {false, false, true}});
    checkReduce({op, {2, 3, 4}, {}, false, 0, 0, {}, {true, true, true}});
    checkReduce({op, {2, 3, 4}, {}, true, 1, 1, {2, 3, 4}, {false, false, false}});
  }
}

TEST(NNReduce, LogSumExpIsShiftedAndMinKeepsNan) {
  // log(e^1000 + e^1000) = 1000 + log 2 (a naive sum overflows); -inf slices stay -inf.
  const float inf = std::numeric_limits<float>::infinity();
  Buf<float> x(std::vector<float>{1000.f, 1000.f, -inf, -inf, 1.f, inf});
  Buf<float> y(3);
  KernelSpec spec = makeSpec("ReduceLogSumExp", {f32({3, 2}), i64({1})}, {f32({3})},
                             {{"keepdims", Attribute(int64_t{0})}});
  Buf<int64_t> axes(std::vector<int64_t>{1});
  runKernel(spec, {x.data(), axes.data()}, {y.data()});
  EXPECT_NEAR(y[0], 1000.f + std::log(2.f), 1e-3);
  EXPECT_EQ(y[1], -inf);
  EXPECT_EQ(y[2], inf);
  Buf<float> m(std::vector<float>{3.f, std::nanf(""), 1.f, 2.f});
  Buf<float> ym(2);
  runKernel(makeSpec("ReduceMin", {f32({2, 2}), i64({1})}, {f32({2})},
                     {{"keepdims", Attribute(int64_t{0})}}),
            {m.data(), axes.data()}, {ym.data()});
  EXPECT_TRUE(std::isnan(ym[0]));
  EXPECT_EQ(ym[1], 1.f);
}

TEST(NNReduce, AmbiguousShapesFollowRunTimeAxes) {
  // [3, 3] -> [3] with keepdims 0 could reduce either axis: the run-time axes decide.
  checkReduce({"ReduceSum", {3, 3}, {0}, true, 0, 0, {3}, {true, false}});
  checkReduce({"ReduceSum", {3, 3}, {1}, true, 0, 0, {3}, {false, true}});
}

TEST(NNReduce, Int64) {
  Buf<int64_t> x(std::vector<int64_t>{1, -5, 3, 7, 2, -9}), axes(std::vector<int64_t>{1});
  Buf<int64_t> y(2);
  KernelSpec spec = makeSpec("ReduceSum", {i64({2, 3}), i64({1})}, {i64({2})},
                             {{"keepdims", Attribute(int64_t(0))}});
  runKernel(spec, {x.data(), axes.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<int64_t>{-1, 0}));
  spec.op = "ReduceMax";
  runKernel(spec, {x.data(), axes.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<int64_t>{3, 7}));
  spec.op = "ReduceMean";
  runKernel(spec, {x.data(), axes.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<int64_t>{0, 0})); // -1/3 and 0/3 truncate to 0
}

TEST(NNReduce, Errors) {
  Buf<float> x(24), y(8);
  Buf<int64_t> axes(std::vector<int64_t>{0});
  KernelSpec spec = makeSpec("ReduceSum", {f32({2, 3, 4}), i64({1})}, {f32({2, 1, 4})});
  // The plan's shape reduces axis 1; the run-time axes say 0.
  expectError(runStatus(spec, {x.data(), axes.data()}, {y.data()}),
              "the run-time axes give output shape [1,3,4] but the plan has [2,1,4]");
  axes[0] = 3;
  expectError(runStatus(spec, {x.data(), axes.data()}, {y.data()}),
              "node 'n0' (ReduceSum): axes value 3 is out of range for rank 3");
  spec.outputs = {f32({2, 2, 4})};
  expectError(checkKernel(spec), "output shape [2,2,4] is not a reduction of input [2,3,4]");
  spec.outputs = {f32({2, 1, 4})};
  spec.inputs[0].dtype = ir::DType::kFloat64;
  expectError(checkKernel(spec), "input 0 has dtype f64; the CPU kernel supports f32 or i64");
}

// ---- Losses ------------------------------------------------------------------------------------

TEST(NNLoss, SoftmaxCrossEntropyMeanWeightsIgnoreIndex) {
  Buf<float> s(
      std::vector<float>{1.0f, 2.0f, 0.5f, -1.0f, 0.0f, 0.0f, 3.0f, 1.0f, 2.0f, -2.0f, 1.0f, 0.5f});
  Buf<int64_t> l(std::vector<int64_t>{0, 2, -1});
  Buf<float> w(std::vector<float>{0.5f, 1.0f, 2.0f, 1.5f});
  Buf<float> loss(1), logp(12);
  KernelSpec spec = makeSpec("SoftmaxCrossEntropyLoss", {f32({3, 4}), i64({3}), f32({4})},
                             {f32({}), f32({3, 4})}, {{"ignore_index", Attribute(int64_t(-1))}});
  runKernel(spec, {s.data(), l.data(), w.data()}, {loss.data(), logp.data()});
  // Hand computation: log_softmax per row, loss = sum(w[l] * -logp[l]) / sum(w[l]).
  std::vector<float> wantLogp;
  for (int r = 0; r < 3; ++r) {
    double se = 0;
    for (int c = 0; c < 4; ++c)
      se += std::exp(double(s[static_cast<size_t>(r * 4 + c)]));
    for (int c = 0; c < 4; ++c)
      wantLogp.push_back(static_cast<float>(s[static_cast<size_t>(r * 4 + c)] - std::log(se)));
  }
  expectNear(logp.data(), wantLogp);
  double want = (0.5 * -wantLogp[0] + 2.0 * -wantLogp[6]) / 2.5;
  EXPECT_NEAR(loss[0], want, 1e-6);
  EXPECT_NEAR(loss[0], 0.467834473, 1e-6); // onnx.reference
  // NegativeLogLikelihoodLoss on the same numbers (as log-probabilities): -(0.5*1 + 2*3) / 2.5.
  spec.op = "NegativeLogLikelihoodLoss";
  spec.outputs.pop_back();
  runKernel(spec, {s.data(), l.data(), w.data()}, {loss.data()});
  EXPECT_NEAR(loss[0], -2.6, 1e-6);
}

TEST(NNLoss, SpatialNoneAndSum) {
  // scores [N=2, C=3, d1=2]; labels [2, 2].
  Buf<float> s = randomBuf(12, 21);
  Buf<int64_t> l(std::vector<int64_t>{2, 0, 1, 1});
  std::vector<float> want;
  double sum = 0;
  for (int n = 0; n < 2; ++n)
    for (int j = 0; j < 2; ++j) {
      double se = 0;
      for (int c = 0; c < 3; ++c)
        se += std::exp(double(s[static_cast<size_t>(n * 6 + c * 2 + j)]));
      int64_t lab = l[static_cast<size_t>(n * 2 + j)];
      double v = -(s[static_cast<size_t>(n * 6 + lab * 2 + j)] - std::log(se));
      want.push_back(static_cast<float>(v));
      sum += v;
    }
  Buf<float> loss(4);
  KernelSpec spec = makeSpec("SoftmaxCrossEntropyLoss", {f32({2, 3, 2}), i64({2, 2})},
                             {f32({2, 2})}, {{"reduction", Attribute(std::string("none"))}});
  runKernel(spec, {s.data(), l.data()}, {loss.data()});
  expectNear(loss.data(), want);
  spec.attrs["reduction"] = Attribute(std::string("sum"));
  spec.outputs = {f32({})};
  runKernel(spec, {s.data(), l.data()}, {loss.data()});
  EXPECT_NEAR(loss[0], sum, 1e-5);
  spec.attrs["reduction"] = Attribute(std::string("mean"));
  runKernel(spec, {s.data(), l.data()}, {loss.data()});
  EXPECT_NEAR(loss[0], sum / 4, 1e-5);
  // NLL with int32 labels, reduction none: -input[n, label, j].
  Buf<int32_t> l32(std::vector<int32_t>{2, 0, 1, 1});
  KernelSpec nll =
      makeSpec("NegativeLogLikelihoodLoss", {f32({2, 3, 2}), TensorDesc{ir::DType::kInt32, {2, 2}}},
               {f32({2, 2})}, {{"reduction", Attribute(std::string("none"))}});
  runKernel(nll, {s.data(), l32.data()}, {loss.data()});
  expectNear(loss.data(), {-s[4], -s[1], -s[6 + 2], -s[6 + 3]});
}

// ai.dtc.CheckLabels: labels in [0, classes) pass unchanged (copied when not aliased); one
// outside fails with the loss kernel's message, naming the sample (axis 0); ignore_index passes.
TEST(NNLoss, CheckLabels) {
  KernelSpec spec =
      makeSpec("CheckLabels", {i64({2, 3})}, {i64({2, 3})}, {{"classes", Attribute(int64_t(4))}});
  spec.domain = "ai.dtc";
  Buf<int64_t> l(std::vector<int64_t>{0, 3, 1, 2, 2, 0}), out(6);
  runKernel(spec, {l.data()}, {out.data()});
  for (size_t i = 0; i < 6; ++i)
    EXPECT_EQ(out[i], l[i]) << i;
  l[4] = 4;
  expectError(runStatus(spec, {l.data()}, {out.data()}),
              "node 'n0' (ai.dtc.CheckLabels): label 4 at sample 1 is out of range [0, 4)");
  l[4] = -1;
  expectError(runStatus(spec, {l.data()}, {l.data()}), "label -1 at sample 1");
  spec.attrs["ignore_index"] = Attribute(int64_t(-1));
  runKernel(spec, {l.data()}, {l.data()});
  l[0] = -2;
  expectError(runStatus(spec, {l.data()}, {l.data()}),
              "label -2 at sample 0 is out of range [0, 4) and is not ignore_index");
  // int32 labels.
  Buf<int32_t> l32(std::vector<int32_t>{1, 9}), o32(2);
  KernelSpec s32 =
      makeSpec("CheckLabels", {TensorDesc{ir::DType::kInt32, {2}}},
               {TensorDesc{ir::DType::kInt32, {2}}}, {{"classes", Attribute(int64_t(9))}});
  s32.domain = "ai.dtc";
  expectError(runStatus(s32, {l32.data()}, {o32.data()}),
              "label 9 at sample 1 is out of range [0, 9)");
  s32.attrs["classes"] = Attribute(int64_t(0));
  expectError(checkKernel(s32), "classes 0 is not positive");
}

TEST(NNLoss, Errors) {
  Buf<float> s(6), loss(1);
  Buf<int64_t> l(std::vector<int64_t>{1, 7});
  KernelSpec spec = makeSpec("SoftmaxCrossEntropyLoss", {f32({2, 3}), i64({2})}, {f32({})},
                             {{"ignore_index", Attribute(int64_t(-100))}});
  expectError(runStatus(spec, {s.data(), l.data()}, {loss.data()}),
              "node 'n0' (SoftmaxCrossEntropyLoss): label 7 at sample 1 is out of range [0, 3)");
  spec.inputs[1] = i64({3});
  expectError(checkKernel(spec), "labels [3] must have shape [2]");
  spec.inputs[1] = i64({2});
  spec.attrs["reduction"] = Attribute(std::string("avg"));
  expectError(checkKernel(spec), "reduction must be none, mean or sum, got 'avg'");
  spec.attrs.erase("reduction");
  spec.inputs[1].dtype = ir::DType::kFloat32;
  expectError(checkKernel(spec), "input 1 has dtype f32; the CPU kernel supports i64 or i32");
}

// ---- Dropout -----------------------------------------------------------------------------------

TEST(NNDropout, InferenceCopiesAndMaskIsTrue) {
  Buf<float> x = randomBuf(6, 30), y(6), ratio(std::vector<float>{0.3f});
  Buf<uint8_t> train(std::vector<uint8_t>{0}), mask(6);
  TensorDesc boolScalar{ir::DType::kBool, {}};
  KernelSpec spec = makeSpec("Dropout", {f32({2, 3}), f32({}), boolScalar},
                             {f32({2, 3}), TensorDesc{ir::DType::kBool, {2, 3}}});
  runKernel(spec, {x.data(), ratio.data(), train.data()}, {y.data(), mask.data()});
  EXPECT_EQ(y.vec(), x.vec());
  EXPECT_EQ(mask.vec(), std::vector<uint8_t>(6, 1));
  EXPECT_EQ(inPlaceInput(spec), 0);
  EXPECT_FALSE(isViewOp("", "Dropout"));
  // No optional inputs or mask.
  Buf<float> y2(6);
  runKernel(makeSpec("Dropout", {f32({2, 3})}, {f32({2, 3})}), {x.data()}, {y2.data()});
  EXPECT_EQ(y2.vec(), x.vec());
  // training_mode true at run time.
  train[0] = 1;
  expectError(runStatus(spec, {x.data(), ratio.data(), train.data()}, {y.data(), mask.data()}),
              "node 'n0' (Dropout): training-mode Dropout runs in training plans (not yet)");
  spec.outputs[1].dtype = ir::DType::kFloat32;
  expectError(checkKernel(spec), "output 1 has dtype f32; the CPU kernel supports bool");
}

} // namespace
} // namespace dtc::ops::cpu::test
