// Synchronized batch normalization (sync=1 on ai.dtc.BatchNormTraining / BatchNormGrad): R
// "ranks" run on threads, each with its own kernels on its own shard (shards may differ in N),
// joined by a fake KernelCollectives; their outputs must equal the sync=0 kernels' on the
// concatenated batch (torch.nn.SyncBatchNorm semantics). Also: no group (or a group of one) gives
// sync=0's outputs bit for bit and both match a double reference, errors of the all-reduce name
// the node, the gradient rule carries `sync`, and a rough timing.
#include "tests/unit/cpu/KernelTestUtil.h"

#include "ops/OpDef.h"
#include "passes/Autodiff.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

namespace dtc::ops::cpu::test {
namespace {

/// R ranks on R threads: allReduceSum waits until every rank has called it (a barrier), sums
/// their buffers and hands every rank the sum. A rank that does not arrive within 30 s makes
/// the others fail instead of hanging the test.
class ThreadGroup : public KernelCollectives {
public:
  explicit ThreadGroup(int ranks) : ranks_(ranks) {}

  Status allReduceSum(double *data, size_t count, const std::string &what) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (arrived_ == 0) {
      acc_.assign(count, 0.0);
      what_ = what;
    } else if (count != acc_.size()) {
      return Status::error(what, "all-reduce of " + std::to_string(count) +
                                     " values, other ranks sent " + std::to_string(acc_.size()));
    }
    for (size_t i = 0; i < count; ++i)
      acc_[i] += data[i];
    ++calls_;
    const uint64_t gen = generation_;
    if (++arrived_ == ranks_) {
      result_ = acc_;
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else if (!cv_.wait_for(lock, std::chrono::seconds(30), [&] { return generation_ != gen; })) {
      return Status::error(what, "fake group: a peer did not arrive");
    }
    std::copy(result_.begin(), result_.end(), data);
    return Status::ok();
  }
  int groupSize() const override { return ranks_; }
  int calls() const { return calls_; }

private:
  int ranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<double> acc_, result_;
  std::string what_;
  int arrived_ = 0, calls_ = 0;
  uint64_t generation_ = 0;
};

/// A group of one rank that claims `size` ranks: the all-reduce leaves the data as it is, so the
/// sync path runs and must reproduce the rank's own statistics (timing of the sync path).
class SelfGroup : public KernelCollectives {
public:
  explicit SelfGroup(int size, std::string error = "") : size_(size), error_(std::move(error)) {}
  Status allReduceSum(double *, size_t, const std::string &what) override {
    ++calls;
    return error_.empty() ? Status::ok() : Status::error("rank 1", error_ + " (" + what + ")");
  }
  int groupSize() const override { return size_; }
  int calls = 0;

private:
  int size_;
  std::string error_;
};

KernelSpec dtcSpec(std::string op, std::vector<TensorDesc> ins, std::vector<TensorDesc> outs,
                   std::map<std::string, ir::Attribute> attrs) {
  KernelSpec s = makeSpec(std::move(op), std::move(ins), std::move(outs), std::move(attrs));
  s.domain = "ai.dtc";
  return s;
}

std::vector<int64_t> withBatch(std::vector<int64_t> shape, int64_t n) {
  shape[0] = n;
  return shape;
}

/// The forward's operands and outputs on one batch.
struct Forward {
  Buf<float> y, runMean, runVar, savedMean, savedVar;
};
/// The backward's outputs on one batch.
struct Backward {
  Buf<float> dx, dScale, dB;
};

/// The parameters shared by every rank.
struct Params {
  Buf<float> scale, bias, inMean, inVar;
  explicit Params(int64_t c)
      : scale(randomBuf(static_cast<size_t>(c), 11)), bias(randomBuf(static_cast<size_t>(c), 12)),
        inMean(randomBuf(static_cast<size_t>(c), 13)), inVar(static_cast<size_t>(c)) {
    for (int64_t i = 0; i < c; ++i) {
      scale[static_cast<size_t>(i)] += 1.5f; // in [0.5, 2.5)
      inVar[static_cast<size_t>(i)] = 0.5f + 0.1f * static_cast<float>(i % 7);
    }
  }
};

/// Runs BatchNormTraining then BatchNormGrad (sync as given) on X / dY of shape `x` with
/// context `ctx`; the first error (or ok).
Status runRank(const std::vector<int64_t> &x, int64_t sync, CpuContext &ctx, const Params &p,
               const float *xData, const float *dyData, Forward &f, Backward &b) {
  const int64_t c = x[1];
  const size_t n = static_cast<size_t>(count(x));
  f = {Buf<float>(n), Buf<float>(c), Buf<float>(c), Buf<float>(c), Buf<float>(c)};
  b = {Buf<float>(n), Buf<float>(c), Buf<float>(c)};
  const std::map<std::string, ir::Attribute> attrs = {{"epsilon", ir::Attribute(1e-5f)},
                                                      {"momentum", ir::Attribute(0.9f)},
                                                      {"sync", ir::Attribute(sync)}};
  KernelSpec fs = dtcSpec("BatchNormTraining", {f32(x), f32({c}), f32({c}), f32({c}), f32({c})},
                          {f32(x), f32({c}), f32({c}), f32({c}), f32({c})}, attrs);
  auto fk = createKernel(fs, ctx);
  if (!fk)
    return fk.status();
  std::vector<const void *> fin = {xData, p.scale.data(), p.bias.data(), p.inMean.data(),
                                   p.inVar.data()};
  std::vector<void *> fout = {f.y.data(), f.runMean.data(), f.runVar.data(), f.savedMean.data(),
                              f.savedVar.data()};
  DTC_RETURN_IF_ERROR((*fk)->run({fin.data(), fin.size(), fout.data(), fout.size()}));
  KernelSpec bs = dtcSpec("BatchNormGrad", {f32(x), f32(x), f32({c}), f32({c}), f32({c})},
                          {f32(x), f32({c}), f32({c})},
                          {{"epsilon", ir::Attribute(1e-5f)}, {"sync", ir::Attribute(sync)}});
  auto bk = createKernel(bs, ctx);
  if (!bk)
    return bk.status();
  std::vector<const void *> bin = {dyData, xData, p.scale.data(), f.savedMean.data(),
                                   f.savedVar.data()};
  std::vector<void *> bout = {b.dx.data(), b.dScale.data(), b.dB.data()};
  return (*bk)->run({bin.data(), bin.size(), bout.data(), bout.size()});
}

/// Runs the sync=1 kernels of every rank on its own thread: rank r holds rows
/// [sum(batches[0..r)), +batches[r]) of the global X / dY (shape x with x[0] = sum(batches)).
/// Fails the test on an error; the all-reduce must run once per kernel run.
void runGroup(const std::vector<int64_t> &x, const std::vector<int64_t> &batches, const Params &p,
              const Buf<float> &xs, const Buf<float> &dy, std::vector<Forward> &f,
              std::vector<Backward> &b, std::vector<size_t> &offset) {
  const int ranks = static_cast<int>(batches.size());
  const int64_t perRow = count(x) / x[0];
  ThreadGroup group(ranks);
  f = std::vector<Forward>(static_cast<size_t>(ranks));
  b = std::vector<Backward>(static_cast<size_t>(ranks));
  offset.assign(static_cast<size_t>(ranks), 0);
  std::vector<Status> status(static_cast<size_t>(ranks));
  for (int r = 1; r < ranks; ++r)
    offset[static_cast<size_t>(r)] =
        offset[static_cast<size_t>(r - 1)] + static_cast<size_t>(batches[r - 1] * perRow);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      const size_t i = static_cast<size_t>(r);
      CpuContext ctx;
      ctx.collectives = &group;
      status[i] = runRank(withBatch(x, batches[i]), 1, ctx, p, xs.data() + offset[i],
                          dy.data() + offset[i], f[i], b[i]);
    });
  for (std::thread &t : threads)
    t.join();
  for (int r = 0; r < ranks; ++r)
    ASSERT_TRUE(status[static_cast<size_t>(r)].isOk())
        << "rank " << r << ": " << status[static_cast<size_t>(r)].message();
  EXPECT_EQ(group.calls(), 2 * ranks); // one all-reduce per kernel run
}

