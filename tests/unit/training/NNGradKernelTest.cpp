// CPU kernels of the nn training ops against reference loops (double precision): MatMulT
// (strided transposes, batch broadcasting, alpha), BatchNormTraining (batch statistics, the
// running-statistics update and its momentum convention), BatchNormGrad and LayerNormGrad.
#include "tests/unit/cpu/KernelTestUtil.h"

#include <cmath>

namespace dtc::ops::cpu::test {
namespace {

/// makeSpec for an ai.dtc op.
KernelSpec dtcSpec(std::string op, std::vector<TensorDesc> ins, std::vector<TensorDesc> outs,
                   std::map<std::string, ir::Attribute> attrs = {}) {
  KernelSpec s = makeSpec(std::move(op), std::move(ins), std::move(outs), std::move(attrs));
  s.domain = "ai.dtc";
  return s;
}

// ---- MatMulT ----------------------------------------------------------------------------------

/// Reference of MatMulT for rank-4 operands (batch dims broadcast).
std::vector<float> refMatMulT(const Buf<float> &a, std::vector<int64_t> sa, bool ta,
                              const Buf<float> &b, std::vector<int64_t> sb, bool tb, float alpha,
                              std::vector<int64_t> &outShape) {
  int64_t m = ta ? sa[3] : sa[2], k = ta ? sa[2] : sa[3], n = tb ? sb[2] : sb[3];
  int64_t b0 = std::max(sa[0], sb[0]), b1 = std::max(sa[1], sb[1]);
  outShape = {b0, b1, m, n};
  std::vector<float> y(static_cast<size_t>(b0 * b1 * m * n));
  for (int64_t i0 = 0; i0 < b0; ++i0)
    for (int64_t i1 = 0; i1 < b1; ++i1) {
      int64_t offA = ((sa[0] == 1 ? 0 : i0) * sa[1] + (sa[1] == 1 ? 0 : i1)) * sa[2] * sa[3];
      int64_t offB = ((sb[0] == 1 ? 0 : i0) * sb[1] + (sb[1] == 1 ? 0 : i1)) * sb[2] * sb[3];
      for (int64_t r = 0; r < m; ++r)
        for (int64_t c = 0; c < n; ++c) {
          double s = 0;
          for (int64_t q = 0; q < k; ++q) {
            double av = a[static_cast<size_t>(offA + (ta ? q * m + r : r * k + q))];
            double bv = b[static_cast<size_t>(offB + (tb ? c * k + q : q * n + c))];
            s += av * bv;
          }
          y[static_cast<size_t>(((i0 * b1 + i1) * m + r) * n + c)] = static_cast<float>(alpha * s);
        }
    }
  return y;
}

TEST(MatMulTKernel, TransposesAndBroadcastMatchReference) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const int64_t m = 3, k = 4, n = 5;
      std::vector<int64_t> sa = {2, 1, ta ? k : m, ta ? m : k};
      std::vector<int64_t> sb = {1, 3, tb ? n : k, tb ? k : n};
      Buf<float> a = randomBuf(static_cast<size_t>(count(sa)), 1);
      Buf<float> b = randomBuf(static_cast<size_t>(count(sb)), 2);
      std::vector<int64_t> outShape;
      std::vector<float> want = refMatMulT(a, sa, ta, b, sb, tb, 0.5f, outShape);
      Buf<float> y(want.size());
      runKernel(dtcSpec("MatMulT", {f32(sa), f32(sb)}, {f32(outShape)},
                        {{"transA", ir::Attribute(int64_t{ta})},
                         {"transB", ir::Attribute(int64_t{tb})},
                         {"alpha", ir::Attribute(0.5f)}}),
                {a.data(), b.data()}, {y.data()});
      expectNear(y.data(), want, 1e-5);
    }
}

