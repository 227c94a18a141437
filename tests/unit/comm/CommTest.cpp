// Tests of the MPI communicator (runtime/comm): every collective with exact values, requests
// in flight together and waited out of order, job checks, the trace gathered to rank 0, and the
// watchdog naming a stopped or killed peer (the request kinds, groups, send/recv, exchanges and
// persistent requests are in CommRequestsTest.cpp, the same binary). ctest runs this binary plain (one rank) and under
// `mpirun -n 2` and `-n 4` (tests/unit/comm/comm.cmake); every rank runs every test in the same
// order. `--fault=stop|kill|stop-recv|kill-recv` runs only that fault scenario (rank 1 stops or
// kills itself during a collective or a recv); `--fault=start|start-background` the failed start
// of a request.
#include "runtime/Trace.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/Launcher.h"
#include "tests/unit/comm/CommTestUtil.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <span>
#include <thread>
#include <unistd.h>

using namespace dtc;
using namespace dtc::rt;

namespace dtc::rt::commtest {
Communicator *gComm = nullptr;
} // namespace dtc::rt::commtest
using namespace dtc::rt::commtest;

namespace {

Tracer *gTracer = nullptr;
std::string gFault; // "stop" or "kill": the fault scenario only

TEST(Comm, LauncherAgreesWithMpi) {
  EXPECT_EQ(launcherWorldSize(), sizeOf());
  EXPECT_EQ(launcherRank(), rankOf());
}

TEST(Comm, AllReduceSumF32ContiguousInputsDiffer) {
  const int n = sizeOf(), r = rankOf();
  // Two operands back to back in one buffer (the second 64-byte aligned: a 24-byte gap).
  std::vector<float> in(40), out(40, -1.0f);
  for (int i = 0; i < 40; ++i)
    in[i] = static_cast<float>(r) + 0.5f * static_cast<float>(i);
  AllReduceRequest req;
  req.name = "bucket 0";
  req.dtype = ir::DType::kFloat32;
  req.op = ReduceOp::kSum;
  req.inputs = {in.data(), in.data() + 16};
  req.outputs = {out.data(), out.data() + 16};
  req.bytes = {10 * sizeof(float), 24 * sizeof(float)};
  uint64_t h = gComm->allReduceAsync(req);
  ASSERT_TRUE(gComm->wait(h).isOk());
  const float ranks = static_cast<float>(n * (n - 1) / 2);
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(out[i], ranks + 0.5f * n * i) << i;
  for (int i = 16; i < 40; ++i)
    EXPECT_EQ(out[i], ranks + 0.5f * n * i) << i;
  for (int i = 0; i < 40; ++i)
    EXPECT_EQ(in[i], static_cast<float>(r) + 0.5f * i) << "input overwritten at " << i;
}

TEST(Comm, AllReduceMeanF64Scattered) {
  const int n = sizeOf(), r = rankOf();
  // Far apart (gaps of 128 bytes and more, in a different order than the request's): packed
  // into the staging buffer.
  std::vector<double> arena(7 + 1000 + 3 + 64, -1.0);
  double *c = arena.data(), *a = c + 3 + 16, *b = a + 7 + 16;
  for (int i = 0; i < 7; ++i)
    a[i] = (r + 1) * i;
  for (int i = 0; i < 1000; ++i)
    b[i] = (r + 1) * (i + 1000);
  for (int i = 0; i < 3; ++i)
    c[i] = -(r + 1) * i;
  AllReduceRequest req;
  req.name = "bucket 1";
  req.dtype = ir::DType::kFloat64;
  req.op = ReduceOp::kMean;
  req.inputs = {a, b, c};
  req.outputs = {a, b, c};
  req.bytes = {7 * 8, 1000 * 8, 3 * 8};
  ASSERT_TRUE(gComm->wait(gComm->allReduceAsync(req)).isOk());
  const double meanFactor = (n + 1) / 2.0; // mean of (r + 1)
  for (int i = 0; i < 7; ++i)
    EXPECT_EQ(a[i], meanFactor * i);
  for (int i = 0; i < 1000; ++i)
    EXPECT_EQ(b[i], meanFactor * (i + 1000));
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(c[i], -meanFactor * i);
}

TEST(Comm, AllReduceMeanF32ScatteredInputsDiffer) {
  const int n = sizeOf(), r = rankOf();
  std::vector<float> in1(5, 2.0f * (r + 1)), in2(300, -4.0f * (r + 1));
  std::vector<float> outs(5 + 300 + 40);
  float *out2 = outs.data(), *out1 = out2 + 300 + 40; // 160 bytes apart
  AllReduceRequest req;
  req.name = "bucket 2";
  req.op = ReduceOp::kMean;
  req.inputs = {in1.data(), in2.data()};
  req.outputs = {out1, out2};
  req.bytes = {5 * 4, 300 * 4};
  ASSERT_TRUE(gComm->wait(gComm->allReduceAsync(req)).isOk());
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(out1[i], 2.0f * (n + 1) / 2.0f);
  for (int i = 0; i < 300; ++i)
    EXPECT_EQ(out2[i], -4.0f * (n + 1) / 2.0f);
}

TEST(Comm, AllReduceSumIntegers) {
  const int n = sizeOf(), r = rankOf();
  std::vector<int32_t> a(33);
  std::vector<int64_t> b(17);
  for (int i = 0; i < 33; ++i)
    a[i] = r * 1000 - i;
  for (int i = 0; i < 17; ++i)
    b[i] = (int64_t{1} << 52) + r * 3 + i; // beyond exact doubles once summed
  ASSERT_TRUE(
      gComm->allReduce(a.data(), a.size(), ir::DType::kInt32, ReduceOp::kSum, "ints").isOk());
  ASSERT_TRUE(
      gComm->allReduce(b.data(), b.size(), ir::DType::kInt64, ReduceOp::kSum, "longs").isOk());
  for (int i = 0; i < 33; ++i)
    EXPECT_EQ(a[i], 1000 * n * (n - 1) / 2 - n * i);
  for (int i = 0; i < 17; ++i)
    EXPECT_EQ(b[i], n * ((int64_t{1} << 52) + i) + 3 * n * (n - 1) / 2);
}

// The maximum (vocabulary-parallel cross-entropy's global max): element i's largest value sits
// on rank i % n; small (point-to-point exchange) and large (MPI's collective) f32, f64 and i64,
// and f16 refused (MPI has no 16-bit float max here).
TEST(Comm, AllReduceMax) {
  const int n = sizeOf(), r = rankOf();
  for (size_t count : {size_t{37}, size_t{40000}}) {
    std::vector<float> f(count);
    std::vector<double> d(count);
    std::vector<int64_t> l(count);
    for (size_t i = 0; i < count; ++i) {
      const bool top = static_cast<int>(i % static_cast<size_t>(n)) == r;
      f[i] = top ? static_cast<float>(i) : -1.0f - static_cast<float>(r);
      d[i] = top ? 0.5 * static_cast<double>(i) : -1e300;
      l[i] = top ? static_cast<int64_t>(i) - 7 : -(int64_t{1} << 60) + r;
    }
    ASSERT_TRUE(
        gComm->allReduce(f.data(), count, ir::DType::kFloat32, ReduceOp::kMax, "f32 max").isOk());
    ASSERT_TRUE(
        gComm->allReduce(d.data(), count, ir::DType::kFloat64, ReduceOp::kMax, "f64 max").isOk());
    ASSERT_TRUE(
        gComm->allReduce(l.data(), count, ir::DType::kInt64, ReduceOp::kMax, "i64 max").isOk());
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(f[i], static_cast<float>(i)) << i;
      ASSERT_EQ(d[i], 0.5 * static_cast<double>(i)) << i;
      ASSERT_EQ(l[i], static_cast<int64_t>(i) - 7) << i;
    }
  }
  std::vector<uint16_t> h(4);
  Status s = gComm->allReduce(h.data(), 4, ir::DType::kFloat16, ReduceOp::kMax, "f16 max");
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("max of f16"), std::string::npos) << s.message();
  EXPECT_TRUE(gComm->barrier("after f16 max").isOk());
}