std::vector<float> slice(const Buf<float> &b, size_t from, size_t n) {
  return std::vector<float>(b.data() + from, b.data() + from + n);
}

/// Shards of sizes `batches` (summing to the global N) of a global X of shape x (x[0] is
/// ignored): every rank's Y, saved and running statistics and dX must match the sync=0 kernels
/// on the whole batch, and the ranks' dScale / dB must sum to the whole batch's. X has a mean
/// offset per channel (|mean| up to ~5 std) so that a variance formula that cancels shows.
void checkShards(std::vector<int64_t> x, const std::vector<int64_t> &batches, uint32_t seed) {
  int64_t total = 0;
  for (int64_t n : batches)
    total += n;
  x[0] = total;
  const int64_t c = x[1];
  const int64_t perRow = count(x) / total; // elements of one sample
  const size_t all = static_cast<size_t>(count(x));
  Buf<float> xs = randomBuf(all, seed), dy = randomBuf(all, seed + 100);
  for (size_t i = 0; i < all; ++i)
    xs[i] += 3.f * static_cast<float>((i / static_cast<size_t>(perRow / c)) % c % 3) - 3.f;
  Params p(c);

  Forward fRef;
  Backward bRef;
  {
    CpuContext ctx;
    Status st = runRank(x, 0, ctx, p, xs.data(), dy.data(), fRef, bRef);
    ASSERT_TRUE(st.isOk()) << st.message();
  }

  const int ranks = static_cast<int>(batches.size());
  std::vector<Forward> f;
  std::vector<Backward> b;
  std::vector<size_t> offset;
  runGroup(x, batches, p, xs, dy, f, b, offset);
  if (::testing::Test::HasFatalFailure())
    return;
  std::vector<double> dScale(static_cast<size_t>(c), 0.0), dB(static_cast<size_t>(c), 0.0);
  for (int r = 0; r < ranks; ++r) {
    const size_t i = static_cast<size_t>(r);
    SCOPED_TRACE("rank " + std::to_string(r) + " of " + std::to_string(ranks));
    const size_t n = static_cast<size_t>(batches[i] * perRow);
    expectNear(f[i].y.data(), slice(fRef.y, offset[i], n));
    expectNear(f[i].savedMean.data(), fRef.savedMean.vec());
    expectNear(f[i].savedVar.data(), fRef.savedVar.vec());
    expectNear(f[i].runMean.data(), fRef.runMean.vec());
    expectNear(f[i].runVar.data(), fRef.runVar.vec());
    expectNear(b[i].dx.data(), slice(bRef.dx, offset[i], n));
    for (size_t k = 0; k < static_cast<size_t>(c); ++k) {
      dScale[k] += b[i].dScale[k];
      dB[k] += b[i].dB[k];
    }
  }
  for (size_t k = 0; k < static_cast<size_t>(c); ++k) {
    EXPECT_NEAR(dScale[k], bRef.dScale[k], 1e-5 * std::max(1.0, std::fabs(double{bRef.dScale[k]})));
    EXPECT_NEAR(dB[k], bRef.dB[k], 1e-5 * std::max(1.0, std::fabs(double{bRef.dB[k]})));
  }
}

