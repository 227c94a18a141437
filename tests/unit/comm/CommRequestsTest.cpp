// Tests of the communicator's requests (runtime/comm), part of dtc_comm_tests (CommTest.cpp
// has its main; every rank runs every test in the same order): every kind through submit/wait,
// mesh groups used concurrently, send/recv with many tags, bad requests, the launcher's command
// line, point-to-point exchanges across their limit, and persistent requests.
#include "runtime/comm/Communicator.h"
#include "runtime/comm/Launcher.h"
#include "tests/unit/comm/CommTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <span>
#include <thread>

using namespace dtc;
using namespace dtc::rt;
using namespace dtc::rt::commtest;

namespace {

// --- OperandList: CommRequest's operands -----------------------------------------------------

TEST(OperandList, InPlaceUpToFourThenOnTheHeapAndMoves) {
  float x[6] = {};
  OperandList<void *> a = {&x[0], &x[1]};
  EXPECT_EQ(a.size(), 2u);
  EXPECT_FALSE(a.onHeap());
  EXPECT_EQ(a[1], &x[1]);
  for (int i = 2; i < 6; ++i)
    a.push_back(&x[i]);
  EXPECT_EQ(a.size(), 6u);
  EXPECT_TRUE(a.onHeap()); // the fifth went to the heap, with the four before it
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i], &x[i]) << i;
  EXPECT_EQ(a.back(), &x[5]);

  OperandList<void *> b = std::move(a); // the heap block moves, values unchanged
  EXPECT_TRUE(a.empty());
  EXPECT_FALSE(a.onHeap());
  ASSERT_EQ(b.size(), 6u);
  EXPECT_EQ(b.front(), &x[0]);
  OperandList<void *> c = b; // a copy
  c[0] = &x[3];
  EXPECT_EQ(b[0], &x[0]);
  EXPECT_EQ(c[0], &x[3]);

  // From std::vector and braced lists, small and large; iteration.
  OperandList<size_t> sizes = std::vector<size_t>{1, 2, 3};
  EXPECT_FALSE(sizes.onHeap());
  size_t sum = 0;
  for (size_t v : sizes)
    sum += v;
  EXPECT_EQ(sum, 6u);
  sizes = std::vector<size_t>{1, 2, 3, 4, 5, 6, 7};
  EXPECT_TRUE(sizes.onHeap());
  EXPECT_EQ(sizes[6], 7u);
  sizes = {9};
  EXPECT_FALSE(sizes.onHeap());
  ASSERT_EQ(sizes.size(), 1u);
  EXPECT_EQ(sizes[0], 9u);
  sizes = {};
  EXPECT_TRUE(sizes.empty());

  // An in-place list moved over a heap one replaces it.
  OperandList<size_t> big = std::vector<size_t>(10, 4), small = {5, 6};
  big = std::move(small);
  EXPECT_FALSE(big.onHeap());
  ASSERT_EQ(big.size(), 2u);
  EXPECT_EQ(big[0] + big[1], 11u);
  big.clear();
  EXPECT_TRUE(big.empty());
}