TEST(Comm, InvalidRequestsFailWithoutBreaking) {
  std::vector<uint8_t> h(4);
  Status s = gComm->allReduce(h.data(), 4, ir::DType::kUInt8, ReduceOp::kSum, "bytes");
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("all-reduce 'bytes'"), std::string::npos) << s.message();
  std::vector<int32_t> i(4, 1);
  s = gComm->allReduce(i.data(), 4, ir::DType::kInt32, ReduceOp::kMean, "int mean");
  EXPECT_FALSE(s.isOk());
  // Still usable; zero bytes is fine.
  AllReduceRequest empty;
  empty.name = "empty";
  EXPECT_TRUE(gComm->wait(gComm->allReduceAsync(empty)).isOk());
  EXPECT_TRUE(gComm->barrier("after invalid").isOk());
}

TEST(Comm, SeveralAsyncWaitedOutOfOrder) {
  const int n = sizeOf(), r = rankOf();
  const size_t sizes[] = {1, 1000, 300000, 70001}; // the last two: ring, uneven chunks
  std::vector<std::vector<float>> bufs;
  std::vector<uint64_t> handles;
  for (size_t k = 0; k < 4; ++k) {
    bufs.emplace_back(sizes[k]);
    for (size_t i = 0; i < sizes[k]; ++i)
      bufs[k][i] = static_cast<float>((r + 1) * (k + 1)) + static_cast<float>(i % 7);
  }
  for (size_t k = 0; k < 4; ++k) {
    AllReduceRequest req;
    req.name = "bucket " + std::to_string(k);
    req.op = ReduceOp::kSum;
    req.inputs = {bufs[k].data()};
    req.outputs = {bufs[k].data()};
    req.bytes = {sizes[k] * 4};
    handles.push_back(gComm->allReduceAsync(req));
  }
  for (int k = 3; k >= 0; --k)
    ASSERT_TRUE(gComm->wait(handles[k]).isOk());
  EXPECT_TRUE(gComm->wait(handles[2]).isOk()); // waited twice: still ok
  for (size_t k = 0; k < 4; ++k)
    for (size_t i = 0; i < sizes[k]; i += 97)
      ASSERT_EQ(bufs[k][i],
                static_cast<float>((k + 1) * n * (n + 1) / 2) + n * static_cast<float>(i % 7))
          << k << " " << i;
  // waitAll after several launches.
  std::vector<double> d(5, r);
  AllReduceRequest req;
  req.name = "last";
  req.dtype = ir::DType::kFloat64;
  req.inputs = {d.data()};
  req.outputs = {d.data()};
  req.bytes = {40};
  gComm->allReduceAsync(req);
  ASSERT_TRUE(gComm->waitAll().isOk());
  EXPECT_EQ(d[4], n * (n - 1) / 2.0);
}

