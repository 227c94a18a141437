// Tests of the UNet decoder kernels in both layouts: ConvTranspose (oneDNN deconvolution and the
// matmul path for non-overlapping windows), Resize (nearest and linear, the loop and the oneDNN
// resampling paths) and Concat. Every layout combination is checked against naive reference
// loops written here from the ONNX operator text, so row-major and channels-last agree.
#include "ops/cpu/OneDnnUtil.h"
#include "tests/unit/cpu/KernelTestUtil.h"

#include <cmath>

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

/// Row-major data of `shape` in layout `l`.
template <typename T>
Buf<T> inLayout(const Buf<T> &rm, const std::vector<int64_t> &shape, Layout l) {
  if (l == kRM)
    return rm;
  Buf<T> out(rm.size());
  for (int64_t i = 0; i < count(shape); ++i)
    out[static_cast<size_t>(channelsLastOffset(i, shape))] = rm[static_cast<size_t>(i)];
  return out;
}

/// Data in layout `l` read back in row-major order.
template <typename T>
std::vector<T> rowMajor(const Buf<T> &b, const std::vector<int64_t> &shape, Layout l) {
  if (l == kRM)
    return b.vec();
  std::vector<T> out(static_cast<size_t>(count(shape)));
  for (int64_t i = 0; i < count(shape); ++i)
    out[static_cast<size_t>(i)] = b[static_cast<size_t>(channelsLastOffset(i, shape))];
  return out;
}

std::vector<int64_t> unravel(int64_t i, const std::vector<int64_t> &shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}

int64_t ravel(const std::vector<int64_t> &idx, const std::vector<int64_t> &shape) {
  int64_t off = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    off = off * shape[d] + idx[d];
  return off;
}

// ---- ConvTranspose -----------------------------------------------------------------------------

struct DeconvCase {
  std::vector<int64_t> x, w, y, strides, pads, outputPadding;
  int64_t group = 1;
  bool bias = true;
};

/// ONNX ConvTranspose by definition: y[n, g*M/G + m, i*s - pad + k] += x[n, g*C/G + c, i] *
/// w[g*C/G + c, m, k] (dilations 1), plus the bias.
std::vector<float> deconvRef(const DeconvCase &c, const Buf<float> &x, const Buf<float> &w,
                             const Buf<float> &b) {
  size_t sp = c.x.size() - 2;
  std::vector<float> y(static_cast<size_t>(count(c.y)), 0.0f);
  int64_t cg = c.x[1] / c.group, mg = c.w[1];
  std::vector<int64_t> ks(c.w.begin() + 2, c.w.end());
  for (int64_t xi = 0; xi < count(c.x); ++xi) {
    std::vector<int64_t> xidx = unravel(xi, c.x);
    int64_t ch = xidx[1], g = ch / cg;
    for (int64_t m = 0; m < mg; ++m)
      for (int64_t ki = 0; ki < count(ks); ++ki) {
        std::vector<int64_t> k = unravel(ki, ks), yidx = {xidx[0], g * mg + m};
        bool inside = true;
        for (size_t d = 0; d < sp; ++d) {
          int64_t o = xidx[2 + d] * c.strides[d] - c.pads[d] + k[d];
          inside = inside && o >= 0 && o < c.y[2 + d];
          yidx.push_back(o);
        }
        if (!inside)
          continue;
        std::vector<int64_t> widx = {ch, m};
        widx.insert(widx.end(), k.begin(), k.end());
        y[static_cast<size_t>(ravel(yidx, c.y))] +=
            x[static_cast<size_t>(xi)] * w[static_cast<size_t>(ravel(widx, c.w))];
      }
  }
  if (c.bias)
    for (int64_t i = 0; i < count(c.y); ++i)
      y[static_cast<size_t>(i)] += b[static_cast<size_t>(unravel(i, c.y)[1])];
  return y;
}