// A request of kBackgroundBytes or more, started by the submitting thread, is progressed to its
// end by the communication thread while nobody waits (the executor computes meanwhile).
TEST(CommRequests, LargeRequestCompletesWithoutAWait) {
  if (sizeOf() == 1)
    GTEST_SKIP() << "one rank: completes at once";
  std::vector<float> v(kBackgroundBytes / sizeof(float) * 2, 1.0f);
  CommRequest a = request(CommKind::kAllReduce, "background");
  a.inputs = {v.data()};
  a.outputs = {v.data()};
  a.bytes = {v.size() * sizeof(float)};
  const uint64_t before = gComm->stats().threadCompletions;
  const uint64_t h = gComm->submit(a);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (gComm->stats().threadCompletions == before && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_GT(gComm->stats().threadCompletions, before) << "not completed without a wait()";
  ASSERT_TRUE(gComm->wait(h).isOk());
  EXPECT_EQ(v[0], static_cast<float>(sizeOf()));
  EXPECT_EQ(v.back(), static_cast<float>(sizeOf()));
}

// --- CommRequest: every kind through submit/wait -------------------------------------------

TEST(CommRequests, AllGatherAsyncAndInPlace) {
  const int n = sizeOf(), r = rankOf();
  std::vector<int64_t> mine = {r, -r, 100 + r};
  std::vector<int64_t> all(3 * n, -1);
  CommRequest q = request(CommKind::kAllGather, "gather");
  q.inputs = {mine.data()};
  q.outputs = {all.data()};
  q.bytes = {3 * sizeof(int64_t)};
  uint64_t h = gComm->submit(q);
  // In place: this rank's block already sits at its offset.
  std::vector<float> inPlace(2 * n, -1.0f);
  inPlace[2 * r] = 0.5f * r;
  inPlace[2 * r + 1] = -2.0f * r;
  CommRequest p = request(CommKind::kAllGather, "gather in place");
  p.inputs = {inPlace.data() + 2 * r};
  p.outputs = {inPlace.data()};
  p.bytes = {2 * sizeof(float)};
  uint64_t h2 = gComm->submit(p);
  ASSERT_TRUE(gComm->wait(h2).isOk());
  ASSERT_TRUE(gComm->wait(h).isOk());
  for (int k = 0; k < n; ++k) {
    EXPECT_EQ(all[3 * k], k);
    EXPECT_EQ(all[3 * k + 1], -k);
    EXPECT_EQ(all[3 * k + 2], 100 + k);
    EXPECT_EQ(inPlace[2 * k], 0.5f * k);
    EXPECT_EQ(inPlace[2 * k + 1], -2.0f * k);
  }
}

TEST(CommRequests, ReduceScatterSumMeanAndTypes) {
  const int n = sizeOf(), r = rankOf();
  const size_t count = 5;
  // f32 mean, f64 sum, i64 sum in flight together.
  std::vector<float> f(count * n);
  std::vector<double> d(count * n);
  std::vector<int64_t> l(count * n);
  for (size_t i = 0; i < f.size(); ++i) {
    f[i] = 2.0f * (r + 1) + static_cast<float>(i);
    d[i] = 0.25 * r + static_cast<double>(i);
    l[i] = (int64_t{1} << 50) + r + static_cast<int64_t>(i);
  }
  std::vector<float> fo(count, -1);
  std::vector<double> dOut(count, -1);
  std::vector<int64_t> lo(count, -1);
  CommRequest a = request(CommKind::kReduceScatter, "f32 mean");
  a.op = ReduceOp::kMean;
  a.inputs = {f.data()};
  a.outputs = {fo.data()};
  a.bytes = {count * 4};
  CommRequest b = request(CommKind::kReduceScatter, "f64 sum");
  b.dtype = ir::DType::kFloat64;
  b.inputs = {d.data()};
  b.outputs = {dOut.data()};
  b.bytes = {count * 8};
  CommRequest c = request(CommKind::kReduceScatter, "i64 sum");
  c.dtype = ir::DType::kInt64;
  c.inputs = {l.data()};
  c.outputs = {lo.data()};
  c.bytes = {count * 8};
  uint64_t ha = gComm->submit(a), hb = gComm->submit(b), hc = gComm->submit(c);
  ASSERT_TRUE(gComm->wait(hc).isOk());
  ASSERT_TRUE(gComm->wait(ha).isOk());
  ASSERT_TRUE(gComm->wait(hb).isOk());
  for (size_t i = 0; i < count; ++i) {
    const size_t g = static_cast<size_t>(r) * count + i;       // this rank's block
    EXPECT_EQ(fo[i], (n + 1.0f) + static_cast<float>(g)) << i; // mean of 2 (r + 1)
    EXPECT_EQ(dOut[i], 0.25 * n * (n - 1) / 2 + n * static_cast<double>(g)) << i;
    EXPECT_EQ(lo[i], n * ((int64_t{1} << 50) + static_cast<int64_t>(g)) + n * (n - 1) / 2) << i;
  }
}

TEST(CommRequests, AllReduceSumVersusMeanAndHalfTypes) {
  const int n = sizeOf(), r = rankOf();
  // The same f32 values summed and averaged, plus f16 and bf16 (small integers: exact).
  std::vector<float> sum(7), mean(7);
  for (int i = 0; i < 7; ++i)
    sum[i] = mean[i] = static_cast<float>(4 * (r + 1) + i);
  const uint16_t halfOf[] = {0x3c00 /*1*/, 0x4000 /*2*/, 0x4200 /*3*/, 0x4400 /*4*/};
  const uint16_t bf16Of[] = {0x3f80 /*1*/, 0x4000 /*2*/, 0x4040 /*3*/, 0x4080 /*4*/};
  std::vector<uint16_t> h(3, halfOf[r % 4]), bf(3, bf16Of[r % 4]), hm(2, 0x4400 /*4*/);
  CommRequest a = request(CommKind::kAllReduce, "sum");
  a.inputs = {sum.data()};
  a.outputs = {sum.data()};
  a.bytes = {28};
  CommRequest b = a;
  b.name = "mean";
  b.op = ReduceOp::kMean;
  b.inputs = {mean.data()};
  b.outputs = {mean.data()};
  CommRequest c = request(CommKind::kAllReduce, "f16");
  c.dtype = ir::DType::kFloat16;
  c.inputs = {h.data()};
  c.outputs = {h.data()};
  c.bytes = {6};
  CommRequest d = c;
  d.name = "bf16";
  d.dtype = ir::DType::kBFloat16;
  d.inputs = {bf.data()};
  d.outputs = {bf.data()};
  CommRequest e = c;
  e.name = "f16 mean";
  e.op = ReduceOp::kMean;
  e.inputs = {hm.data()};
  e.outputs = {hm.data()};
  e.bytes = {4};
  std::vector<uint64_t> hs = {gComm->submit(a), gComm->submit(b), gComm->submit(c),
                              gComm->submit(d), gComm->submit(e)};
  ASSERT_TRUE(gComm->waitAll().isOk());
  float expectHalf = 0;
  for (int q = 0; q < n; ++q)
    expectHalf += static_cast<float>(q % 4 + 1);
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(sum[i], 4.0f * n * (n + 1) / 2 + n * i) << i;
    EXPECT_EQ(mean[i], 4.0f * (n + 1) / 2 + i) << i;
  }
  for (int i = 0; i < 3; ++i) {
    uint16_t want = 0, wantBf = 0;
    // The sums are 1, 3, 6, 10 for 1..4 ranks.
    const uint16_t halves[] = {0x3c00, 0x4200, 0x4600, 0x4900};
    const uint16_t bf16s[] = {0x3f80, 0x4040, 0x40c0, 0x4120};
    want = halves[n - 1 < 4 ? n - 1 : 3];
    wantBf = bf16s[n - 1 < 4 ? n - 1 : 3];
    ASSERT_LE(n, 4) << "expected values for up to 4 ranks";
    EXPECT_EQ(h[i], want) << "f16 sum " << expectHalf;
    EXPECT_EQ(bf[i], wantBf) << "bf16 sum " << expectHalf;
  }
  EXPECT_EQ(hm[0], 0x4400); // the mean of 4s is 4
  EXPECT_EQ(hm[1], 0x4400);
}