TEST(Comm, Broadcast) {
  const int n = sizeOf(), r = rankOf();
  std::vector<int64_t> v(100, r);
  if (r == n - 1)
    for (int i = 0; i < 100; ++i)
      v[i] = i * 11;
  ASSERT_TRUE(gComm->broadcast(v.data(), v.size() * 8, n - 1, "weights").isOk());
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(v[i], i * 11);
  EXPECT_FALSE(gComm->broadcast(v.data(), 8, n, "bad root").isOk());
}

TEST(Comm, AllGather) {
  const int n = sizeOf(), r = rankOf();
  int32_t mine[3] = {r, r * 10, r * 100};
  std::vector<int32_t> all(3 * n, -1);
  ASSERT_TRUE(gComm->allGather(mine, sizeof mine, all.data(), "gather").isOk());
  for (int q = 0; q < n; ++q) {
    EXPECT_EQ(all[3 * q], q);
    EXPECT_EQ(all[3 * q + 1], q * 10);
    EXPECT_EQ(all[3 * q + 2], q * 100);
  }
}

TEST(Comm, ReduceScatter) {
  const int n = sizeOf(), r = rankOf();
  const size_t count = 6;
  std::vector<float> send(count * n);
  for (size_t i = 0; i < send.size(); ++i)
    send[i] = static_cast<float>(i) + (r + 1);
  std::vector<float> recv(count, -1);
  ASSERT_TRUE(gComm
                  ->reduceScatter(send.data(), recv.data(), count, ir::DType::kFloat32,
                                  ReduceOp::kSum, "shards")
                  .isOk());
  const float ranks = n * (n + 1) / 2.0f;
  for (size_t i = 0; i < count; ++i)
    EXPECT_EQ(recv[i], n * static_cast<float>(r * count + i) + ranks);
  std::vector<double> sendD(count * n, 2.0 * (r + 1)), recvD(count);
  ASSERT_TRUE(gComm
                  ->reduceScatter(sendD.data(), recvD.data(), count, ir::DType::kFloat64,
                                  ReduceOp::kMean, "mean shards")
                  .isOk());
  for (double v : recvD)
    EXPECT_EQ(v, static_cast<double>(n + 1));
}

