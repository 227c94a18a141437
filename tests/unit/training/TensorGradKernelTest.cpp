// CPU kernels of the TensorGrad family (ops/cpu/TensorGradLoss.cpp, TensorGradIndex.cpp) against
// reference loops in double precision: SoftmaxCrossEntropyLossGrad (2-D and 4-D, weights,
// ignore_index, every reduction, dlog_prob, in place, int32 labels), NegativeLogLikelihoodLossGrad,
// GatherGrad (repeated and negative indices, axes 0 and 1, out-of-range errors) and SliceGrad
// (positive and negative steps).
#include "tests/unit/cpu/KernelTestUtil.h"

#include <cmath>

namespace dtc::ops::cpu::test {
namespace {

KernelSpec dtcSpec(std::string op, std::vector<TensorDesc> ins, std::vector<TensorDesc> outs,
                   std::map<std::string, ir::Attribute> attrs) {
  KernelSpec s = makeSpec(std::move(op), std::move(ins), std::move(outs), std::move(attrs));
  s.domain = "ai.dtc";
  return s;
}

struct LossCase {
  std::vector<int64_t> shape; // (N, C, d...)
  std::vector<int64_t> labels;
  std::vector<float> weights; // empty: none
  std::string reduction;
  bool hasIgnore = false;
  int64_t ignore = 0;
};

/// Reference dscores (or dinput for NLL, where `x` are log-probabilities).
std::vector<float> referenceLossGrad(const LossCase &c, const std::vector<float> &x,
                                     const std::vector<float> &dloss, const float *dlp,
                                     bool softmax) {
  const int64_t n = c.shape[0], cl = c.shape[1], d = count(c.shape) / (n * cl);
  double wsum = 0;
  for (int64_t y : c.labels)
    if (!(c.hasIgnore && y == c.ignore))
      wsum += c.weights.empty() ? 1.0 : c.weights[y];
  std::vector<float> out(x.size(), 0.f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < d; ++j) {
      const int64_t s = i * d + j, y = c.labels[s];
      const bool ign = c.hasIgnore && y == c.ignore;
      double g = 0;
      if (!ign) {
        const double w = c.weights.empty() ? 1.0 : c.weights[y];
        g = c.reduction == "none"  ? w * dloss[s]
            : c.reduction == "sum" ? w * dloss[0]
                                   : w * dloss[0] / wsum;
      }
      auto at = [&](int64_t k) { return (i * cl + k) * d + j; };
      if (!softmax) {
        if (!ign)
          out[at(y)] = static_cast<float>(-g);
        continue;
      }
      double mx = -1e300, z = 0, sd = 0;
      for (int64_t k = 0; k < cl; ++k)
        mx = std::max(mx, static_cast<double>(x[at(k)]));
      for (int64_t k = 0; k < cl; ++k)
        z += std::exp(x[at(k)] - mx);
      if (dlp)
        for (int64_t k = 0; k < cl; ++k)
          sd += dlp[at(k)];
      for (int64_t k = 0; k < cl; ++k) {
        const double p = std::exp(x[at(k)] - mx) / z;
        double v = g * (p - (!ign && k == y ? 1.0 : 0.0));
        if (dlp)
          v += dlp[at(k)] - p * sd;
        out[at(k)] = static_cast<float>(v);
      }
    }
  return out;
}

std::vector<int64_t> perSample(std::vector<int64_t> shape) {
  shape.erase(shape.begin() + 1);
  return shape;
}

void runSce(const LossCase &c, bool withDlp, bool inPlace, bool labels32 = false) {
  SCOPED_TRACE(c.reduction + (withDlp ? " dlp" : "") + (inPlace ? " in-place" : ""));
  const std::vector<int64_t> ps = perSample(c.shape);
  const std::vector<int64_t> lossShape = c.reduction == "none" ? ps : std::vector<int64_t>{};
  Buf<float> x = randomBuf(static_cast<size_t>(count(c.shape)), 3);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] *= 4.f;
  Buf<float> dl = randomBuf(static_cast<size_t>(count(lossShape)), 5);
  Buf<float> dlp = randomBuf(x.size(), 7);
  Buf<int64_t> lab(c.labels);
  std::vector<int32_t> lab32v(c.labels.begin(), c.labels.end());
  Buf<int32_t> lab32(lab32v);
  Buf<float> w(c.weights);
  std::vector<TensorDesc> ins = {f32(lossShape), f32(c.shape),
                                 labels32 ? TensorDesc{ir::DType::kInt32, ps} : i64(ps)};
  std::vector<const void *> ptrs = {dl.data(), x.data(),
                                    labels32 ? static_cast<const void *>(lab32.data())
                                             : static_cast<const void *>(lab.data())};
  if (!c.weights.empty() || withDlp) {
    ins.push_back(c.weights.empty() ? TensorDesc{} : f32({c.shape[1]}));
    ptrs.push_back(c.weights.empty() ? nullptr : w.data());
  }
  if (withDlp) {
    ins.push_back(f32(c.shape));
    ptrs.push_back(dlp.data());
  }
  std::map<std::string, ir::Attribute> attrs = {{"reduction", ir::Attribute(c.reduction)}};
  if (c.hasIgnore)
    attrs["ignore_index"] = ir::Attribute(c.ignore);
  KernelSpec spec = dtcSpec("SoftmaxCrossEntropyLossGrad", ins, {f32(c.shape)}, attrs);
  std::vector<float> want =
      referenceLossGrad(c, x.vec(), dl.vec(), withDlp ? dlp.data() : nullptr, true);
  EXPECT_EQ(inPlaceInput(spec), 1);
  Buf<float> out(x.size());
  Buf<float> xCopy = x;
  float *dst = inPlace ? xCopy.data() : out.data();
  ptrs[1] = xCopy.data();
  runKernel(spec, ptrs, {dst});
  expectNear(dst, want, 2e-5);
}

TEST(TensorGradKernel, SoftmaxCrossEntropyLossGrad2D) {
  for (const char *red : {"mean", "sum", "none"})
    for (bool dlp : {false, true}) {
      runSce({{5, 7}, {0, 6, 3, 3, 1}, {}, red}, dlp, false);
      runSce({{5, 4}, {0, -100, 3, -100, 1}, {0.5f, 2.f, 1.f, 3.f}, red, true, -100}, dlp, true);
    }
  runSce({{3, 4}, {1, 2, 3}, {}, "mean"}, false, false, /*labels32=*/true);
}

TEST(TensorGradKernel, SoftmaxCrossEntropyLossGrad4D) {
  std::vector<int64_t> labels = {0, 1, 2, 9, 1, 0, 2, 2, 9, 0, 1, 1, 0, 0, 2, 9, 9, 9};
  for (const char *red : {"mean", "sum", "none"})
    for (bool dlp : {false, true}) {
      runSce({{3, 3, 2, 3}, labels, {1.5f, 0.5f, 1.f}, red, true, 9}, dlp, false);
      runSce({{3, 3, 6}, labels, {}, red, true, 9}, dlp, true);
    }
}

TEST(TensorGradKernel, SoftmaxCrossEntropyLossGradRejectsBadLabels) {
  KernelSpec spec = dtcSpec("SoftmaxCrossEntropyLossGrad", {f32({}), f32({2, 3}), i64({2})},
                            {f32({2, 3})}, {{"reduction", ir::Attribute("mean")}});
  CpuContext ctx;
  auto k = createKernel(spec, ctx);
  ASSERT_TRUE(k.hasValue()) << k.status().message();
  Buf<float> dl(1), x(6), out(6);
  Buf<int64_t> lab(std::vector<int64_t>{1, 3});
  std::vector<const void *> ins = {dl.data(), x.data(), lab.data()};
  std::vector<void *> outs = {out.data()};
  Status st = (*k)->run({ins.data(), ins.size(), outs.data(), outs.size()});
  ASSERT_FALSE(st.isOk());
  EXPECT_EQ(st.message(),
            "node 'n0' (ai.dtc.SoftmaxCrossEntropyLossGrad): label 3 at sample 1 is out "
            "of range [0, 3)");
  // dloss of the wrong shape for the reduction is a check error.
  KernelSpec bad = dtcSpec("SoftmaxCrossEntropyLossGrad", {f32({2}), f32({2, 3}), i64({2})},
                           {f32({2, 3})}, {{"reduction", ir::Attribute("sum")}});
  EXPECT_FALSE(checkKernel(bad).isOk());
}

TEST(TensorGradKernel, SoftmaxCrossEntropyLossGradLanguageModelSize) {
  // 256 tokens x a GPT-2 vocabulary, in place, run twice (the second run starts from the first
  // one's output). Speed is a benchmark matter (tools/bench), not asserted here.
  const int64_t n = 256, c = 50257;
  Buf<float> x = randomBuf(static_cast<size_t>(n * c), 37);
  std::vector<int64_t> labv(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    labv[static_cast<size_t>(i)] = (i * 7919) % c;
  Buf<int64_t> lab(labv);
  Buf<float> dl(std::vector<float>{1.f});
  KernelSpec spec = dtcSpec("SoftmaxCrossEntropyLossGrad", {f32({}), f32({n, c}), i64({n})},
                            {f32({n, c})}, {{"reduction", ir::Attribute("mean")}});
  CpuContext ctx;
  auto k = createKernel(spec, ctx);
  ASSERT_TRUE(k.hasValue()) << k.status().message();
  std::vector<const void *> ins = {dl.data(), x.data(), lab.data()};
  std::vector<void *> outs = {x.data()};
  ASSERT_TRUE((*k)->run({ins.data(), ins.size(), outs.data(), outs.size()}).isOk());
  ASSERT_TRUE((*k)->run({ins.data(), ins.size(), outs.data(), outs.size()}).isOk());
  // Each row of the gradient sums to 0 (softmax sums to 1, minus the one-hot).
  double rowSum = 0;
  for (int64_t j = 0; j < c; ++j)
    rowSum += x[static_cast<size_t>(j)];
  EXPECT_NEAR(rowSum, 0.0, 1e-6);
}

TEST(TensorGradKernel, NegativeLogLikelihoodLossGrad) {
  std::vector<LossCase> cases = {
      {{4, 3}, {0, 2, 1, 2}, {}, "mean"},
      {{4, 3}, {0, 2, -1, 2}, {0.2f, 1.f, 3.f}, "sum", true, -1},
      {{2, 3, 2, 2}, {0, 1, 2, 1, 2, 1, 0, 0}, {0.2f, 1.f, 3.f}, "none", true, 1},
      {{2, 3, 2, 2}, {0, 1, 2, 1, 2, 1, 0, 0}, {}, "mean", true, 1}};
  for (const LossCase &c : cases) {
    SCOPED_TRACE(c.reduction);
    const std::vector<int64_t> ps = perSample(c.shape);
    const std::vector<int64_t> lossShape = c.reduction == "none" ? ps : std::vector<int64_t>{};
    Buf<float> dl = randomBuf(static_cast<size_t>(count(lossShape)), 11);
    Buf<int64_t> lab(c.labels);
    Buf<float> w(c.weights);
    std::vector<TensorDesc> ins = {f32(lossShape), i64(ps)};
    std::vector<const void *> ptrs = {dl.data(), lab.data()};
    if (!c.weights.empty()) {
      ins.push_back(f32({c.shape[1]}));
      ptrs.push_back(w.data());
    }
    std::map<std::string, ir::Attribute> attrs = {{"reduction", ir::Attribute(c.reduction)},
                                                  {"shape", ir::Attribute(c.shape)}};
    if (c.hasIgnore)
      attrs["ignore_index"] = ir::Attribute(c.ignore);
    Buf<float> out = randomBuf(static_cast<size_t>(count(c.shape)), 13); // overwritten
    runKernel(dtcSpec("NegativeLogLikelihoodLossGrad", ins, {f32(c.shape)}, attrs), ptrs,
              {out.data()});
    std::vector<float> x(out.size(), 0.f);
    expectNear(out.data(), referenceLossGrad(c, x, dl.vec(), nullptr, false));
  }
}

// ---- GatherGrad ------------------------------------------------------------------------------

std::vector<float> referenceGatherGrad(const std::vector<int64_t> &data, int64_t axis,
                                       const std::vector<int64_t> &idx,
                                       const std::vector<float> &dy) {
  int64_t outer = 1, inner = 1;
  for (int64_t a = 0; a < axis; ++a)
    outer *= data[a];
  for (size_t a = axis + 1; a < data.size(); ++a)
    inner *= data[a];
  const int64_t dim = data[axis], q = static_cast<int64_t>(idx.size());
  std::vector<float> dx(static_cast<size_t>(count(data)), 0.f);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < q; ++j) {
      const int64_t i = idx[j] < 0 ? idx[j] + dim : idx[j];
      for (int64_t k = 0; k < inner; ++k)
        dx[(o * dim + i) * inner + k] += dy[(o * q + j) * inner + k];
    }
  return dx;
}

void runGatherGrad(const std::vector<int64_t> &data, int64_t axis,
                   const std::vector<int64_t> &idxShape, const std::vector<int64_t> &idx) {
  const int64_t a = axis < 0 ? axis + static_cast<int64_t>(data.size()) : axis;
  std::vector<int64_t> dyShape(data.begin(), data.begin() + a);
  dyShape.insert(dyShape.end(), idxShape.begin(), idxShape.end());
  dyShape.insert(dyShape.end(), data.begin() + a + 1, data.end());
  Buf<float> dy = randomBuf(static_cast<size_t>(count(dyShape)), 17);
  Buf<int64_t> ib(idx);
  Buf<float> dx = randomBuf(static_cast<size_t>(count(data)), 19); // overwritten
  runKernel(dtcSpec("GatherGrad", {f32(dyShape), i64(idxShape)}, {f32(data)},
                    {{"axis", ir::Attribute(axis)}, {"shape", ir::Attribute(data)}}),
            {dy.data(), ib.data()}, {dx.data()});
  expectNear(dx.data(), referenceGatherGrad(data, a, idx, dy.vec()));
}

TEST(TensorGradKernel, GatherGradScatterAdds) {
  runGatherGrad({6, 4}, 0, {2, 3}, {1, 5, 1, -1, 0, 1});
  runGatherGrad({2, 5, 3}, 1, {4}, {4, -5, 0, 4});
  runGatherGrad({3, 4}, -1, {}, {-2});
  runGatherGrad({5, 1}, 0, {7}, {0, 0, 0, 4, 4, -1, 2});
}

TEST(TensorGradKernel, GatherGradInt32IndicesAndRangeErrors) {
  Buf<float> dy(std::vector<float>{1, 2, 3, 4, 5, 6});
  Buf<int32_t> idx(std::vector<int32_t>{2, -3, 2});
  Buf<float> dx(6);
  KernelSpec spec = dtcSpec(
      "GatherGrad", {f32({3, 2}), {ir::DType::kInt32, {3}}}, {f32({3, 2})},
      {{"axis", ir::Attribute(int64_t{0})}, {"shape", ir::Attribute(std::vector<int64_t>{3, 2})}});
  runKernel(spec, {dy.data(), idx.data()}, {dx.data()});
  EXPECT_EQ(dx.vec(), (std::vector<float>{3, 4, 0, 0, 6, 8}));
  idx[1] = 3;
  CpuContext ctx;
  auto k = createKernel(spec, ctx);
  ASSERT_TRUE(k.hasValue());
  std::vector<const void *> ins = {dy.data(), idx.data()};
  std::vector<void *> outs = {dx.data()};
  Status st = (*k)->run({ins.data(), ins.size(), outs.data(), outs.size()});
  EXPECT_EQ(st.message(),
            "node 'n0' (ai.dtc.GatherGrad): index 3 is out of range for axis 0 of size 3");
}

TEST(TensorGradKernel, GatherGradEmbeddingTable) {
  // GPT-2 small embedding: (50257 x 768) table, 8 x 128 tokens, run twice: the second run
  // must give the same table (the output is zeroed first, not accumulated across runs).
  const int64_t vocab = 50257, dm = 768, tokens = 1024;
  Buf<float> dy = randomBuf(static_cast<size_t>(tokens * dm), 23);
  std::vector<int64_t> idxv(tokens);
  for (int64_t t = 0; t < tokens; ++t)
    idxv[t] = (t * 7919) % vocab;
  Buf<int64_t> idx(idxv);
  Buf<float> dx(static_cast<size_t>(vocab * dm));
  KernelSpec spec = dtcSpec("GatherGrad", {f32({tokens, dm}), i64({tokens})}, {f32({vocab, dm})},
                            {{"axis", ir::Attribute(int64_t{0})},
                             {"shape", ir::Attribute(std::vector<int64_t>{vocab, dm})}});
  CpuContext ctx;
  auto k = createKernel(spec, ctx);
  ASSERT_TRUE(k.hasValue());
  std::vector<const void *> ins = {dy.data(), idx.data()};
  std::vector<void *> outs = {dx.data()};
  ASSERT_TRUE((*k)->run({ins.data(), ins.size(), outs.data(), outs.size()}).isOk());
  ASSERT_TRUE((*k)->run({ins.data(), ins.size(), outs.data(), outs.size()}).isOk());
  EXPECT_FLOAT_EQ(dx[static_cast<size_t>(idxv[5] * dm + 3)], dy[5 * dm + 3]);
}

// ---- SliceGrad -------------------------------------------------------------------------------

void runSliceGrad(const std::vector<int64_t> &shape, const std::vector<int64_t> &starts,
                  const std::vector<int64_t> &steps, const std::vector<int64_t> &counts) {
  Buf<float> dy = randomBuf(static_cast<size_t>(count(counts)), 29);
  Buf<float> dx = randomBuf(static_cast<size_t>(count(shape)), 31); // overwritten
  runKernel(dtcSpec("SliceGrad", {f32(counts)}, {f32(shape)},
                    {{"shape", ir::Attribute(shape)},
                     {"starts", ir::Attribute(starts)},
                     {"steps", ir::Attribute(steps)}}),
            {dy.data()}, {dx.data()});
  // Reference: walk dy's coordinates.
  std::vector<float> want(dx.size(), 0.f);
  const size_t r = shape.size();
  std::vector<int64_t> k(r, 0);
  for (int64_t e = 0; e < count(counts); ++e) {
    int64_t rem = e, off = 0, stride = 1;
    for (size_t a = r; a-- > 0;) {
      k[a] = rem % counts[a];
      rem /= counts[a];
    }
    for (size_t a = r; a-- > 0;) {
      off += (starts[a] + k[a] * steps[a]) * stride;
      stride *= shape[a];
    }
    want[static_cast<size_t>(off)] = dy[static_cast<size_t>(e)];
  }
  expectNear(dx.data(), want, 0);
}

TEST(TensorGradKernel, SliceGradScattersWithSteps) {
  runSliceGrad({3, 7}, {0, 1}, {1, 2}, {3, 3});
  runSliceGrad({2, 5, 3}, {0, 4, 0}, {1, -1, 1}, {2, 5, 3});
  runSliceGrad({6, 4, 8}, {5, 1, 0}, {-2, 1, 3}, {3, 3, 3});
  runSliceGrad({4, 5}, {3, 4}, {-3, -2}, {2, 3});
  runSliceGrad({3, 4}, {0, 0}, {1, 1}, {0, 4}); // empty dy: dx all zeros
  runSliceGrad({9}, {8}, {-4}, {3});
}

TEST(TensorGradKernel, SliceGradRejectsOutOfRangeAttributes) {
  KernelSpec spec = dtcSpec("SliceGrad", {f32({3})}, {f32({5})},
                            {{"shape", ir::Attribute(std::vector<int64_t>{5})},
                             {"starts", ir::Attribute(std::vector<int64_t>{1})},
                             {"steps", ir::Attribute(std::vector<int64_t>{2})}});
  Status st = checkKernel(spec);
  EXPECT_EQ(
      st.message(),
      "node 'n0' (ai.dtc.SliceGrad): axis 0: 3 elements from 1 by step 2 do not fit in dim 5");
}

} // namespace
} // namespace dtc::ops::cpu::test