TEST(CommRequests, BroadcastFromLastRankWithCopyIn) {
  const int n = sizeOf(), r = rankOf();
  std::vector<int32_t> src(50), dst(50, -7);
  for (int i = 0; i < 50; ++i)
    src[i] = r == n - 1 ? 3 * i + 1 : -1;
  CommRequest q = request(CommKind::kBroadcast, "parameters");
  q.peer = n - 1;
  q.inputs = {src.data()};
  q.outputs = {dst.data()};
  q.bytes = {200};
  ASSERT_TRUE(gComm->wait(gComm->submit(q)).isOk());
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(dst[i], 3 * i + 1) << i;
}

/// A 2-column mesh (rows {0, 1}, {2, 3}, ...; columns {0, 2, ...}, {1, 3, ...}) as groups 1..:
/// the rows first, then the columns. Four ranks: {0,1}, {2,3}, {0,2}, {1,3}.
std::vector<std::vector<int>> meshGroups(int n) {
  std::vector<std::vector<int>> rows, cols(n > 1 ? 2 : 1);
  for (int r = 0; r < n; r += 2)
    rows.push_back(r + 1 < n ? std::vector<int>{r, r + 1} : std::vector<int>{r});
  for (int r = 0; r < n; ++r)
    cols[static_cast<size_t>(r % 2)].push_back(r);
  rows.insert(rows.end(), cols.begin(), cols.end());
  return rows;
}