TEST(Comm, SendRecv) {
  const int n = sizeOf(), r = rankOf();
  if (n == 1) {
    EXPECT_FALSE(gComm->send("x", 1, 0, 0, "self").isOk());
    return;
  }
  // Pairs (0,1), (2,3): even ranks send first, odd ones receive first (blocking calls).
  const int peer = r ^ 1;
  if (peer >= n)
    return;
  std::vector<int32_t> out(300000), in(300000, -1); // above the eager limit
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = r * 7 + static_cast<int32_t>(i);
  if (r % 2 == 0) {
    ASSERT_TRUE(gComm->send(out.data(), out.size() * 4, peer, 5, "activations").isOk());
    ASSERT_TRUE(gComm->recv(in.data(), in.size() * 4, peer, 6, "gradients").isOk());
  } else {
    ASSERT_TRUE(gComm->recv(in.data(), in.size() * 4, peer, 5, "activations").isOk());
    ASSERT_TRUE(gComm->send(out.data(), out.size() * 4, peer, 6, "gradients").isOk());
  }
  for (size_t i = 0; i < in.size(); i += 1001)
    EXPECT_EQ(in[i], peer * 7 + static_cast<int32_t>(i));
}

TEST(Comm, KernelCollectivesAllReduceSum) {
  const int n = sizeOf(), r = rankOf();
  ops::cpu::KernelCollectives *kc = gComm;
  EXPECT_EQ(kc->groupSize(), n);
  double stats[4] = {1.0 * r, 0.25, -2.0 * r, 1e10};
  ASSERT_TRUE(kc->allReduceSum(stats, 4, "node 'bn1' (BatchNormTraining)").isOk());
  EXPECT_EQ(stats[0], n * (n - 1) / 2.0);
  EXPECT_EQ(stats[1], 0.25 * n);
  EXPECT_EQ(stats[2], -1.0 * n * (n - 1));
  EXPECT_EQ(stats[3], 1e10 * n);
}

TEST(Comm, CheckSameJobAgrees) {
  EXPECT_TRUE(gComm->checkSameJob(std::string(1000, 'f') + "abc", sizeOf(), "a.dtc").isOk());
}

TEST(Comm, CheckSameJobFingerprintDiffers) {
  const int n = sizeOf(), r = rankOf();
  if (n == 1)
    GTEST_SKIP() << "needs two ranks";
  bool odd = r == n - 1;
  Status s =
      gComm->checkSameJob(odd ? "fingerprint-2" : "fingerprint-1", n, odd ? "b.dtc" : "a.dtc");
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "rank " + std::to_string(n - 1) +
                             " runs plan b.dtc whose fingerprint differs from rank 0's (a.dtc)");
}

TEST(Comm, CheckSameJobWorldSizeDiffers) {
  const int n = sizeOf();
  Status s = gComm->checkSameJob("same", n + 1, "plan.dtc");
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "the plan is for " + std::to_string(n + 1) + " ranks, the job has " +
                             std::to_string(n) + ": start it with dtc-run --nproc " +
                             std::to_string(n + 1) + " or mpirun -n " + std::to_string(n + 1) +
                             " (the world size of its --strategy, dp x pp x tp)");
}

