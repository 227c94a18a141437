// Parameter servers (runtime/ps): TF_CONFIG parsing, shard counts and placement, and the
// server's rules on a compiled ps=2:2 plan: malformed pushes are refused, the synchronous
// update is the mean of the live workers' gradients, a lost worker does not stop a step, a late
// push is dropped, the staleness bound holds a fast worker back, the job ends when the chief is
// done, and the asynchronous rules: scaled (each push one step, gradient / W), aggregate (the
// mean of each live-worker count of pushes one step, whoever pushed; kept in checkpoints) and
// staleness-lr (lr / the updates since the worker's pull).
#include "compiler/driver/ParameterHost.h"
#include "compiler/driver/TrainConfig.h"
#include "compiler/plan/Lowering.h"
#include "compiler/support/FileIO.h"
#include "passes/Passes.h"
#include "runtime/ps/Cluster.h"
#include "runtime/ps/ServerCore.h"
#include "tests/unit/ops/TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <thread>
#include <unistd.h>

namespace dtc::rt::ps {
namespace {

// logits = x @ w + b: w (48 bytes) and b (12 bytes) land on different servers.
const char *kModel = R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[N,4] x) => (float[N,3] y)
<float[4,3] w = {1,1,1, 1,1,1, 1,1,1, 1,1,1}, float[3] b = {0,0,0}>
{
  h = MatMul (x, w)
  y = Add (h, b)
}
)";

struct Compiled {
  std::string dir;
  Expected<plan::Plan> plan = Status::error("not compiled");
};

Compiled compilePs(int64_t staleness, const std::string &asyncRule = "scaled") {
  Compiled c;
  c.dir =
      (std::filesystem::temp_directory_path() / ("dtc-ps-test-" + std::to_string(::getpid()) + "-" +
                                                 std::to_string(staleness) + "-" + asyncRule))
          .string();
  std::filesystem::create_directories(c.dir);
  const std::string modelFile = c.dir + "/model.onnxtxt";
  EXPECT_TRUE(writeFileAtomically(modelFile, kModel).isOk());
  auto g = test::compileText(kModel, {"canonicalize"});
  if (!g) {
    c.plan = g.status();
    return c;
  }
  TrainingConfig cfg;
  cfg.loss = "softmax-cross-entropy";
  cfg.optimizer = "sgd";
  cfg.lr = 0.5f;
  cfg.batchSize = 4;
  cfg.staleness = staleness;
  cfg.asyncRule = asyncRule;
  EXPECT_TRUE(driver::parseStrategy("ps=2:2", cfg).isOk());
  Diagnostics diags;
  plan::LowerOptions opts;
  opts.batchSize = cfg.rankBatchSize();
  opts.modelPath = "model.onnxtxt";
  opts.modelFile = modelFile;
  EXPECT_TRUE(passes::bindDims(**g, opts.dims, opts.batchSize, diags).isOk());
  EXPECT_TRUE(driver::runTrainingPasses(**g, cfg, diags, true).isOk());
  auto host = driver::buildParameterHost(**g, cfg, {});
  if (!host) {
    c.plan = host.status();
    return c;
  }
  c.plan = plan::lowerTraining(**g, cfg, opts, &*host);
  return c;
}

std::unique_ptr<ServerCore> serverOf(const Compiled &c, int server, double timeout) {
  EXPECT_TRUE(c.plan.hasValue()) << c.plan.status().message();
  ExecutorOptions eo;
  eo.planPath = c.dir + "/plan.dtc";
  auto core = ServerCore::create(*c.plan, server, eo, timeout);
  EXPECT_TRUE(core.hasValue()) << core.status().message();
  return core.hasValue() ? std::move(*core) : nullptr;
}

ShardBytes filled(int32_t shard, size_t count, float v) {
  std::vector<float> f(count, v);
  return {shard, std::string(reinterpret_cast<const char *>(f.data()), count * 4)};
}

float first(const std::vector<ShardBytes> &values) {
  float v = 0;
  std::memcpy(&v, values.at(0).bytes.data(), 4);
  return v;
}