TEST(MatMulTKernel, MixedRanksAndEmptyK) {
  // [2,4,3]^T-ish: A [2,4,3] with transA, B [4,5] (no batch): Y [2,3,5].
  Buf<float> a = randomBuf(24, 3), b = randomBuf(20, 4);
  std::vector<int64_t> outShape;
  std::vector<float> want =
      refMatMulT(a, {1, 2, 4, 3}, true, b, {1, 1, 4, 5}, false, 1.f, outShape);
  Buf<float> y(30);
  runKernel(dtcSpec("MatMulT", {f32({2, 4, 3}), f32({4, 5})}, {f32({2, 3, 5})},
                    {{"transA", ir::Attribute(int64_t{1})}}),
            {a.data(), b.data()}, {y.data()});
  expectNear(y.data(), want, 1e-5);
  // K = 0: a sum over nothing.
  Buf<float> z(6);
  for (size_t i = 0; i < 6; ++i)
    z[i] = 7.f;
  runKernel(dtcSpec("MatMulT", {f32({2, 0}), f32({3, 0})}, {f32({2, 3})},
                    {{"transB", ir::Attribute(int64_t{1})}}),
            {a.data(), b.data()}, {z.data()});
  expectNear(z.data(), std::vector<float>(6, 0.f));
}

TEST(MatMulTKernel, CheckErrors) {
  EXPECT_EQ(checkKernel(dtcSpec("MatMulT", {f32({2, 3}), f32({4, 5})}, {f32({2, 5})},
                                {{"transB", ir::Attribute(int64_t{1})}}))
                .message(),
            "node 'n0' (ai.dtc.MatMulT): inner dimensions differ: A [2,3] (transA=0), B [4,5] "
            "(transB=1)");
  EXPECT_EQ(checkKernel(dtcSpec("MatMulT", {f32({3}), f32({3, 5})}, {f32({5})})).message(),
            "node 'n0' (ai.dtc.MatMulT): operands must have rank >= 2, got [3] and [3,5]");
}

// ---- BatchNormTraining / BatchNormGrad ---------------------------------------------------------

struct BnRef {
  std::vector<double> mean, var; // biased
  int64_t n = 0;
};

BnRef bnStats(const Buf<float> &x, const std::vector<int64_t> &shape) {
  const int64_t c = shape[1], inner = count(shape) / (shape[0] * c);
  BnRef r;
  r.n = shape[0] * inner;
  r.mean.assign(static_cast<size_t>(c), 0.0);
  r.var.assign(static_cast<size_t>(c), 0.0);
  for (int64_t ch = 0; ch < c; ++ch) {
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < shape[0]; ++i)
      for (int64_t j = 0; j < inner; ++j)
        s += x[static_cast<size_t>((i * c + ch) * inner + j)];
    double mu = s / static_cast<double>(r.n);
    for (int64_t i = 0; i < shape[0]; ++i)
      for (int64_t j = 0; j < inner; ++j) {
        double d = x[static_cast<size_t>((i * c + ch) * inner + j)] - mu;
        s2 += d * d;
      }
    r.mean[static_cast<size_t>(ch)] = mu;
    r.var[static_cast<size_t>(ch)] = s2 / static_cast<double>(r.n);
  }
  return r;
}