TEST(SyncBatchNorm, TwoRanksFourD) {
  checkShards({0, 3, 4, 5}, {2, 2}, 1);
  checkShards({0, 3, 4, 5}, {3, 5}, 2); // unequal shards
}

TEST(SyncBatchNorm, ThreeRanksUnequalShards) {
  checkShards({0, 4, 3, 3}, {3, 5, 1}, 3);
  checkShards({0, 2, 7, 9}, {1, 2, 4}, 4); // odd spatial size (not a multiple of 8)
}

TEST(SyncBatchNorm, RankTwoInputs) {
  checkShards({0, 5}, {3, 5}, 5);
  checkShards({0, 6}, {4, 1, 2}, 6);
  checkShards({0, 1}, {3, 5}, 7); // C = 1, spatial 1
}

TEST(SyncBatchNorm, RankThreeAndFiveInputs) {
  checkShards({0, 3, 17}, {2, 3}, 8);
  checkShards({0, 2, 2, 3, 4}, {3, 5}, 9);
  checkShards({0, 3, 2, 2, 2}, {1, 1, 2}, 10);
}

TEST(SyncBatchNorm, OneChannelAndSpatialOne) {
  checkShards({0, 1, 1, 1}, {3, 5}, 11);
  checkShards({0, 1, 16, 16}, {2, 1, 3}, 12);
  checkShards({0, 4, 1}, {1, 2}, 13); // one sample on rank 0
}

// A larger case: enough elements (>= 32768) for the parallel loops.
TEST(SyncBatchNorm, LargerBatch) { checkShards({0, 16, 12, 12}, {5, 11}, 14); }