TEST(Comm, TraceGathersEveryRank) {
  const int n = sizeOf(), r = rankOf();
  Tracer::Event e;
  e.name = "conv" + std::to_string(r);
  e.category = "Conv";
  e.thread = Tracer::kCompute;
  e.beginUs = gTracer->nowUs();
  e.durationUs = 5;
  gTracer->record(e);
  double x[3] = {1, 2, 3};
  ASSERT_TRUE(gComm->allReduceSum(x, 3, "traced").isOk());
  // Rank 0 picks the path; everybody passes the same one.
  char path[256] = {};
  if (r == 0)
    std::snprintf(path, sizeof path, "%s/dtc_comm_trace_%d.json",
                  std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp", getpid());
  ASSERT_TRUE(gComm->broadcast(path, sizeof path, 0, "trace path").isOk());
  ASSERT_TRUE(gTracer->write(path, gComm).isOk());
  if (r != 0)
    return;
  std::ifstream f(path);
  ASSERT_TRUE(f.good());
  nlohmann::json doc = nlohmann::json::parse(f);
  std::set<int> computeRanks, commRanks, namedRanks;
  bool sawBytes = false;
  for (const auto &ev : doc["traceEvents"]) {
    if (ev["ph"] == "M" && ev["name"] == "process_name") {
      EXPECT_EQ(ev["args"]["name"], "rank " + std::to_string(ev["pid"].get<int>()));
      namedRanks.insert(ev["pid"].get<int>());
    }
    if (ev["ph"] != "X")
      continue;
    int pid = ev["pid"].get<int>();
    if (ev["tid"] == 0 && ev["name"] == "conv" + std::to_string(pid))
      computeRanks.insert(pid);
    if (ev["tid"] == 1) {
      commRanks.insert(pid);
      if (ev["cat"] == "all-reduce" && ev["name"] == "traced" &&
          ev["args"]["bytes"].get<uint64_t>() == 3 * sizeof(double))
        sawBytes = true;
    }
    EXPECT_GE(ev["ts"].get<int64_t>(), 0);
  }
  EXPECT_EQ(static_cast<int>(computeRanks.size()), n);
  EXPECT_EQ(static_cast<int>(commRanks.size()), n);
  EXPECT_EQ(static_cast<int>(namedRanks.size()), n);
  EXPECT_TRUE(sawBytes);
  std::remove(path);
}

// --fault=start|start-background: the MPI call of request "doomed" fails on every rank
// (CommOptions::failStartOf), small or large (which also wakes the communication thread while
// the communicator breaks). Its wait must return that error at once, as must the request queued
// behind it, and the communicator is broken from then on.
TEST(CommFault, StartFailureCompletesTheRequest) {
  if (gFault != "start" && gFault != "start-background")
    GTEST_SKIP() << "runs with --fault=start|start-background";
  ASSERT_TRUE(gComm->barrier("before the fault").isOk());
  const size_t count = gFault == "start" ? 1000 : (size_t{4} << 20) / 4;
  std::vector<float> v(count, 1.0f), w(1000, 1.0f);
  auto begin = std::chrono::steady_clock::now();
  CommRequest a = request(CommKind::kAllReduce, "doomed");
  a.inputs = {v.data()};
  a.outputs = {v.data()};
  a.bytes = {count * 4};
  uint64_t h1 = gComm->submit(a);
  CommRequest b = request(CommKind::kAllReduce, "behind it");
  b.inputs = {w.data()};
  b.outputs = {w.data()};
  b.bytes = {w.size() * 4};
  uint64_t h2 = gComm->submit(b);
  if (gFault == "start-background")
    std::this_thread::sleep_for(std::chrono::milliseconds(50)); // the woken thread sees it
  Status s = gComm->wait(h1);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  ASSERT_FALSE(s.isOk());
  EXPECT_LT(seconds, 1.5); // at once, not by the 2 s watchdog
  EXPECT_EQ(s.message().rfind("rank " + std::to_string(rankOf()) + ": all-reduce 'doomed'", 0),
            0u)
      << s.message();
  EXPECT_NE(s.message().find("MPI error"), std::string::npos) << s.message();
  EXPECT_EQ(gComm->wait(h2).message(), s.message());
  EXPECT_EQ(gComm->barrier("after").message(), s.message());
  if (!::testing::Test::HasFailure() && rankOf() == 0) {
    std::printf("FAULT TEST PASSED after %.3f s: %s\n", seconds, s.message().c_str());
    std::fflush(stdout);
  }
  // The communicator is broken (no barrier): the other ranks give rank 0 time to print before
  // their abort ends the job (a rank that aborted first once killed rank 0 before its line).
  if (rankOf() != 0)
    std::this_thread::sleep_for(std::chrono::seconds(3));
  gComm->abortJob(3);
}

// --fault=stop|kill: rank 1 stops (SIGSTOP) or kills (SIGKILL) itself before a collective; rank
// 0's collective (timeout 2 s) must fail within 15 s naming rank 1, then end the job.
TEST(CommFault, LostPeerIsNamed) {
  if (gFault != "stop" && gFault != "kill")
    GTEST_SKIP() << "runs with --fault=stop|kill";
  ASSERT_GE(sizeOf(), 2);
  if (rankOf() == 1) {
    std::raise(gFault == "kill" ? SIGKILL : SIGSTOP);
    ::pause();
  }
  auto begin = std::chrono::steady_clock::now();
  std::vector<float> v(1000, 1.0f);
  Status s = gComm->allReduce(v.data(), v.size(), ir::DType::kFloat32, ReduceOp::kSum, "bucket 3");
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  ASSERT_FALSE(s.isOk());
  EXPECT_LT(seconds, 15.0); // the 2 s timeout plus generous scheduling slack (sanitizers, load)
  EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().rfind("rank " + std::to_string(rankOf()) + ": all-reduce 'bucket 3'", 0),
            0u)
      << s.message();
  // Broken from now on.
  EXPECT_EQ(gComm->barrier("after").message(), s.message());
  if (!::testing::Test::HasFailure() && rankOf() == 0)
    std::printf("FAULT TEST PASSED after %.1f s: %s\n", seconds, s.message().c_str());
  gComm->abortJob(3); // ends the stopped rank too
}