/// Runs BatchNormTraining on X of `shape` and checks every output against the reference:
/// Y with the biased batch variance, running_mean = in * m + mu * (1 - m), running_var = in * m
/// + var * n / (n - 1) * (1 - m) (var alone when n = 1).
void checkBatchNormTraining(const std::vector<int64_t> &shape, float momentum) {
  const int64_t c = shape[1], total = count(shape), inner = total / (shape[0] * c);
  const float eps = 1e-3f;
  Buf<float> x = randomBuf(static_cast<size_t>(total), 5);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 2.f * x[i] + 0.5f;
  Buf<float> scale = randomBuf(static_cast<size_t>(c), 6),
             bias = randomBuf(static_cast<size_t>(c), 7);
  Buf<float> inMean = randomBuf(static_cast<size_t>(c), 8), inVar(static_cast<size_t>(c));
  for (int64_t i = 0; i < c; ++i)
    inVar[static_cast<size_t>(i)] = 1.f + 0.25f * static_cast<float>(i);
  Buf<float> y(static_cast<size_t>(total)), rm(static_cast<size_t>(c)), rv(static_cast<size_t>(c)),
      sm(static_cast<size_t>(c)), sv(static_cast<size_t>(c));
  runKernel(dtcSpec("BatchNormTraining", {f32(shape), f32({c}), f32({c}), f32({c}), f32({c})},
                    {f32(shape), f32({c}), f32({c}), f32({c}), f32({c})},
                    {{"epsilon", ir::Attribute(eps)}, {"momentum", ir::Attribute(momentum)}}),
            {x.data(), scale.data(), bias.data(), inMean.data(), inVar.data()},
            {y.data(), rm.data(), rv.data(), sm.data(), sv.data()});
  BnRef ref = bnStats(x, shape);
  std::vector<float> wantY(static_cast<size_t>(total)), wantRm, wantRv, wantSm, wantSv;
  for (int64_t ch = 0; ch < c; ++ch) {
    size_t k = static_cast<size_t>(ch);
    double unbiased = ref.n > 1 ? ref.var[k] * ref.n / (ref.n - 1) : ref.var[k];
    wantRm.push_back(static_cast<float>(inMean[k] * momentum + ref.mean[k] * (1 - momentum)));
    wantRv.push_back(static_cast<float>(inVar[k] * momentum + unbiased * (1 - momentum)));
    wantSm.push_back(static_cast<float>(ref.mean[k]));
    wantSv.push_back(static_cast<float>(ref.var[k]));
    double inv = 1.0 / std::sqrt(ref.var[k] + eps);
    for (int64_t i = 0; i < shape[0]; ++i)
      for (int64_t j = 0; j < inner; ++j) {
        size_t e = static_cast<size_t>((i * c + ch) * inner + j);
        wantY[e] = static_cast<float>(scale[k] * (x[e] - ref.mean[k]) * inv + bias[k]);
      }
  }
  expectNear(y.data(), wantY, 1e-4);
  expectNear(rm.data(), wantRm, 1e-5);
  expectNear(rv.data(), wantRv, 1e-5);
  expectNear(sm.data(), wantSm, 1e-5);
  expectNear(sv.data(), wantSv, 1e-5);
}

TEST(BatchNormTrainingKernel, MatchesReference) {
  checkBatchNormTraining({4, 3, 2, 2}, 0.9f);
  checkBatchNormTraining({6, 5}, 0.9f);
  checkBatchNormTraining({2, 3, 7}, 0.5f);
  checkBatchNormTraining({2, 2, 1, 3, 2}, 0.99f);
  checkBatchNormTraining({3, 2, 2, 1, 3, 1}, 0.9f); // rank 6: spatial axes flattened
  checkBatchNormTraining({1, 4}, 0.9f);             // n = 1: biased (0) variance
}

// ONNX momentum m keeps m of the old running value (PyTorch momentum 0.1 = ONNX 0.9); the
// variance that enters running_var is unbiased (PyTorch), so momentum 0 gives exactly
// n / (n - 1) times saved_var.
TEST(BatchNormTrainingKernel, MomentumConventionAndUnbiasedRunningVar) {
  const std::vector<float> x = {1.f, 10.f, 3.f, 20.f}; // (N=2, C=2): channel 0 {1,3}, 1 {10,20}
  Buf<float> xb(x), one(std::vector<float>{1.f, 1.f}), zero(std::vector<float>{0.f, 0.f});
  Buf<float> inMean(std::vector<float>{100.f, 200.f}), inVar(std::vector<float>{4.f, 8.f});
  for (float m : {0.f, 1.f, 0.9f}) {
    Buf<float> y(4), rm(2), rv(2), sm(2), sv(2);
    runKernel(dtcSpec("BatchNormTraining", {f32({2, 2}), f32({2}), f32({2}), f32({2}), f32({2})},
                      {f32({2, 2}), f32({2}), f32({2}), f32({2}), f32({2})},
                      {{"epsilon", ir::Attribute(0.f)}, {"momentum", ir::Attribute(m)}}),
              {xb.data(), one.data(), zero.data(), inMean.data(), inVar.data()},
              {y.data(), rm.data(), rv.data(), sm.data(), sv.data()});
    expectNear(sm.data(), {2.f, 15.f});
    expectNear(sv.data(), {1.f, 25.f}); // biased
    expectNear(y.data(), {-1.f, -1.f, 1.f, 1.f});
    // unbiased batch variances: 2 and 50
    expectNear(rm.data(), {100.f * m + 2.f * (1 - m), 200.f * m + 15.f * (1 - m)});
    expectNear(rv.data(), {4.f * m + 2.f * (1 - m), 8.f * m + 50.f * (1 - m)});
  }
}