// Statistics of data far from zero (|mean| ~ 1e5 std): the group's mean and variance must
// match a double-precision reference on the same f32 values (a variance from f32 sums of
// squares would be noise; the double merge is accurate to ~1e-16 * mean^2 / var).
TEST(SyncBatchNorm, LargeMeanOffsetMatchesDoubleReference) {
  const std::vector<int64_t> x = {8, 2, 9};
  const std::vector<int64_t> batches = {3, 5};
  const size_t all = static_cast<size_t>(count(x));
  Buf<float> xs = randomBuf(all, 71), dy = randomBuf(all, 72);
  for (size_t i = 0; i < all; ++i)
    xs[i] = 1000.f + 0.01f * xs[i] + ((i / 9) % 2 ? -2000.f : 0.f); // channel 1 near -1000
  Params p(2);
  std::vector<Forward> f;
  std::vector<Backward> b;
  std::vector<size_t> offset;
  runGroup(x, batches, p, xs, dy, f, b, offset);
  if (::testing::Test::HasFatalFailure())
    return;
  for (int64_t c = 0; c < 2; ++c) {
    double sum = 0, sq = 0;
    const double m = 8 * 9;
    for (int64_t n = 0; n < 8; ++n)
      for (int64_t i = 0; i < 9; ++i)
        sum += xs[static_cast<size_t>((n * 2 + c) * 9 + i)];
    const double mean = sum / m;
    for (int64_t n = 0; n < 8; ++n)
      for (int64_t i = 0; i < 9; ++i) {
        const double d = xs[static_cast<size_t>((n * 2 + c) * 9 + i)] - mean;
        sq += d * d;
      }
    const double var = sq / m;
    for (size_t r = 0; r < 2; ++r) {
      EXPECT_NEAR(f[r].savedMean[static_cast<size_t>(c)], mean, 1e-7 * std::fabs(mean));
      EXPECT_NEAR(f[r].savedVar[static_cast<size_t>(c)], var, 1e-5 * var) << "rank " << r;
      const double runVar = p.inVar[static_cast<size_t>(c)] * 0.9 + var * m / (m - 1) * 0.1;
      EXPECT_NEAR(f[r].runVar[static_cast<size_t>(c)], runVar, 1e-6 * runVar);
    }
  }
}

/// Double-precision BatchNormTraining (epsilon 1e-5, momentum 0.9) then BatchNormGrad (from the
/// f32 saved statistics, as the kernel gets them) on X / dY of shape x: two-pass statistics,
/// biased saved_var, unbiased running_var (none for one element per channel).
void referenceBatchNorm(const std::vector<int64_t> &x, const Params &p, const Buf<float> &xs,
                        const Buf<float> &dy, std::vector<float> &y, std::vector<float> &runMean,
                        std::vector<float> &runVar, std::vector<float> &mean,
                        std::vector<float> &var, std::vector<float> &dx, std::vector<float> &dScale,
                        std::vector<float> &dB) {
  const int64_t c = x[1], inner = count(x) / (x[0] * c);
  const double m = static_cast<double>(x[0] * inner), eps = 1e-5f;
  const size_t all = static_cast<size_t>(count(x)), nc = static_cast<size_t>(c);
  y.assign(all, 0.f);
  dx.assign(all, 0.f);
  runMean.assign(nc, 0.f);
  runVar.assign(nc, 0.f);
  mean.assign(nc, 0.f);
  var.assign(nc, 0.f);
  dScale.assign(nc, 0.f);
  dB.assign(nc, 0.f);
  for (int64_t ch = 0; ch < c; ++ch) {
    const size_t k = static_cast<size_t>(ch);
    std::vector<size_t> idx;
    for (int64_t n = 0; n < x[0]; ++n)
      for (int64_t i = 0; i < inner; ++i)
        idx.push_back(static_cast<size_t>((n * c + ch) * inner + i));
    double sum = 0, sq = 0;
    for (size_t e : idx)
      sum += xs[e];
    const double mu = sum / m;
    for (size_t e : idx)
      sq += (xs[e] - mu) * (xs[e] - mu);
    const double v = sq / m;
    mean[k] = static_cast<float>(mu);
    var[k] = static_cast<float>(v);
    runMean[k] = static_cast<float>(p.inMean[k] * 0.9 + mu * 0.1);
    runVar[k] = static_cast<float>(p.inVar[k] * 0.9 + (m > 1 ? v * m / (m - 1) : v) * 0.1);
    const double inv = 1.0 / std::sqrt(static_cast<double>(var[k]) + eps);
    for (size_t e : idx)
      y[e] = static_cast<float>((xs[e] - mu) * p.scale[k] * inv + p.bias[k]);
    double sdy = 0, sdyx = 0;
    for (size_t e : idx) {
      sdy += dy[e];
      sdyx += dy[e] * (xs[e] - static_cast<double>(mean[k]));
    }
    dScale[k] = static_cast<float>(sdyx * inv);
    dB[k] = static_cast<float>(sdy);
    for (size_t e : idx)
      dx[e] = static_cast<float>(p.scale[k] * inv *
                                 (dy[e] - sdy / m - (xs[e] - mean[k]) * inv * inv * sdyx / m));
  }
}