std::vector<DeconvCase> deconvCases() {
  return {
      // Non-overlapping 2x upsampling (the matmul path when channels-last), batch 2.
      {{2, 6, 3, 4}, {6, 5, 2, 2}, {2, 5, 6, 8}, {2, 2}, {0, 0, 0, 0}, {0, 0}},
      {{1, 3, 2, 2}, {3, 4, 2, 2}, {1, 4, 4, 4}, {2, 2}, {0, 0, 0, 0}, {0, 0}, 1, false},
      // Non-square windows, 1-D and 3-D.
      {{1, 2, 3, 2}, {2, 3, 3, 2}, {1, 3, 9, 4}, {3, 2}, {0, 0, 0, 0}, {0, 0}},
      {{2, 3, 5}, {3, 4, 2}, {2, 4, 10}, {2}, {0, 0}, {0}},
      {{1, 2, 2, 3, 2}, {2, 3, 2, 2, 2}, {1, 3, 4, 6, 4}, {2, 2, 2}, {0, 0, 0, 0, 0, 0}, {0, 0, 0}},
      // Overlapping windows with pads and output_padding; groups (oneDNN deconvolution).
      {{1, 4, 5, 5}, {4, 3, 3, 3}, {1, 3, 10, 10}, {2, 2}, {1, 1, 1, 1}, {1, 1}},
      {{1, 4, 4, 3}, {4, 3, 2, 2}, {1, 6, 8, 6}, {2, 2}, {0, 0, 0, 0}, {0, 0}, 2},
      {{2, 6, 3, 3}, {6, 1, 3, 3}, {2, 3, 6, 8}, {2, 2}, {1, 0, 0, 0}, {0, 1}, 3},
  };
}

TEST(CpuLayoutUnet, ConvTransposeEveryLayoutAgainstReference) {
  for (const DeconvCase &c : deconvCases()) {
    Buf<float> x = randomBuf(static_cast<size_t>(count(c.x)), 1),
               w = randomBuf(static_cast<size_t>(count(c.w)), 2),
               b = randomBuf(static_cast<size_t>(c.y[1]), 3);
    std::vector<float> want = deconvRef(c, x, w, b);
    for (Layout src : {kRM, kCL})
      for (Layout dst : {kRM, kCL}) {
        SCOPED_TRACE(shapeStr(c.x) + " -> " + shapeStr(c.y) + " src " + layoutName(src) + " dst " +
                     layoutName(dst));
        std::vector<TensorDesc> ins = {withLayout(f32(c.x), src), f32(c.w)};
        if (c.bias)
          ins.push_back(f32({c.y[1]}));
        KernelSpec spec = makeSpec("ConvTranspose", ins, {withLayout(f32(c.y), dst)},
                                   {{"strides", ir::Attribute(c.strides)},
                                    {"pads", ir::Attribute(c.pads)},
                                    {"output_padding", ir::Attribute(c.outputPadding)},
                                    {"group", ir::Attribute(c.group)}});
        Buf<float> xs = inLayout(x, c.x, src), y(static_cast<size_t>(count(c.y)));
        std::vector<const void *> args = {xs.data(), w.data()};
        if (c.bias)
          args.push_back(b.data());
        runKernel(spec, args, {y.data()});
        expectNear(rowMajor(y, c.y, dst).data(), want, 1e-4);
        // A second run on new weights: weights are inputs, never cached.
        Buf<float> w2 = randomBuf(w.size(), 9);
        std::vector<float> want2 = deconvRef(c, x, w2, b);
        CpuContext ctx;
        auto k = createKernel(spec, ctx);
        ASSERT_TRUE(k.hasValue()) << k.status().message();
        args[1] = w.data();
        std::vector<void *> outs = {y.data()};
        ASSERT_TRUE((*k)->run({args.data(), args.size(), outs.data(), 1}).isOk());
        args[1] = w2.data();
        ASSERT_TRUE((*k)->run({args.data(), args.size(), outs.data(), 1}).isOk());
        expectNear(rowMajor(y, c.y, dst).data(), want2, 1e-4);
      }
  }
}