TEST(BatchNormTrainingKernel, OptionalOutputsAndErrors) {
  // Only Y: the statistics go to scratch.
  Buf<float> x(std::vector<float>{1.f, 3.f}), one(std::vector<float>{1.f}),
      zero(std::vector<float>{0.f}), y(2);
  runKernel(dtcSpec("BatchNormTraining", {f32({2, 1}), f32({1}), f32({1}), f32({1}), f32({1})},
                    {f32({2, 1})}, {{"epsilon", ir::Attribute(0.f)}}),
            {x.data(), one.data(), zero.data(), zero.data(), one.data()}, {y.data()});
  expectNear(y.data(), {-1.f, 1.f});
  EXPECT_EQ(
      checkKernel(dtcSpec("BatchNormTraining",
                          {f32({2, 3}), f32({2}), f32({3}), f32({3}), f32({3})}, {f32({2, 3})}))
          .message(),
      "node 'n0' (ai.dtc.BatchNormTraining): input 1 has shape [2], expected [3]");
  EXPECT_EQ(
      checkKernel(dtcSpec("BatchNormTraining",
                          {f32({0, 3}), f32({3}), f32({3}), f32({3}), f32({3})}, {f32({0, 3})}))
          .message(),
      "node 'n0' (ai.dtc.BatchNormTraining): X [0,3] has no element per channel; batch "
      "statistics need at least one");
}

/// dX, dScale, dB of batch normalization from the batch statistics (Ioffe & Szegedy 2015).
void checkBatchNormGrad(const std::vector<int64_t> &shape, bool allOutputs) {
  const int64_t c = shape[1], total = count(shape), inner = total / (shape[0] * c);
  const float eps = 1e-3f;
  Buf<float> x = randomBuf(static_cast<size_t>(total), 11),
             dy = randomBuf(static_cast<size_t>(total), 12);
  Buf<float> scale = randomBuf(static_cast<size_t>(c), 13);
  BnRef ref = bnStats(x, shape);
  Buf<float> mean(static_cast<size_t>(c)), var(static_cast<size_t>(c));
  for (size_t k = 0; k < static_cast<size_t>(c); ++k) {
    mean[k] = static_cast<float>(ref.mean[k]);
    var[k] = static_cast<float>(ref.var[k]);
  }
  std::vector<float> wantDx(static_cast<size_t>(total)), wantDs, wantDb;
  double naiveDiff = 0; // how far dX is from the frozen-statistics gradient dY * scale * inv
  for (int64_t ch = 0; ch < c; ++ch) {
    size_t k = static_cast<size_t>(ch);
    double inv = 1.0 / std::sqrt(static_cast<double>(var[k]) + eps), sdy = 0, sdyx = 0;
    auto at = [&](int64_t i, int64_t j) { return static_cast<size_t>((i * c + ch) * inner + j); };
    for (int64_t i = 0; i < shape[0]; ++i)
      for (int64_t j = 0; j < inner; ++j) {
        sdy += dy[at(i, j)];
        sdyx += dy[at(i, j)] * (x[at(i, j)] - mean[k]) * inv;
      }
    wantDb.push_back(static_cast<float>(sdy));
    wantDs.push_back(static_cast<float>(sdyx));
    double n = static_cast<double>(ref.n);
    for (int64_t i = 0; i < shape[0]; ++i)
      for (int64_t j = 0; j < inner; ++j) {
        double xhat = (x[at(i, j)] - mean[k]) * inv;
        double dx = scale[k] * inv * (dy[at(i, j)] - sdy / n - xhat * sdyx / n);
        wantDx[at(i, j)] = static_cast<float>(dx);
        naiveDiff = std::max(naiveDiff, std::fabs(dx - dy[at(i, j)] * scale[k] * inv));
      }
  }
  EXPECT_GT(naiveDiff, 1e-2); // the batch-statistics terms matter in this test
  Buf<float> dx(static_cast<size_t>(total)), ds(static_cast<size_t>(c)), db(static_cast<size_t>(c));
  std::vector<TensorDesc> outs = {f32(shape)};
  std::vector<void *> outPtrs = {dx.data()};
  if (allOutputs) {
    outs.push_back(f32({c}));
    outs.push_back(f32({c}));
    outPtrs.push_back(ds.data());
    outPtrs.push_back(db.data());
  }
  runKernel(dtcSpec("BatchNormGrad", {f32(shape), f32(shape), f32({c}), f32({c}), f32({c})}, outs,
                    {{"epsilon", ir::Attribute(eps)}}),
            {dy.data(), x.data(), scale.data(), mean.data(), var.data()}, outPtrs);
  expectNear(dx.data(), wantDx, 1e-4);
  if (allOutputs) {
    expectNear(ds.data(), wantDs, 1e-4);
    expectNear(db.data(), wantDb, 1e-4);
  }
}