// --fault=stop-recv|kill-recv: rank 0 waits in a recv from rank 1 (submitted before rank 1 is
// lost, with a send to rank 1 in flight too); rank 1 stops or kills itself. The wait must fail
// within 15 s naming rank 1 and the recv.
TEST(CommFault, LostPeerDuringRecv) {
  if (gFault != "stop-recv" && gFault != "kill-recv")
    GTEST_SKIP() << "runs with --fault=stop-recv|kill-recv";
  ASSERT_GE(sizeOf(), 2);
  ASSERT_TRUE(gComm->barrier("before the fault").isOk());
  if (rankOf() == 1) {
    std::raise(gFault == "kill-recv" ? SIGKILL : SIGSTOP);
    ::pause();
  }
  if (rankOf() != 0) {
    ::pause(); // rank 0 ends the job
  }
  auto begin = std::chrono::steady_clock::now();
  std::vector<float> in(1000), out(300000, 1.0f); // the send is above the eager limit
  CommRequest recv;
  recv.kind = CommKind::kRecv;
  recv.name = "activations of stage 1";
  recv.peer = 1;
  recv.tag = 3;
  recv.outputs = {in.data()};
  recv.bytes = {in.size() * 4};
  uint64_t h = gComm->submit(recv);
  CommRequest send = recv;
  send.kind = CommKind::kSend;
  send.name = "gradients of stage 0";
  send.outputs.clear();
  send.inputs = {out.data()};
  send.bytes = {out.size() * 4};
  uint64_t hs = gComm->submit(send);
  Status s = gComm->wait(h);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  ASSERT_FALSE(s.isOk());
  EXPECT_LT(seconds, 15.0); // the 2 s timeout plus generous scheduling slack
  EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().rfind("rank 0: recv 'activations of stage 1'", 0), 0u) << s.message();
  EXPECT_EQ(gComm->wait(hs).message(), s.message()); // broken: the send fails alike
  if (!::testing::Test::HasFailure())
    std::printf("FAULT TEST PASSED after %.1f s: %s\n", seconds, s.message().c_str());
  gComm->abortJob(3);
}

/// Ranks other than 0 print only failures (with their rank), so the output stays readable.
class RankPrinter : public ::testing::EmptyTestEventListener {
public:
  explicit RankPrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult &r) override {
    if (r.failed())
      std::printf("[rank %d] %s:%d: failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                  r.line_number(), r.summary());
  }

private:
  int rank_;
};

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--fault=", 8) == 0)
      gFault = argv[i] + 8;
  CommOptions opts;
  opts.timeoutSeconds = gFault.empty() ? 20 : 2;
  if (gFault.rfind("start", 0) == 0)
    opts.failStartOf = "doomed";
  Tracer tracer(launcherRank());
  opts.tracer = &tracer;
  auto comm = Communicator::createMpi(opts);
  if (!comm) {
    std::fprintf(stderr, "error: %s\n", comm.status().message().c_str());
    return 1;
  }
  gComm = comm->get();
  gTracer = &tracer;
  if (!gFault.empty())
    ::testing::GTEST_FLAG(filter) = "CommFault.*";
  if (gComm->rank() != 0) {
    auto &listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankPrinter(gComm->rank()));
  }
  int rc = RUN_ALL_TESTS();
  comm->reset(); // barrier and MPI_Finalize
  return rc;
}