/// Runs sync=0 and sync=1 with `coll` as the context's collectives on X of shape x (channel
/// means offset by up to 3): the outputs must be bit-identical (the same loops, the all-reduce
/// skipped), and within 1e-5 of the double-precision reference.
void expectSameAsUnsynced(KernelCollectives *coll, const std::vector<int64_t> &x, uint32_t seed) {
  std::string name = "X";
  for (int64_t d : x)
    name += " " + std::to_string(d);
  SCOPED_TRACE(name);
  const size_t all = static_cast<size_t>(count(x));
  const int64_t c = x[1], inner = count(x) / (x[0] * c);
  Buf<float> xs = randomBuf(all, seed), dy = randomBuf(all, seed + 1);
  for (size_t i = 0; i < all; ++i)
    xs[i] +=
        1.5f * static_cast<float>((i / static_cast<size_t>(inner)) % static_cast<size_t>(c) % 3) -
        1.5f;
  Params p(c);
  Forward f0, f1;
  Backward b0, b1;
  CpuContext ctx0, ctx1;
  ctx1.collectives = coll;
  ASSERT_TRUE(runRank(x, 0, ctx0, p, xs.data(), dy.data(), f0, b0).isOk());
  ASSERT_TRUE(runRank(x, 1, ctx1, p, xs.data(), dy.data(), f1, b1).isOk());
  EXPECT_EQ(f0.y.vec(), f1.y.vec());
  EXPECT_EQ(f0.runMean.vec(), f1.runMean.vec());
  EXPECT_EQ(f0.runVar.vec(), f1.runVar.vec());
  EXPECT_EQ(f0.savedMean.vec(), f1.savedMean.vec());
  EXPECT_EQ(f0.savedVar.vec(), f1.savedVar.vec());
  EXPECT_EQ(b0.dx.vec(), b1.dx.vec());
  EXPECT_EQ(b0.dScale.vec(), b1.dScale.vec());
  EXPECT_EQ(b0.dB.vec(), b1.dB.vec());
  std::vector<float> y, runMean, runVar, mean, var, dx, dScale, dB;
  referenceBatchNorm(x, p, xs, dy, y, runMean, runVar, mean, var, dx, dScale, dB);
  expectNear(f0.y.data(), y);
  expectNear(f0.runMean.data(), runMean);
  expectNear(f0.runVar.data(), runVar);
  expectNear(f0.savedMean.data(), mean);
  expectNear(f0.savedVar.data(), var);
  expectNear(b0.dx.data(), dx);
  expectNear(b0.dScale.data(), dScale);
  expectNear(b0.dB.data(), dB);
}

/// Ranks 2 to 5, odd spatial sizes, one element per channel, and a shape large enough for the
/// parallel loops (34816 elements).
void expectSameAsUnsyncedShapes(KernelCollectives *coll) {
  expectSameAsUnsynced(coll, {4, 3, 5, 6}, 21);
  expectSameAsUnsynced(coll, {7, 5}, 23);
  expectSameAsUnsynced(coll, {1, 4}, 25); // one element per channel: zero variance
  expectSameAsUnsynced(coll, {3, 2, 19}, 27);
  expectSameAsUnsynced(coll, {2, 3, 2, 3, 5}, 29);
  expectSameAsUnsynced(coll, {8, 16, 16, 17}, 31);
}

TEST(SyncBatchNorm, WithoutGroupEqualsUnsyncedExactly) { expectSameAsUnsyncedShapes(nullptr); }