TEST(BatchNormGradKernel, MatchesReference) {
  checkBatchNormGrad({4, 3, 2, 2}, true);
  checkBatchNormGrad({5, 2}, true);
  checkBatchNormGrad({3, 4, 5}, false);
  checkBatchNormGrad({2, 2, 3, 1, 2, 2}, true);
}

TEST(BatchNormGradKernel, InPlaceOverDy) {
  EXPECT_EQ(inPlaceInput(dtcSpec("BatchNormGrad",
                                 {f32({2, 3}), f32({2, 3}), f32({3}), f32({3}), f32({3})},
                                 {f32({2, 3}), f32({3}), f32({3})})),
            0);
  // Same buffer for dY and dX gives the same dX as separate buffers.
  Buf<float> x = randomBuf(24, 21), dy = randomBuf(24, 22), scale = randomBuf(3, 23);
  BnRef ref = bnStats(x, {2, 3, 4});
  Buf<float> mean(3), var(3), dx(24), ds(3), db(3), ds2(3), db2(3);
  for (size_t k = 0; k < 3; ++k) {
    mean[k] = static_cast<float>(ref.mean[k]);
    var[k] = static_cast<float>(ref.var[k]);
  }
  KernelSpec spec =
      dtcSpec("BatchNormGrad", {f32({2, 3, 4}), f32({2, 3, 4}), f32({3}), f32({3}), f32({3})},
              {f32({2, 3, 4}), f32({3}), f32({3})});
  runKernel(spec, {dy.data(), x.data(), scale.data(), mean.data(), var.data()},
            {dx.data(), ds.data(), db.data()});
  Buf<float> shared = dy;
  runKernel(spec, {shared.data(), x.data(), scale.data(), mean.data(), var.data()},
            {shared.data(), ds2.data(), db2.data()});
  expectNear(shared.data(), dx.vec(), 1e-6);
  expectNear(ds2.data(), ds.vec(), 1e-6);
}

// ---- LayerNormGrad ----------------------------------------------------------------------------