TEST(Cluster, ParsesTfConfigWithChief) {
  auto c = parseClusterJson(R"({"cluster": {"chief": ["h0:1000"], "worker": ["h1:1001",
      "h2:1002"], "ps": ["p0:2000"]}, "task": {"type": "worker", "index": 1}})",
                            "TF_CONFIG");
  ASSERT_TRUE(c.hasValue()) << c.status().message();
  EXPECT_EQ(c->workers, (std::vector<std::string>{"h0:1000", "h1:1001", "h2:1002"}));
  EXPECT_EQ(c->servers, (std::vector<std::string>{"p0:2000"}));
  EXPECT_EQ(c->taskType, "worker");
  EXPECT_EQ(c->taskIndex, 2); // worker 1 follows the chief
  ASSERT_TRUE(parseTask("chief:0", *c).isOk());
  EXPECT_EQ(c->taskIndex, 0);
  ASSERT_TRUE(parseTask("ps:0", *c).isOk());
  EXPECT_EQ(c->taskType, "ps");
}

TEST(Cluster, Errors) {
  const std::string ok = R"("worker": ["h:1"], "ps": ["p:2"])";
  auto bad = [](const std::string &text) {
    auto c = parseClusterJson(text, "TF_CONFIG");
    return c.hasValue() ? std::string() : c.status().message();
  };
  EXPECT_NE(bad("{"), "");
  EXPECT_NE(bad(R"({"cluster": {"worker": ["h:1"]}})").find("no parameter server"),
            std::string::npos);
  EXPECT_NE(bad(R"({"cluster": {"worker": ["h"], "ps": ["p:2"]}})").find("not host:port"),
            std::string::npos);
  EXPECT_NE(bad(R"({"cluster": {"worker": ["h:70000"], "ps": ["p:2"]}})").find("port"),
            std::string::npos);
  EXPECT_NE(bad("{\"cluster\": {" + ok + "}, \"task\": {\"type\": \"ps\", \"index\": 1}}")
                .find("ps index 1 is not in [0, 1)"),
            std::string::npos);
  EXPECT_NE(bad(R"({"cluster": {"worker": ["h:1"], "ps": ["h:1"]}})").find("twice"),
            std::string::npos);
  auto c = parseClusterJson("{\"cluster\": {" + ok + "}}", "f");
  ASSERT_TRUE(c.hasValue());
  EXPECT_FALSE(parseTask("worker", *c).isOk());
  EXPECT_FALSE(parseTask("evaluator:0", *c).isOk());
  EXPECT_FALSE(parseTask("worker:-1", *c).isOk());
}

TEST(Cluster, JobToken) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("dtc-token-test-" + std::to_string(::getpid())))
          .string();
  std::filesystem::create_directories(dir);
  auto tokenOf = [&](const std::string &text) {
    const std::string path = dir + "/t";
    std::filesystem::remove(path);
    EXPECT_TRUE(writeFileAtomically(path, text).isOk());
    return readJobToken(path);
  };
  auto ok = tokenOf("0123456789abcdef0123\n");
  ASSERT_TRUE(ok.hasValue()) << ok.status().message();
  EXPECT_EQ(*ok, "0123456789abcdef0123");
  EXPECT_NE(tokenOf("short\n").status().message().find("at least 16"), std::string::npos);
  EXPECT_NE(tokenOf(std::string("aaaaaaaaaaaaaaaa\x01\x7f\xff"))
                .status()
                .message()
                .find("printable ASCII"),
            std::string::npos);
  EXPECT_FALSE(readJobToken(dir + "/missing").hasValue());
  std::filesystem::remove_all(dir);
}

TEST(Placement, MinSizePartitionerAndLpt) {
  // floor(bytes / min), at most the servers and the rows, at least 1.
  EXPECT_EQ(driver::shardCount(1000, 10, 4, 256), 3);
  EXPECT_EQ(driver::shardCount(100, 10, 4, 256), 1);
  EXPECT_EQ(driver::shardCount(1 << 20, 10, 4, 256), 4);
  EXPECT_EQ(driver::shardCount(1 << 20, 2, 4, 256), 2);
  // Largest first on the least-loaded server; a parameter's shards on distinct servers.
  const std::vector<int> s = driver::placeShards({50, 50, 40, 10, 10}, {0, 0, 1, 2, 3}, 2);
  EXPECT_NE(s[0], s[1]);
  int64_t load[2] = {0, 0};
  const int64_t bytes[5] = {50, 50, 40, 10, 10};
  for (int i = 0; i < 5; ++i)
    load[s[i]] += bytes[i];
  // Each 50 on its own server, then 40 and the two 10s: 90 / 70, the best split there is.
  EXPECT_EQ(std::max(load[0], load[1]), 90);
  EXPECT_EQ(std::min(load[0], load[1]), 70);
}