TEST(CommGroups, MeshCollectivesOnDifferentGroupsConcurrently) {
  const int n = sizeOf(), r = rankOf();
  if (n % 2 != 0 && n != 1)
    GTEST_SKIP() << "an even number of ranks";
  std::vector<std::vector<int>> groups = meshGroups(n);
  ASSERT_TRUE(gComm->createGroups(groups).isOk());
  const int rows = (n + 1) / 2;
  const int row = 1 + r / 2, col = 1 + rows + r % 2; // this rank's group ids
  ASSERT_EQ(gComm->sizeOf(0), n);
  EXPECT_EQ(gComm->sizeOf(row), n == 1 ? 1 : 2);
  EXPECT_EQ(gComm->rankIn(row), r % 2);
  EXPECT_EQ(gComm->rankIn(col), r / 2);
  EXPECT_EQ(gComm->sizeOf(static_cast<int>(groups.size()) + 1), 0);
  // Row: all-reduce (sum of world ranks) and broadcast from its last member; column: all-gather
  // of world ranks and a mean; world: an all-reduce in between. Waited in reverse.
  std::vector<double> rowSum(3, r + 1.0), colMean(2, 10.0 * r);
  std::vector<int32_t> colAll(static_cast<size_t>(gComm->sizeOf(col)), -1), mine = {r};
  std::vector<int64_t> world(2, r), rowB(4, r);
  CommRequest a = request(CommKind::kAllReduce, "row sum", row);
  a.dtype = ir::DType::kFloat64;
  a.inputs = {rowSum.data()};
  a.outputs = {rowSum.data()};
  a.bytes = {24};
  CommRequest b = request(CommKind::kAllGather, "column gather", col);
  b.inputs = {mine.data()};
  b.outputs = {colAll.data()};
  b.bytes = {4};
  CommRequest c = request(CommKind::kAllReduce, "world sum", 0);
  c.dtype = ir::DType::kInt64;
  c.inputs = {world.data()};
  c.outputs = {world.data()};
  c.bytes = {16};
  CommRequest d = request(CommKind::kAllReduce, "column mean", col);
  d.dtype = ir::DType::kFloat64;
  d.op = ReduceOp::kMean;
  d.inputs = {colMean.data()};
  d.outputs = {colMean.data()};
  d.bytes = {16};
  const std::vector<int> &rowRanks = groups[static_cast<size_t>(row - 1)];
  CommRequest e = request(CommKind::kBroadcast, "row broadcast", row);
  e.peer = rowRanks.back();
  e.inputs = {rowB.data()};
  e.outputs = {rowB.data()};
  e.bytes = {32};
  std::vector<uint64_t> hs = {gComm->submit(a), gComm->submit(b), gComm->submit(c),
                              gComm->submit(d), gComm->submit(e)};
  for (size_t k = hs.size(); k-- > 0;)
    ASSERT_TRUE(gComm->wait(hs[k]).isOk()) << k;
  double wantRow = 0;
  for (int q : rowRanks)
    wantRow += q + 1.0;
  const std::vector<int> &colRanks = groups[static_cast<size_t>(col - 1)];
  double wantMean = 0;
  for (int q : colRanks)
    wantMean += 10.0 * q / static_cast<double>(colRanks.size());
  for (double v : rowSum)
    EXPECT_EQ(v, wantRow);
  for (size_t k = 0; k < colRanks.size(); ++k)
    EXPECT_EQ(colAll[k], colRanks[k]);
  for (double v : colMean)
    EXPECT_DOUBLE_EQ(v, wantMean);
  EXPECT_EQ(world[0], n * (n - 1) / 2);
  for (int64_t v : rowB)
    EXPECT_EQ(v, rowRanks.back());
  // A rank outside a group cannot use it: the other row (when there is one).
  if (rows > 1) {
    const int other = r / 2 == 0 ? 2 : 1;
    std::vector<float> x(1);
    CommRequest bad = request(CommKind::kAllReduce, "foreign row", other);
    bad.inputs = {x.data()};
    bad.outputs = {x.data()};
    bad.bytes = {4};
    Status s = gComm->wait(gComm->submit(bad));
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("not a member of group " + std::to_string(other)), std::string::npos)
        << s.message();
  }
  EXPECT_TRUE(gComm->barrier("after mesh").isOk());
}

TEST(CommGroups, BadListsAreErrorsOnEveryRank) {
  const int n = sizeOf(), r = rankOf();
  ASSERT_TRUE(gComm->createGroups({{0}}).isOk());
  Status s = gComm->createGroups({{0}, {0, n}});
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("group 2 {0, " + std::to_string(n) + "}: rank " + std::to_string(n) +
                             " is outside the world"),
            std::string::npos)
      << s.message();
  s = gComm->createGroups({{0, 0}});
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("group 1 {0, 0} lists rank 0 twice"), std::string::npos)
      << s.message();
  s = gComm->createGroups({{}});
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("group 1 {} is empty"), std::string::npos) << s.message();
  if (n > 1) {
    // Rank 1 lists group 2 differently: every rank refuses, naming group 2.
    s = gComm->createGroups({{0}, r == 1 ? std::vector<int>{1, 0} : std::vector<int>{0, 1}});
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("group 2 differs between ranks"), std::string::npos) << s.message();
    // A different count.
    s = gComm->createGroups(r == 0 ? std::vector<std::vector<int>>{{0}}
                                   : std::vector<std::vector<int>>{{0}, {1}});
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("different numbers of groups"), std::string::npos) << s.message();
  }
  // The groups of the last good call remain; unknown ids are refused.
  EXPECT_EQ(gComm->sizeOf(1), 1);
  EXPECT_EQ(gComm->rankIn(1), r == 0 ? 0 : -1);
  std::vector<float> x(1);
  CommRequest q = request(CommKind::kAllReduce, "unknown group", 9);
  q.inputs = {x.data()};
  q.outputs = {x.data()};
  q.bytes = {4};
  s = gComm->wait(gComm->submit(q));
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("unknown group 9"), std::string::npos) << s.message();
  EXPECT_TRUE(gComm->barrier("after bad groups").isOk());
}