TEST(CpuLayoutUnet, ConvTransposeWeightsMustBeRowMajor) {
  KernelSpec spec = makeSpec(
      "ConvTranspose", {withLayout(f32({1, 2, 3, 3}), kCL), withLayout(f32({2, 2, 2, 2}), kCL)},
      {withLayout(f32({1, 2, 6, 6}), kCL)},
      {{"strides", ir::Attribute(std::vector<int64_t>{2, 2})}});
  EXPECT_EQ(checkKernel(spec).message(),
            "node 'n0' (ConvTranspose): input 1 (weights or bias) is channels-last; the CPU "
            "kernel needs it row-major");
}

// ---- Resize ------------------------------------------------------------------------------------

struct ResizeCase {
  std::string mode, transform, nearestMode;
  std::vector<int64_t> x, y;
  std::vector<float> scales; ///< empty: sizes = y
};

/// ONNX Resize on the two spatial axes of a rank-4 tensor (scales given or out / in), by the
/// operator text: nearest picks one rounded source index; linear interpolates each axis between
/// floor(x) and floor(x) + 1, clamped to the edge.
std::vector<float> resizeRef(const ResizeCase &c, const Buf<float> &x) {
  auto original = [&](int64_t o, int64_t in, int64_t out, double s) {
    double v = static_cast<double>(o);
    if (c.transform == "half_pixel")
      return (v + 0.5) / s - 0.5;
    if (c.transform == "pytorch_half_pixel")
      return out > 1 ? (v + 0.5) / s - 0.5 : 0.0;
    if (c.transform == "align_corners")
      return out == 1 ? 0.0 : v * static_cast<double>(in - 1) / static_cast<double>(out - 1);
    return v / s; // asymmetric
  };
  auto clampIdx = [](double v, int64_t in) {
    return std::min<int64_t>(std::max<int64_t>(static_cast<int64_t>(std::floor(v)), 0), in - 1);
  };
  // Per axis: the two source indices and the weight of the second.
  std::vector<std::vector<std::tuple<int64_t, int64_t, double>>> maps(2);
  for (size_t a = 0; a < 2; ++a) {
    int64_t in = c.x[2 + a], out = c.y[2 + a];
    double s = c.scales.empty() ? static_cast<double>(out) / static_cast<double>(in)
                                : static_cast<double>(c.scales[2 + a]);
    for (int64_t o = 0; o < out; ++o) {
      double v = original(o, in, out, s), f = std::floor(v), r = v - f;
      if (c.mode == "linear") {
        maps[a].emplace_back(clampIdx(f, in), clampIdx(f + 1, in), r);
        continue;
      }
      bool up = r != 0.0 &&
                (c.nearestMode == "ceil" || (c.nearestMode == "round_prefer_floor" && r > 0.5) ||
                 (c.nearestMode == "round_prefer_ceil" && r >= 0.5));
      int64_t i = clampIdx(up ? f + 1 : f, in);
      maps[a].emplace_back(i, i, 0.0);
    }
  }
  std::vector<float> y;
  for (int64_t n = 0; n < c.y[0]; ++n)
    for (int64_t ch = 0; ch < c.y[1]; ++ch)
      for (const auto &[h0, h1, wh] : maps[0])
        for (const auto &[w0, w1, ww] : maps[1]) {
          auto at = [&](int64_t h, int64_t w) {
            return static_cast<double>(x[static_cast<size_t>(ravel({n, ch, h, w}, c.x))]);
          };
          double top = at(h0, w0) * (1 - ww) + at(h0, w1) * ww;
          double bottom = at(h1, w0) * (1 - ww) + at(h1, w1) * ww;
          y.push_back(static_cast<float>(top * (1 - wh) + bottom * wh));
        }
  return y;
}