TEST(ServerCore, RefusesMalformedPushes) {
  Compiled c = compilePs(0);
  auto core = serverOf(c, 0, 10);
  ASSERT_TRUE(core);
  ASSERT_EQ(core->shards().size(), 1u);
  const int32_t id = core->shards()[0];
  const size_t n = core->shardBytes(id) / 4;
  int64_t version = 0, next = 0;
  auto message = [&](int worker, std::vector<ShardBytes> g, float lr = 0.1f) {
    Status s = core->push(worker, 0, lr, g, version, next);
    return s.isOk() ? std::string() : s.message();
  };
  EXPECT_NE(message(0, {}).find("pushed 0 gradients"), std::string::npos);
  EXPECT_NE(message(0, {filled(id + 7, n, 1)}).find("does not hold"), std::string::npos);
  EXPECT_NE(message(0, {filled(id, n - 1, 1)}).find("bytes for shard"), std::string::npos);
  EXPECT_NE(message(5, {filled(id, n, 1)}).find("worker 5"), std::string::npos);
  EXPECT_NE(message(-1, {filled(id, n, 1)}).find("worker -1"), std::string::npos);
  EXPECT_NE(message(0, {filled(id, n, 1)}, NAN).find("learning rate"), std::string::npos);
  EXPECT_EQ(core->version(), 0);
  EXPECT_FALSE(ServerCore::create(*c.plan, 2, ExecutorOptions{}, 10).hasValue());
}