TEST(CommPointToPoint, ManyTagsInFlightBothSendFirst) {
  const int n = sizeOf(), r = rankOf();
  if (n == 1)
    GTEST_SKIP() << "needs two ranks";
  // A ring: send to the right, receive from the left (with 2 ranks, both ways between 0 and 1).
  // Every rank submits all its sends (tags 0..11, large ones above the eager limit) before any
  // recv, and the recvs in another tag order; two messages share tag 20 (they arrive in order).
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  const int kTags = 12;
  auto sizeOfTag = [](int tag) { return static_cast<size_t>(tag % 3 == 0 ? 70000 : 5 + tag); };
  auto value = [](int from, int tag, size_t i) {
    return static_cast<int32_t>(from * 1000000 + tag * 10000 + static_cast<int>(i % 9973));
  };
  std::vector<std::vector<int32_t>> out(kTags + 2), in(kTags + 2);
  std::vector<uint64_t> handles;
  for (int tag = 0; tag < kTags + 2; ++tag) {
    const int t = tag < kTags ? tag : 20;
    const size_t count = tag < kTags ? sizeOfTag(tag) : static_cast<size_t>(3 + tag);
    out[tag].resize(count);
    for (size_t i = 0; i < count; ++i)
      out[tag][i] = value(r, tag, i);
    CommRequest q = request(CommKind::kSend, "send " + std::to_string(tag));
    q.peer = right;
    q.tag = t;
    q.inputs = {out[tag].data()};
    q.bytes = {count * 4};
    handles.push_back(gComm->submit(q));
  }
  std::vector<uint64_t> recvs(kTags + 2);
  for (int k = kTags + 1; k >= 0; --k) {
    // Tags in reverse, except that the two tag-20 recvs keep their order.
    const int tag = k >= kTags ? (k == kTags + 1 ? kTags : kTags + 1) : k;
    const int t = tag < kTags ? tag : 20;
    const size_t count = tag < kTags ? sizeOfTag(tag) : static_cast<size_t>(3 + tag);
    in[tag].assign(count, -1);
    CommRequest q = request(CommKind::kRecv, "recv " + std::to_string(tag));
    q.peer = left;
    q.tag = t;
    q.outputs = {in[tag].data()};
    q.bytes = {count * 4};
    recvs[static_cast<size_t>(tag)] = gComm->submit(q);
  }
  for (int tag = 0; tag < kTags + 2; ++tag)
    ASSERT_TRUE(gComm->wait(recvs[static_cast<size_t>(tag)]).isOk()) << tag;
  for (uint64_t h : handles)
    ASSERT_TRUE(gComm->wait(h).isOk());
  for (int tag = 0; tag < kTags + 2; ++tag)
    for (size_t i = 0; i < in[tag].size(); ++i)
      ASSERT_EQ(in[tag][i], value(left, tag, i)) << "tag " << tag << " element " << i;
}

TEST(CommPointToPoint, SizeMismatchNamesBothSizes) {
  const int n = sizeOf(), r = rankOf();
  if (n == 1)
    GTEST_SKIP() << "needs two ranks";
  if (r > 1)
    return;
  std::vector<char> buf(400, 'x');
  if (r == 0) {
    ASSERT_TRUE(gComm->send(buf.data(), 400, 1, 9, "too long").isOk());
    ASSERT_TRUE(gComm->send(buf.data(), 8, 1, 9, "right size").isOk());
    ASSERT_TRUE(gComm->send(buf.data(), 8, 1, 10, "too short").isOk());
  } else {
    Status shorter = gComm->recv(buf.data(), 16, 0, 10, "too short");
    ASSERT_FALSE(shorter.isOk());
    EXPECT_NE(shorter.message().find("rank 0 sent 8 bytes with tag 10, this rank expects 16"),
              std::string::npos)
        << shorter.message();
    Status s = gComm->recv(buf.data(), 300, 0, 9, "too long");
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("recv 'too long'"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("rank 0 sent 400 bytes with tag 9, this rank expects 300 bytes"),
              std::string::npos)
        << s.message();
    // Consumed: the next message of that tag still matches.
    EXPECT_TRUE(gComm->recv(buf.data(), 8, 0, 9, "right size").isOk());
  }
}