std::vector<ResizeCase> resizeCases() {
  std::vector<ResizeCase> cases;
  for (const char *nm : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"})
    for (const char *ct : {"asymmetric", "half_pixel", "align_corners"}) {
      cases.push_back({"nearest", ct, nm, {2, 3, 4, 5}, {2, 3, 8, 10}, {1, 1, 2, 2}});
      cases.push_back({"nearest", ct, nm, {1, 5, 7, 6}, {1, 5, 3, 9}, {}});
    }
  for (const char *ct : {"half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"}) {
    cases.push_back({"linear", ct, "floor", {2, 4, 4, 5}, {2, 4, 8, 10}, {1, 1, 2, 2}});
    cases.push_back({"linear", ct, "floor", {1, 3, 6, 9}, {1, 3, 3, 4}, {}}); // downsampling
    cases.push_back({"linear", ct, "floor", {1, 7, 5, 3}, {1, 7, 7, 1}, {}}); // output length 1
    // A scale that is not out / in (floor(3 * 1.7) = 5): the loop path, with the given scale.
    cases.push_back({"linear", ct, "floor", {1, 2, 3, 4}, {1, 2, 5, 6}, {1, 1, 1.7f, 1.5f}});
  }
  return cases;
}

TEST(CpuLayoutUnet, ResizeBothLayoutsAgainstReference) {
  for (const ResizeCase &c : resizeCases()) {
    Buf<float> x = randomBuf(static_cast<size_t>(count(c.x)), 4);
    std::vector<float> want = resizeRef(c, x);
    Buf<float> scales(std::vector<float>(c.scales));
    Buf<int64_t> sizes(c.y);
    for (Layout l : {kRM, kCL}) {
      SCOPED_TRACE(c.mode + " " + c.transform + " " + c.nearestMode + " " + shapeStr(c.x) + " -> " +
                   shapeStr(c.y) + " " + layoutName(l));
      std::vector<TensorDesc> ins = {withLayout(f32(c.x), l), TensorDesc{}};
      std::vector<const void *> args = {nullptr, nullptr};
      if (c.scales.empty()) {
        ins.push_back(TensorDesc{});
        ins.push_back(i64({4}));
        args.push_back(nullptr);
        args.push_back(sizes.data());
      } else {
        ins.push_back(f32({4}));
        args.push_back(scales.data());
      }
      KernelSpec spec = makeSpec("Resize", ins, {withLayout(f32(c.y), l)},
                                 {{"mode", ir::Attribute(c.mode)},
                                  {"coordinate_transformation_mode", ir::Attribute(c.transform)},
                                  {"nearest_mode", ir::Attribute(c.nearestMode)}});
      Buf<float> xs = inLayout(x, c.x, l), y(static_cast<size_t>(count(c.y)));
      args[0] = xs.data();
      runKernel(spec, args, {y.data()});
      expectNear(rowMajor(y, c.y, l).data(), want, 1e-5);
    }
  }
}

TEST(CpuLayoutUnet, ResizeNearestInt64ChannelsLastAndLayoutMismatch) {
  std::vector<int64_t> xs = {1, 3, 2, 2}, ys = {1, 3, 4, 4};
  Buf<int64_t> x(static_cast<size_t>(count(xs)));
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<int64_t>(i * 7);
  Buf<float> scales(std::vector<float>{1, 1, 2, 2});
  KernelSpec spec = makeSpec(
      "Resize", {withLayout(i64(xs), kCL), TensorDesc{}, f32({4})}, {withLayout(i64(ys), kCL)},
      {{"mode", ir::Attribute(std::string("nearest"))},
       {"coordinate_transformation_mode", ir::Attribute(std::string("asymmetric"))},
       {"nearest_mode", ir::Attribute(std::string("floor"))}});
  Buf<int64_t> xcl = inLayout(x, xs, kCL), y(static_cast<size_t>(count(ys)));
  runKernel(spec, {xcl.data(), nullptr, scales.data()}, {y.data()});
  std::vector<int64_t> got = rowMajor(y, ys, kCL);
  for (int64_t i = 0; i < count(ys); ++i) {
    std::vector<int64_t> o = unravel(i, ys);
    EXPECT_EQ(got[static_cast<size_t>(i)],
              x[static_cast<size_t>(ravel({0, o[1], o[2] / 2, o[3] / 2}, xs))])
        << "at " << i;
  }
  spec.outputs[0].layout = kRM;
  EXPECT_EQ(checkKernel(spec).message(),
            "node 'n0' (Resize): input 0 is channels-last but output 0 is row-major; the CPU "
            "kernel needs one layout");
}

// ---- Concat ------------------------------------------------------------------------------------

/// Row-major concatenation of `parts` (shapes `shapes`) along `axis`.
template <typename T>
std::vector<T> concatRef(const std::vector<Buf<T>> &parts,
                         const std::vector<std::vector<int64_t>> &shapes, size_t axis) {
  int64_t outer = 1;
  for (size_t d = 0; d < axis; ++d)
    outer *= shapes[0][d];
  std::vector<T> out;
  for (int64_t o = 0; o < outer; ++o)
    for (size_t p = 0; p < parts.size(); ++p) {
      int64_t slab = 1;
      for (size_t d = axis; d < shapes[p].size(); ++d)
        slab *= shapes[p][d];
      for (int64_t i = 0; i < slab; ++i)
        out.push_back(parts[p][static_cast<size_t>(o * slab + i)]);
    }
  return out;
}

template <typename T> void checkConcat(ir::DType dt, int64_t axis, size_t rank, Layout l) {
  std::vector<int64_t> base =
      rank == 3 ? std::vector<int64_t>{2, 3, 5} : std::vector<int64_t>{2, 3, 4, 5};
  size_t ax = static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(rank) : axis);
  std::vector<std::vector<int64_t>> shapes;
  std::vector<Buf<T>> parts, laid;
  std::vector<TensorDesc> ins;
  std::vector<const void *> args;
  std::vector<int64_t> out = base;
  out[ax] = 0;
  for (int64_t len : {int64_t(2), int64_t(0), int64_t(3), int64_t(1)}) { // one empty input
    std::vector<int64_t> s = base;
    s[ax] = len;
    shapes.push_back(s);
    Buf<T> b(static_cast<size_t>(count(s)));
    for (size_t i = 0; i < b.size(); ++i)
      b[i] = static_cast<T>(static_cast<int64_t>(parts.size() * 1000 + i));
    parts.push_back(b);
    laid.push_back(inLayout(b, s, l));
    ins.push_back(withLayout(TensorDesc{dt, s}, l));
    out[ax] += len;
  }
  for (const Buf<T> &b : laid)
    args.push_back(b.data());
  SCOPED_TRACE("axis " + std::to_string(axis) + " rank " + std::to_string(rank) + " " +
               layoutName(l));
  KernelSpec spec = makeSpec("Concat", ins, {withLayout(TensorDesc{dt, out}, l)},
                             {{"axis", ir::Attribute(axis)}});
  Buf<T> y(static_cast<size_t>(count(out)));
  runKernel(spec, args, {y.data()});
  EXPECT_EQ(rowMajor(y, out, l), concatRef(parts, shapes, ax));
}

TEST(CpuLayoutUnet, ConcatEveryAxisBothLayouts) {
  for (Layout l : {kRM, kCL}) {
    for (int64_t axis : {0, 1, 2, 3, -1, -3})
      checkConcat<float>(ir::DType::kFloat32, axis, 4, l);
    for (int64_t axis : {0, 1, 2, -2})
      checkConcat<int64_t>(ir::DType::kInt64, axis, 3, l);
  }
}

TEST(CpuLayoutUnet, ConcatMixedLayoutsRejected) {
  KernelSpec spec = makeSpec("Concat", {withLayout(f32({1, 2, 3, 3}), kCL), f32({1, 2, 3, 3})},
                             {withLayout(f32({1, 4, 3, 3}), kCL)}, {{"axis", ir::Attribute(1)}});
  EXPECT_EQ(checkKernel(spec).message(),
            "node 'n0' (Concat): input 1 is row-major but output 0 is channels-last; the CPU "
            "kernel needs one layout");
}

} // namespace
} // namespace dtc::ops::cpu::test