TEST(ServerCore, SynchronousMeanLostWorkerAndLatePush) {
  Compiled c = compilePs(0);
  auto core = serverOf(c, 0, /*timeout=*/0.3);
  ASSERT_TRUE(core);
  const int32_t id = core->shards()[0];
  const size_t n = core->shardBytes(id) / 4;
  uint64_t inc0 = 0, inc1 = 0;
  ASSERT_EQ(*core->join(0, inc0), 0);
  ASSERT_EQ(*core->join(1, inc1), 0);
  EXPECT_TRUE(core->checkIncarnation(0, inc0).isOk());
  EXPECT_FALSE(core->checkIncarnation(0, inc1 + 12345).isOk());
  int64_t version = 0, next = 0;
  ASSERT_TRUE(core->push(0, 0, 0.5f, {filled(id, n, 1)}, version, next).isOk());
  EXPECT_EQ(version, 0); // waits for worker 1
  bool ready = true;
  std::vector<ShardBytes> values;
  ASSERT_TRUE(core->pull(0, 1, std::chrono::milliseconds(0), ready, values, version).isOk());
  EXPECT_FALSE(ready);
  ASSERT_TRUE(core->push(1, 0, 0.5f, {filled(id, n, 3)}, version, next).isOk());
  EXPECT_EQ(version, 1);
  EXPECT_EQ(next, 1);
  ASSERT_TRUE(core->pull(0, 1, std::chrono::milliseconds(0), ready, values, version).isOk());
  ASSERT_TRUE(ready);
  EXPECT_FLOAT_EQ(first(values), 1.0f - 0.5f * 2.0f); // w - lr * mean(1, 3)

  // Worker 1 goes silent: the step is applied with worker 0's gradient alone.
  ASSERT_TRUE(core->push(0, 1, 0.5f, {filled(id, n, 1)}, version, next).isOk());
  EXPECT_EQ(core->version(), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  core->checkLiveness();
  EXPECT_EQ(core->version(), 2);
  EXPECT_EQ(core->workerState(1), "lost");
  // Back, with its gradient of step 1: dropped, it continues at step 2.
  ASSERT_TRUE(core->push(1, 1, 0.5f, {filled(id, n, 100)}, version, next).isOk());
  EXPECT_EQ(next, 2);
  EXPECT_EQ(version, 2);
  ASSERT_TRUE(core->pull(0, 2, std::chrono::milliseconds(0), ready, values, version).isOk());
  EXPECT_FLOAT_EQ(first(values), 0.0f - 0.5f * 1.0f);
  // A pull or push ahead of what this server holds of the worker: the server lost its state.
  EXPECT_NE(core->pull(0, 7, std::chrono::milliseconds(0), ready, values, version)
                .message()
                .find("lost its state"),
            std::string::npos);
  // A non-finite gradient is refused, not applied.
  EXPECT_NE(core->push(0, 2, 0.5f, {filled(id, n, NAN)}, version, next).message().find("NaN"),
            std::string::npos);
  // A push ahead of the server's step is refused.
  EXPECT_FALSE(core->push(0, 5, 0.5f, {filled(id, n, 1)}, version, next).isOk());
  // The chief is done, worker 1 is live again: not finished until it is done or lost.
  ASSERT_TRUE(core->heartbeat(0, /*done=*/true).isOk());
  EXPECT_FALSE(core->finished());
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  core->checkLiveness();
  EXPECT_TRUE(core->finished());
}

TEST(ServerCore, AsynchronousScaledAndBoundedStaleness) {
  Compiled c = compilePs(1, "scaled");
  auto core = serverOf(c, 0, 10);
  ASSERT_TRUE(core);
  const int32_t id = core->shards()[0];
  const size_t n = core->shardBytes(id) / 4;
  int64_t version = 0, next = 0;
  ASSERT_TRUE(core->push(0, 0, 0.5f, {filled(id, n, 2)}, version, next).isOk());
  EXPECT_EQ(version, 1); // applied on arrival
  bool ready = false;
  std::vector<ShardBytes> values;
  ASSERT_TRUE(core->pull(0, 1, std::chrono::milliseconds(0), ready, values, version).isOk());
  ASSERT_TRUE(ready); // 1 step ahead of worker 1: within the bound
  EXPECT_FLOAT_EQ(first(values), 1.0f - 0.5f * 2.0f / 2); // scaled by 1/W
  ASSERT_TRUE(core->push(0, 1, 0.5f, {filled(id, n, 2)}, version, next).isOk());
  ASSERT_TRUE(core->pull(0, 2, std::chrono::milliseconds(0), ready, values, version).isOk());
  EXPECT_FALSE(ready); // 2 steps ahead of the slowest
  // Worker 1 pushes from another thread while worker 0 waits.
  std::thread slow([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    int64_t v = 0, nx = 0;
    EXPECT_TRUE(core->push(1, 0, 0.5f, {filled(id, n, 0)}, v, nx).isOk());
  });
  ASSERT_TRUE(core->pull(0, 2, std::chrono::milliseconds(2000), ready, values, version).isOk());
  slow.join();
  EXPECT_TRUE(ready);
  EXPECT_EQ(version, 3);
}

// Asynchronous, aggregate: pushes are summed whoever sends them (a fast worker may fill the
// aggregate alone), and the mean of as many as live workers is one SGD step (w starts at 1,
// lr 0.5); a lost worker is not waited for, a finished one neither.
TEST(ServerCore, AsynchronousAggregate) {
  Compiled c = compilePs(-1, "aggregate");
  auto core = serverOf(c, 0, /*timeout=*/0.3);
  ASSERT_TRUE(core);
  const int32_t id = core->shards()[0];
  const size_t n = core->shardBytes(id) / 4;
  uint64_t inc = 0;
  ASSERT_EQ(*core->join(0, inc), 0);
  ASSERT_EQ(*core->join(1, inc), 0);
  int64_t version = -1, next = 0;
  bool ready = false;
  std::vector<ShardBytes> values;
  ASSERT_TRUE(core->push(0, 0, 0.5f, {filled(id, n, 1)}, version, next).isOk());
  EXPECT_EQ(version, 0); // held: 1 of 2 pushes
  EXPECT_EQ(next, 1);
  ASSERT_TRUE(core->pull(0, 1, std::chrono::milliseconds(0), ready, values, version).isOk());
  ASSERT_TRUE(ready); // asynchronous: worker 0 does not wait for worker 1
  EXPECT_FLOAT_EQ(first(values), 1.0f);
  ASSERT_TRUE(core->push(0, 1, 0.5f, {filled(id, n, 3)}, version, next).isOk());
  EXPECT_EQ(version, 1); // worker 0's two pushes make one step
  ASSERT_TRUE(core->pull(0, 2, std::chrono::milliseconds(0), ready, values, version).isOk());
  EXPECT_FLOAT_EQ(first(values), 1.0f - 0.5f * 2.0f); // w - lr * mean(1, 3): not scaled by 1/W
  ASSERT_TRUE(core->push(1, 0, 0.5f, {filled(id, n, 5)}, version, next).isOk());
  EXPECT_EQ(version, 1);
  // Worker 1 goes silent (worker 0 keeps beating): its push is applied alone once it is lost.
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(110));
    ASSERT_TRUE(core->heartbeat(0, false).isOk());
  }
  core->checkLiveness();
  EXPECT_EQ(core->workerState(1), "lost");
  EXPECT_EQ(core->version(), 2);
  // One live worker: each of its pushes is a step.
  ASSERT_TRUE(core->push(0, 2, 0.5f, {filled(id, n, 2)}, version, next).isOk());
  EXPECT_EQ(version, 3);
  ASSERT_TRUE(core->pull(0, 3, std::chrono::milliseconds(0), ready, values, version).isOk());
  EXPECT_FLOAT_EQ(first(values), 0.0f - 0.5f * 5.0f - 0.5f * 2.0f);
  // Worker 1 is back: two live workers again, its push is held until worker 0 finishes.
  ASSERT_TRUE(core->push(1, 1, 0.5f, {filled(id, n, 4)}, version, next).isOk());
  EXPECT_EQ(version, 3);
  ASSERT_TRUE(core->heartbeat(0, /*done=*/true).isOk());
  EXPECT_EQ(core->version(), 4);
  ASSERT_TRUE(core->pull(1, 2, std::chrono::milliseconds(0), ready, values, version).isOk());
  EXPECT_FLOAT_EQ(first(values), -3.5f - 0.5f * 4.0f);
}