TEST(SyncBatchNorm, GroupOfOneEqualsUnsyncedExactly) {
  SelfGroup one(1);
  expectSameAsUnsyncedShapes(&one);
  EXPECT_EQ(one.calls, 0);
}

// The optional outputs absent: the forward keeps the statistics in scratch memories, the
// backward writes dX only.
TEST(SyncBatchNorm, OptionalOutputsAbsent) {
  const std::vector<int64_t> x = {3, 2, 4};
  Buf<float> xs = randomBuf(24, 31), dy = randomBuf(24, 32);
  Params p(2);
  Forward ref;
  Backward bref;
  CpuContext ctx0;
  ASSERT_TRUE(runRank(x, 0, ctx0, p, xs.data(), dy.data(), ref, bref).isOk());
  SelfGroup self(2);
  CpuContext ctx;
  ctx.collectives = &self;
  const std::map<std::string, ir::Attribute> attrs = {{"sync", ir::Attribute(int64_t{1})}};
  Buf<float> y(24), dx(24);
  auto fk = createKernel(dtcSpec("BatchNormTraining",
                                 {f32(x), f32({2}), f32({2}), f32({2}), f32({2})}, {f32(x)}, attrs),
                         ctx);
  ASSERT_TRUE(fk) << fk.status().message();
  std::vector<const void *> fin = {xs.data(), p.scale.data(), p.bias.data(), p.inMean.data(),
                                   p.inVar.data()};
  std::vector<void *> fout = {y.data()};
  ASSERT_TRUE((*fk)->run({fin.data(), fin.size(), fout.data(), fout.size()}).isOk());
  expectNear(y.data(), ref.y.vec());
  auto bk = createKernel(
      dtcSpec("BatchNormGrad", {f32(x), f32(x), f32({2}), f32({2}), f32({2})}, {f32(x)}, attrs),
      ctx);
  ASSERT_TRUE(bk) << bk.status().message();
  std::vector<const void *> bin = {dy.data(), xs.data(), p.scale.data(), ref.savedMean.data(),
                                   ref.savedVar.data()};
  std::vector<void *> bout = {dx.data()};
  ASSERT_TRUE((*bk)->run({bin.data(), bin.size(), bout.data(), bout.size()}).isOk());
  expectNear(dx.data(), bref.dx.vec());
  EXPECT_EQ(self.calls, 2);
}

// dX may overwrite dY (BatchNormGrad's in-place input 0).
TEST(SyncBatchNorm, BackwardInPlace) {
  const std::vector<int64_t> x = {2, 3, 5};
  Buf<float> xs = randomBuf(30, 41), dy = randomBuf(30, 42);
  Params p(3);
  Forward f;
  Backward b;
  SelfGroup self(2);
  CpuContext ctx;
  ctx.collectives = &self;
  ASSERT_TRUE(runRank(x, 1, ctx, p, xs.data(), dy.data(), f, b).isOk());
  auto bk = createKernel(dtcSpec("BatchNormGrad", {f32(x), f32(x), f32({3}), f32({3}), f32({3})},
                                 {f32(x)}, {{"sync", ir::Attribute(int64_t{1})}}),
                         ctx);
  ASSERT_TRUE(bk);
  std::vector<const void *> bin = {dy.data(), xs.data(), p.scale.data(), f.savedMean.data(),
                                   f.savedVar.data()};
  std::vector<void *> bout = {dy.data()};
  ASSERT_TRUE((*bk)->run({bin.data(), bin.size(), bout.data(), bout.size()}).isOk());
  expectNear(dy.data(), b.dx.vec(), 0);
}

TEST(SyncBatchNorm, AllReduceErrorsNameTheNode) {
  SelfGroup broken(2, "peer 1 lost");
  CpuContext ctx;
  ctx.collectives = &broken;
  const std::vector<int64_t> x = {2, 2, 3};
  Buf<float> xs = randomBuf(12, 51), dy = randomBuf(12, 52);
  Params p(2);
  Forward f;
  Backward b;
  Status st = runRank(x, 1, ctx, p, xs.data(), dy.data(), f, b);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("node 'n0' (ai.dtc.BatchNormTraining)"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("peer 1 lost"), std::string::npos) << st.message();

  auto bk = createKernel(dtcSpec("BatchNormGrad", {f32(x), f32(x), f32({2}), f32({2}), f32({2})},
                                 {f32(x)}, {{"sync", ir::Attribute(int64_t{1})}}),
                         ctx);
  ASSERT_TRUE(bk);
  Buf<float> ones(2), dx(12);
  for (size_t i = 0; i < 2; ++i)
    ones[i] = 1.f;
  std::vector<const void *> bin = {dy.data(), xs.data(), ones.data(), ones.data(), ones.data()};
  std::vector<void *> bout = {dx.data()};
  st = (*bk)->run({bin.data(), bin.size(), bout.data(), bout.size()});
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("node 'n0' (ai.dtc.BatchNormGrad)"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("peer 1 lost"), std::string::npos) << st.message();
}