TEST(CommRequests, BadRequestsAreErrors) {
  const int n = sizeOf(), r = rankOf();
  std::vector<float> x(8);
  auto fails = [&](CommRequest q, const std::string &part) {
    Status s = gComm->wait(gComm->submit(std::move(q)));
    ASSERT_FALSE(s.isOk()) << part;
    EXPECT_NE(s.message().find(part), std::string::npos) << s.message();
  };
  CommRequest q = request(CommKind::kSend, "to nowhere");
  q.peer = n;
  q.inputs = {x.data()};
  q.bytes = {4};
  fails(q, "peer rank " + std::to_string(n) + " is not another rank");
  q.peer = r;
  fails(q, "is not another rank");
  q.peer = (r + 1) % n;
  q.tag = 40000;
  fails(q, n == 1 ? "is not another rank" : "tag 40000 is outside");
  CommRequest g = request(CommKind::kAllGather, "two inputs");
  g.inputs = {x.data(), x.data()};
  g.outputs = {x.data()};
  g.bytes = {4};
  fails(g, "takes 1 input(s), 1 output(s) and 1 size; got 2, 1 and 1");
  CommRequest a = request(CommKind::kAllReduce, "odd bytes");
  a.inputs = {x.data()};
  a.outputs = {x.data()};
  a.bytes = {6};
  fails(a, "operand 0 has 6 bytes, not a multiple of 4");
  CommRequest m = request(CommKind::kReduceScatter, "integer mean");
  m.dtype = ir::DType::kInt64;
  m.op = ReduceOp::kMean;
  m.inputs = {x.data()};
  m.outputs = {x.data()};
  m.bytes = {8};
  fails(m, "mean of i64 is not supported");
  CommRequest b = request(CommKind::kBroadcast, "bad root");
  b.peer = n;
  b.outputs = {x.data()};
  b.bytes = {4};
  fails(b, "root rank " + std::to_string(n) + " is not a member of group 0");
  // Still usable.
  EXPECT_TRUE(gComm->barrier("after bad requests").isOk());
}

TEST(Launcher, CommandLine) {
  auto cmd = localLaunchCommand("/usr/bin/mpirun", "/x/dtc-run", 3,
                                {"plan.dtc", "--nproc", "3", "--data", "d.npz", "--nproc=3"});
  std::string joined;
  for (auto &s : cmd)
    joined += s + " ";
  std::string root = geteuid() == 0 ? "--allow-run-as-root " : "";
  EXPECT_EQ(joined, "/usr/bin/mpirun -n 3 --oversubscribe --bind-to none " + root +
                        "-x OMP_NUM_THREADS /x/dtc-run plan.dtc --data d.npz ");
  auto bad = launchLocal(0, {});
  ASSERT_FALSE(bad.hasValue());
  EXPECT_NE(bad.status().message().find("at least 1"), std::string::npos);
}

/// FNV-1a of `n` bytes: results compared between ranks.
int64_t bytesHash(const void *data, size_t n) {
  uint64_t h = 14695981039346656037ULL;
  const unsigned char *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < n; ++i)
    h = (h ^ p[i]) * 1099511628211ULL;
  return static_cast<int64_t>(h >> 1);
}

/// Whether `h` is the same on every rank.
bool sameOnEveryRank(int64_t h) {
  std::vector<int64_t> all(static_cast<size_t>(sizeOf()));
  EXPECT_TRUE(gComm->allGather(&h, sizeof h, all.data(), "hashes").isOk());
  return std::all_of(all.begin(), all.end(), [&](int64_t x) { return x == h; });
}

// Small collectives of power-of-two groups run as point-to-point exchanges (kExchangeBytes):
// sizes on both sides of the exchange limit, odd element counts (uneven blocks of the halving
// all-reduce, which comm_np*_exchange runs at every size; blocks of zero elements), in place
// and not; every rank must hold the same bits.
TEST(CommExchange, AllReduceOddSizesSameBitsOnEveryRank) {
  const int n = sizeOf(), r = rankOf();
  for (size_t count : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{1001}, size_t{4097},
                       size_t{8191}, size_t{8193}, size_t{16383}, size_t{16384}, size_t{16385}}) {
    for (bool inPlace : {true, false}) {
      std::vector<float> in(count), out(count, -7.0f);
      std::vector<double> expect(count, 0.0);
      for (size_t i = 0; i < count; ++i) {
        in[i] = std::sin(0.37f * static_cast<float>(i) + static_cast<float>(r)) * (1.0f + r);
        for (int q = 0; q < n; ++q)
          expect[i] += std::sin(0.37f * static_cast<float>(i) + static_cast<float>(q)) * (1.0f + q);
      }
      CommRequest a = request(CommKind::kAllReduce, "odd " + std::to_string(count));
      if (inPlace)
        out = in;
      a.inputs = {inPlace ? out.data() : in.data()};
      a.outputs = {out.data()};
      a.bytes = {count * sizeof(float)};
      ASSERT_TRUE(gComm->wait(gComm->submit(a)).isOk()) << count;
      for (size_t i = 0; i < count; ++i)
        ASSERT_NEAR(out[i], expect[i], 1e-5 * n * (1 + std::abs(expect[i])))
            << count << " elements, at " << i << (inPlace ? " in place" : "");
      EXPECT_TRUE(sameOnEveryRank(bytesHash(out.data(), count * sizeof(float)))) << count;
    }
  }
  // f64 mean of scattered operands (the staging buffer) just below the limit; one allocation,
  // so that every rank has the same layout (CommRequest: contiguity depends on it).
  std::vector<double> both(8200);
  std::span<double> y(both.data(), 5000), x(both.data() + 5100, 3000);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 1.0 / (1.0 + static_cast<double>(i) + r);
  for (size_t i = 0; i < y.size(); ++i)
    y[i] = static_cast<double>(i % 97) * (r + 1);
  CommRequest m = request(CommKind::kAllReduce, "mean");
  m.dtype = ir::DType::kFloat64;
  m.op = ReduceOp::kMean;
  m.inputs = {y.data(), x.data()};
  m.outputs = {y.data(), x.data()};
  m.bytes = {y.size() * 8, x.size() * 8};
  Status ms = gComm->run(m);
  ASSERT_TRUE(ms.isOk()) << ms.message();
  for (size_t i = 0; i < y.size(); ++i)
    ASSERT_NEAR(y[i], static_cast<double>(i % 97) * (n + 1) / 2.0, 1e-12 * (1 + y[i])) << i;
  for (size_t i = 0; i < x.size(); ++i) {
    double e = 0;
    for (int q = 0; q < n; ++q)
      e += 1.0 / (1.0 + static_cast<double>(i) + q);
    ASSERT_NEAR(x[i], e / n, 1e-15) << i;
  }
  EXPECT_TRUE(sameOnEveryRank(bytesHash(x.data(), x.size() * 8) ^ bytesHash(y.data(), 8 * 5000)));
}