// A held aggregate survives a server restart from its checkpoint.
TEST(ServerCore, AsynchronousAggregateCheckpoint) {
  Compiled c = compilePs(-1, "aggregate");
  const std::string dir = c.dir + "/ckpt";
  std::filesystem::remove_all(dir);
  int64_t version = 0, next = 0;
  bool restored = true;
  {
    auto core = serverOf(c, 0, 10);
    ASSERT_TRUE(core);
    ASSERT_TRUE(core->enableCheckpoints(dir, "fp", restored).isOk());
    EXPECT_FALSE(restored);
    const int32_t id = core->shards()[0];
    ASSERT_TRUE(
        core->push(0, 0, 0.5f, {filled(id, core->shardBytes(id) / 4, 1)}, version, next).isOk());
    EXPECT_EQ(version, 0);
  }
  auto core = serverOf(c, 0, 10);
  ASSERT_TRUE(core);
  ASSERT_TRUE(core->enableCheckpoints(dir, "fp", restored).isOk());
  EXPECT_TRUE(restored);
  const int32_t id = core->shards()[0];
  ASSERT_TRUE(
      core->push(1, 0, 0.5f, {filled(id, core->shardBytes(id) / 4, 3)}, version, next).isOk());
  EXPECT_EQ(version, 1);
  bool ready = false;
  std::vector<ShardBytes> values;
  ASSERT_TRUE(core->pull(0, 1, std::chrono::milliseconds(0), ready, values, version).isOk());
  EXPECT_FLOAT_EQ(first(values), 1.0f - 0.5f * 2.0f);
}

// Asynchronous, staleness-lr: each push one SGD step on its unscaled gradient at lr / max(1,
// updates since the worker's pull) (w starts at 1, lr 0.5).
TEST(ServerCore, AsynchronousStalenessLr) {
  Compiled c = compilePs(-1, "staleness-lr");
  auto core = serverOf(c, 0, 10);
  ASSERT_TRUE(core);
  const int32_t id = core->shards()[0];
  const size_t n = core->shardBytes(id) / 4;
  int64_t version = 0, next = 0;
  bool ready = false;
  std::vector<ShardBytes> values;
  for (int w = 0; w < 2; ++w)
    ASSERT_TRUE(core->pull(w, 0, std::chrono::milliseconds(0), ready, values, version).isOk());
  ASSERT_TRUE(core->push(0, 0, 0.5f, {filled(id, n, 2)}, version, next).isOk());
  EXPECT_EQ(version, 1); // staleness 0: lr 0.5, w = 1 - 0.5 * 2
  ASSERT_TRUE(core->pull(0, 1, std::chrono::milliseconds(0), ready, values, version).isOk());
  EXPECT_FLOAT_EQ(first(values), 0.0f);
  ASSERT_TRUE(core->push(0, 1, 0.5f, {filled(id, n, 2)}, version, next).isOk());
  EXPECT_EQ(version, 2); // staleness 0 again: w = 0 - 0.5 * 2
  // Worker 1 pulled at version 0: two updates since, lr / 2.
  ASSERT_TRUE(core->push(1, 0, 0.5f, {filled(id, n, 4)}, version, next).isOk());
  EXPECT_EQ(version, 3);
  ASSERT_TRUE(core->pull(1, 1, std::chrono::milliseconds(0), ready, values, version).isOk());
  EXPECT_FLOAT_EQ(first(values), -1.0f - 0.25f * 4.0f);
}

} // namespace
} // namespace dtc::rt::ps