TEST(SyncBatchNorm, SyncMustBeZeroOrOne) {
  const std::vector<int64_t> x = {2, 2};
  CpuContext ctx;
  auto k =
      createKernel(dtcSpec("BatchNormTraining", {f32(x), f32({2}), f32({2}), f32({2}), f32({2})},
                           {f32(x)}, {{"sync", ir::Attribute(int64_t{2})}}),
                   ctx);
  ASSERT_FALSE(k);
  EXPECT_NE(k.status().message().find("sync must be 0 or 1"), std::string::npos);
}

/// A one-node BatchNormTraining graph (sync as given) differentiated for X: the BatchNormGrad
/// the rule emits.
ir::Node *emittedGrad(ir::Graph &g, int64_t sync, bool setSync) {
  Diagnostics diags;
  auto f32v = [&](const std::string &name, std::vector<int64_t> s) {
    ir::Value *v = g.createValue(name, {ir::DType::kFloat32, ir::Shape::ofStatic(s)});
    g.addInput(v);
    return v;
  };
  ir::Value *x = f32v("x", {4, 3, 2});
  std::vector<ir::Value *> ins = {x, f32v("scale", {3}), f32v("b", {3}), f32v("mean", {3}),
                                  f32v("var", {3})};
  ir::Node *bn =
      g.addNode("BatchNormTraining", ins, {"y", "rm", "rv", "sm", "sv"}, "ai.dtc", "bn1");
  bn->setAttr("epsilon", ir::Attribute(1e-5f));
  bn->setAttr("momentum", ir::Attribute(0.9f));
  if (setSync)
    bn->setAttr("sync", ir::Attribute(sync));
  EXPECT_TRUE(ops::inferNode(*bn, diags).isOk());
  ir::Node *s = g.addNode("ReduceSum", {bn->output(0)}, {"l"});
  s->setAttr("keepdims", ir::Attribute(int64_t{0}));
  EXPECT_TRUE(ops::inferNode(*s, diags).isOk());
  auto grads = passes::buildGradients(g, s->output(0), {x}, diags);
  EXPECT_TRUE(grads) << grads.status().message();
  for (ir::Node *n : g.nodes())
    if (n->opType() == "BatchNormGrad")
      return n;
  return nullptr;
}

TEST(SyncBatchNorm, GradientRuleCopiesSync) {
  ir::Graph g1, g0, gd;
  ir::Node *n1 = emittedGrad(g1, 1, true);
  ASSERT_NE(n1, nullptr);
  EXPECT_EQ(n1->attrInt("sync", -1), 1);
  ir::Node *n0 = emittedGrad(g0, 0, true);
  ASSERT_NE(n0, nullptr);
  EXPECT_EQ(n0->attrInt("sync", -1), 0);
  ir::Node *nd = emittedGrad(gd, 0, false); // attribute absent: default 0
  ASSERT_NE(nd, nullptr);
  EXPECT_EQ(nd->attrInt("sync", -1), 0);
}

TEST(SyncBatchNorm, InferRejectsBadSync) {
  ir::Graph g;
  Diagnostics diags;
  std::vector<ir::Value *> ins;
  for (auto [name, s] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"x", {2, 3}}, {"scale", {3}}, {"b", {3}}, {"mean", {3}}, {"var", {3}}}) {
    ins.push_back(g.createValue(name, {ir::DType::kFloat32, ir::Shape::ofStatic(s)}));
    g.addInput(ins.back());
  }
  ir::Node *bn = g.addNode("BatchNormTraining", ins, {"y"}, "ai.dtc", "bn1");
  bn->setAttr("sync", ir::Attribute(int64_t{3}));
  Status st = ops::inferNode(*bn, diags);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("sync must be 0 or 1"), std::string::npos) << st.message();
}

} // namespace
} // namespace dtc::ops::cpu::test