TEST(CommExchange, ReduceScatterAndAllGatherAcrossTheLimit) {
  const int n = sizeOf(), r = rankOf();
  // Up to 2 MiB in all: whole messages above ExchangeScheme::gatherWholeAbove, progressed by the
  // communication thread (kBackgroundBytes) while this thread sleeps.
  for (size_t count : {size_t{1}, size_t{3}, size_t{1000}, size_t{4096} / n, size_t{16384} / n,
                       size_t{16384} / n + 1, (size_t{1} << 19) / n + 3}) {
    for (bool inPlace : {false, true}) {
      // Small integers in f32: exact sums.
      std::vector<float> in(count * n), out(count, -1.0f);
      for (size_t i = 0; i < in.size(); ++i)
        in[i] = static_cast<float>(i % 1000) + 1000.0f * r;
      CommRequest a = request(CommKind::kReduceScatter, "rs " + std::to_string(count));
      a.inputs = {in.data()};
      a.outputs = {inPlace ? in.data() : out.data()};
      a.bytes = {count * sizeof(float)};
      const uint64_t h = gComm->submit(a);
      if (count * n * sizeof(float) >= kBackgroundBytes)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      ASSERT_TRUE(gComm->wait(h).isOk()) << count;
      const float *res = inPlace ? in.data() : out.data();
      for (size_t j = 0; j < count; ++j) {
        const size_t gi = static_cast<size_t>(r) * count + j;
        ASSERT_EQ(res[j], n * static_cast<float>(gi % 1000) + 1000.0f * n * (n - 1) / 2)
            << count << " at " << j << (inPlace ? " in place" : "");
      }
      std::vector<int32_t> mine(count), all(count * n, -1);
      for (size_t j = 0; j < count; ++j)
        mine[j] = static_cast<int32_t>(j) * 7 + r;
      if (inPlace)
        std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(r * count));
      CommRequest g = request(CommKind::kAllGather, "ag " + std::to_string(count));
      g.inputs = {inPlace ? all.data() + r * count : mine.data()};
      g.outputs = {all.data()};
      g.bytes = {count * sizeof(int32_t)};
      ASSERT_TRUE(gComm->run(g).isOk()) << count;
      for (int q = 0; q < n; ++q)
        for (size_t j = 0; j < count; ++j)
          ASSERT_EQ(all[static_cast<size_t>(q) * count + j], static_cast<int32_t>(j) * 7 + q)
              << count << " block " << q << " at " << j;
    }
  }
}