/// Reference LayerNormGrad: rows of the normalized shape, Scale broadcast from `scaleShape`.
void checkLayerNormGrad(const std::vector<int64_t> &shape, int64_t axis,
                        const std::vector<int64_t> &scaleShape, bool withB) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t ax = axis < 0 ? axis + rank : axis;
  std::vector<int64_t> tail(shape.begin() + ax, shape.end());
  const int64_t inner = count(tail), outer = count(shape) / inner;
  const float eps = 1e-5f;
  Buf<float> x = randomBuf(static_cast<size_t>(outer * inner), 31);
  Buf<float> dy = randomBuf(static_cast<size_t>(outer * inner), 32);
  Buf<float> scale = randomBuf(static_cast<size_t>(count(scaleShape)), 33);
  // Scale broadcast to the tail: only trailing-aligned shapes of ones and full dims are used.
  std::vector<float> g(static_cast<size_t>(inner));
  {
    std::vector<int64_t> padded(tail.size() - scaleShape.size(), 1);
    padded.insert(padded.end(), scaleShape.begin(), scaleShape.end());
    for (int64_t e = 0; e < inner; ++e) {
      int64_t rem = e, src = 0, stride = 1;
      for (size_t d = tail.size(); d-- > 0;) {
        int64_t idx = rem % tail[d];
        rem /= tail[d];
        if (padded[d] != 1)
          src += idx * stride;
        stride *= padded[d];
      }
      g[static_cast<size_t>(e)] = scale[static_cast<size_t>(src)];
    }
  }
  std::vector<float> wantDx(static_cast<size_t>(outer * inner));
  std::vector<double> ds(static_cast<size_t>(inner), 0.0), db(static_cast<size_t>(inner), 0.0);
  for (int64_t r = 0; r < outer; ++r) {
    const float *xr = x.data() + r * inner, *dyr = dy.data() + r * inner;
    double mu = 0, v = 0;
    for (int64_t e = 0; e < inner; ++e)
      mu += xr[e];
    mu /= static_cast<double>(inner);
    for (int64_t e = 0; e < inner; ++e)
      v += (xr[e] - mu) * (xr[e] - mu);
    v /= static_cast<double>(inner);
    double inv = 1.0 / std::sqrt(v + eps), mg = 0, mgx = 0;
    for (int64_t e = 0; e < inner; ++e) {
      double xhat = (xr[e] - mu) * inv, gd = dyr[e] * g[static_cast<size_t>(e)];
      mg += gd;
      mgx += gd * xhat;
      ds[static_cast<size_t>(e)] += dyr[e] * xhat;
      db[static_cast<size_t>(e)] += dyr[e];
    }
    mg /= static_cast<double>(inner);
    mgx /= static_cast<double>(inner);
    for (int64_t e = 0; e < inner; ++e) {
      double xhat = (xr[e] - mu) * inv;
      wantDx[static_cast<size_t>(r * inner + e)] =
          static_cast<float>(inv * (dyr[e] * g[static_cast<size_t>(e)] - mg - xhat * mgx));
    }
  }
  Buf<float> dx(static_cast<size_t>(outer * inner)), dsOut(static_cast<size_t>(inner)),
      dbOut(static_cast<size_t>(inner));
  std::vector<TensorDesc> outs = {f32(shape), f32(tail)};
  std::vector<void *> outPtrs = {dx.data(), dsOut.data()};
  if (withB) {
    outs.push_back(f32(tail));
    outPtrs.push_back(dbOut.data());
  }
  runKernel(dtcSpec("LayerNormGrad", {f32(shape), f32(shape), f32(scaleShape)}, outs,
                    {{"axis", ir::Attribute(axis)}, {"epsilon", ir::Attribute(eps)}}),
            {dy.data(), x.data(), scale.data()}, outPtrs);
  expectNear(dx.data(), wantDx, 2e-4);
  expectNear(dsOut.data(), std::vector<float>(ds.begin(), ds.end()), 1e-4);
  if (withB)
    expectNear(dbOut.data(), std::vector<float>(db.begin(), db.end()), 1e-4);
}

TEST(LayerNormGradKernel, MatchesReference) {
  checkLayerNormGrad({2, 3, 8}, -1, {8}, true);
  checkLayerNormGrad({2, 3, 4}, 1, {3, 4}, true);
  checkLayerNormGrad({2, 3, 4}, 1, {4}, false);   // Scale broadcast
  checkLayerNormGrad({4, 3, 5}, 1, {3, 1}, true); // Scale broadcast along the last axis
  checkLayerNormGrad({5, 33}, -1, {33}, true);
  checkLayerNormGrad({3, 2}, 0, {3, 2}, true); // a single row
}

TEST(LayerNormGradKernel, NoRowsGivesZeroParameterGradients) {
  Buf<float> ds(std::vector<float>{5.f, 5.f}), db(std::vector<float>{5.f, 5.f}), scale(2), dummy(1);
  runKernel(dtcSpec("LayerNormGrad", {f32({0, 2}), f32({0, 2}), f32({2})},
                    {f32({0, 2}), f32({2}), f32({2})}),
            {dummy.data(), dummy.data(), scale.data()}, {dummy.data(), ds.data(), db.data()});
  expectNear(ds.data(), {0.f, 0.f});
  expectNear(db.data(), {0.f, 0.f});
}

} // namespace
} // namespace dtc::ops::cpu::test