// Persistent requests (CommRequest::persistent, above the exchange limit and, for all-reduces,
// at least DTC_COMM_PERSISTENT_MIN bytes: comm.cmake sets 0 for this test): the first of a key
// initializes it, later ones start it; a group holds at most kPersistentCacheSize, the least
// recently started evicted; two of the same key in flight run one after the other; every rank
// makes the same hits, misses and evictions.
TEST(CommPersistent, HitsMissesAndEvictionsAlikeOnEveryRank) {
  const int n = sizeOf();
  if (n == 1)
    GTEST_SKIP() << "one rank: nothing to keep";
  if (std::getenv("DTC_COMM_EXCHANGE"))
    GTEST_SKIP() << "DTC_COMM_EXCHANGE moves the exchange limit";
  const char *minBytes = std::getenv("DTC_COMM_PERSISTENT_MIN");
  if (!minBytes || std::string(minBytes) != "0")
    GTEST_SKIP() << "needs DTC_COMM_PERSISTENT_MIN=0 (all-reduces of any size kept)";
  const size_t count = kExchangeBytes / sizeof(float) + 16; // above the exchange limit
  const size_t buffers = kPersistentCacheSize + 6;
  std::vector<std::vector<float>> bufs(buffers, std::vector<float>(count, 1.0f));
  auto allReduce = [&](size_t b) {
    CommRequest a = request(CommKind::kAllReduce, "persistent " + std::to_string(b));
    a.persistent = true;
    a.inputs = {bufs[b].data()};
    a.outputs = {bufs[b].data()};
    a.bytes = {count * sizeof(float)};
    return a;
  };
  const CommStats before = gComm->stats();
  for (size_t b = 0; b < buffers; ++b)
    ASSERT_TRUE(gComm->run(allReduce(b)).isOk());
  for (size_t b = 0; b < buffers; ++b)
    ASSERT_EQ(bufs[b][count - 1], static_cast<float>(n)) << b;
  CommStats s = gComm->stats();
  EXPECT_EQ(s.persistentMisses - before.persistentMisses, buffers);
  EXPECT_EQ(s.persistentEvictions - before.persistentEvictions, buffers - kPersistentCacheSize);
  EXPECT_EQ(s.persistentHits, before.persistentHits);
  // The most recent is kept; two in flight with its key: the second starts after the first.
  uint64_t h1 = gComm->submit(allReduce(buffers - 1));
  uint64_t h2 = gComm->submit(allReduce(buffers - 1));
  ASSERT_TRUE(gComm->wait(h2).isOk());
  ASSERT_TRUE(gComm->wait(h1).isOk());
  EXPECT_EQ(bufs[buffers - 1][0], static_cast<float>(n * n * n));
  // The first was evicted: initialized again, evicting the least recently started (buffer 6).
  ASSERT_TRUE(gComm->run(allReduce(0)).isOk());
  EXPECT_EQ(bufs[0][7], static_cast<float>(n * n));
  ASSERT_TRUE(gComm->run(allReduce(6)).isOk());
  CommStats t = gComm->stats();
  EXPECT_EQ(t.persistentHits - s.persistentHits, 2u);
  EXPECT_EQ(t.persistentMisses - s.persistentMisses, 2u);
  EXPECT_EQ(t.persistentEvictions - s.persistentEvictions, 2u);
  EXPECT_LE(t.persistentCached, kPersistentCacheSize * 2); // other tests' groups
  // A small persistent request runs as an exchange: not kept.
  std::vector<float> small(100, 1.0f);
  CommRequest q = request(CommKind::kAllReduce, "small persistent");
  q.persistent = true;
  q.inputs = {small.data()};
  q.outputs = {small.data()};
  q.bytes = {small.size() * sizeof(float)};
  ASSERT_TRUE(gComm->run(q).isOk());
  EXPECT_EQ(small[99], static_cast<float>(n));
  EXPECT_EQ(gComm->stats().persistentMisses, t.persistentMisses);
  EXPECT_TRUE(sameOnEveryRank(static_cast<int64_t>(
      (t.persistentHits * 1000003 + t.persistentMisses) * 1000003 + t.persistentEvictions)));
}

// Without DTC_COMM_PERSISTENT_MIN, a persistent all-reduce below 16 MiB runs as a non-persistent
// MPI_Iallreduce (faster there: MpiCommunicator.h, ExchangeScheme::persistentAllReduceMinBytes):
// correct sums, nothing initialized or kept, on every rank alike.
TEST(CommPersistent, AllReduceBelowTheMinimumIsNotKept) {
  const int n = sizeOf();
  if (n == 1)
    GTEST_SKIP() << "one rank: nothing to keep";
  if (std::getenv("DTC_COMM_EXCHANGE") || std::getenv("DTC_COMM_PERSISTENT_MIN"))
    GTEST_SKIP() << "the default limits only";
  const size_t count = kExchangeBytes / sizeof(float) + 16; // above the exchange limit
  std::vector<float> buf(count, 1.0f);
  const CommStats before = gComm->stats();
  for (int step = 0; step < 3; ++step) {
    CommRequest a = request(CommKind::kAllReduce, "unkept persistent");
    a.persistent = true;
    a.inputs = {buf.data()};
    a.outputs = {buf.data()};
    a.bytes = {count * sizeof(float)};
    ASSERT_TRUE(gComm->run(a).isOk());
  }
  EXPECT_EQ(buf[count - 1], static_cast<float>(n * n * n));
  const CommStats after = gComm->stats();
  EXPECT_EQ(after.persistentMisses, before.persistentMisses);
  EXPECT_EQ(after.persistentHits, before.persistentHits);
  EXPECT_TRUE(sameOnEveryRank(static_cast<int64_t>(after.persistentMisses)));
}

} // namespace
