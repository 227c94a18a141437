// The training loop on a hand-made plan (TrainingTestUtil.h): values of the first steps against
// a reference computed here, gradient accumulation, validation leaving parameters unchanged,
// bit-identical resume, checkpoint errors, the log, --export and --dump-gradients.
#include "TrainingTestUtil.h"

#include "compiler/onnx/ModelFile.h"
#include "runtime/Checkpoint.h"
#include "runtime/DataLoader.h"
#include "runtime/Trainer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <fstream>

namespace dtc::rt::test {
namespace {

struct Fixture {
  TempDir dir;
  plan::Plan plan;
  std::vector<float> wTrue = {1.0f, 2.0f, -1.0f};
  explicit Fixture(int64_t samples = 16, RegressionConfig cfg = {}) {
    plan = makeRegressionPlan(dir.path.string(), cfg);
    writeRegressionData(dir / "train.npz", samples, cfg.features, wTrue);
    writeRegressionData(dir / "val.npz", 8, cfg.features, wTrue, 7);
  }
  TrainOptions options() const {
    TrainOptions o;
    o.planPath = dir / "plan.dtc";
    o.dataPath = dir / "train.npz";
    o.progress = nullptr;
    o.threads = 1;
    return o;
  }
  std::vector<float> param(const std::string &npz, const std::string &name = "w") const {
    auto arrays = readArrays(npz);
    EXPECT_TRUE(arrays.hasValue()) << arrays.status().message();
    for (const HostArray &a : *arrays)
      if (a.name == name)
        return values(a);
    ADD_FAILURE() << "no array " << name << " in " << npz;
    return {};
  }
  std::string bytes(const std::string &npz, const std::string &name = "w") const {
    auto arrays = readArrays(npz);
    if (arrays)
      for (const HostArray &a : *arrays)
        if (a.name == name)
          return a.bytes;
    return "";
  }
};

/// Reference SGD with momentum on the data in file order (no shuffle), float arithmetic in
/// double: returns w after `steps` steps and the last step's gradient.
void reference(const std::string &data, int64_t batch, int64_t accum, int64_t steps, float lr,
               float momentum, std::vector<double> &w, std::vector<double> &lastGrad) {
  auto arrays = *readArrays(data);
  std::vector<float> x = values(arrays[0].name == "x" ? arrays[0] : arrays[1]);
  std::vector<float> y = values(arrays[0].name == "x" ? arrays[1] : arrays[0]);
  const size_t F = w.size();
  const int64_t n = static_cast<int64_t>(y.size());
  const int64_t perEpoch = n / (batch * accum);
  std::vector<double> m(F, 0.0);
  for (int64_t s = 0; s < steps; ++s) {
    std::vector<double> g(F, 0.0);
    for (int64_t k = 0; k < accum; ++k) {
      const int64_t first = ((s % perEpoch) * accum + k) * batch;
      for (int64_t b = 0; b < batch; ++b) {
        double pred = 0;
        for (size_t f = 0; f < F; ++f)
          pred += x[(first + b) * F + f] * w[f];
        const double d = pred - y[first + b];
        for (size_t f = 0; f < F; ++f)
          g[f] += 2.0 / batch * d * x[(first + b) * F + f] / accum;
      }
    }
    for (size_t f = 0; f < F; ++f) {
      m[f] = momentum * m[f] + g[f];
      w[f] -= lr * m[f];
    }
    lastGrad = g;
  }
}

TEST(TrainerTest, MatchesReferenceSgdMomentum) {
  Fixture fx;
  TrainOptions o = fx.options();
  o.shuffle = false;
  o.steps = 6; // 4 steps per epoch: crosses an epoch boundary
  o.saveParamsPath = fx.dir / "params.npz";
  o.dumpGradientsPath = fx.dir / "grads.npz";
  ASSERT_TRUE(train(fx.plan, o).isOk()) << train(fx.plan, o).message();
  std::vector<double> w = {0.5, -0.25, 1.0}, g;
  reference(fx.dir / "train.npz", 4, 1, 6, 0.05f, 0.9f, w, g);
  std::vector<float> got = fx.param(o.saveParamsPath);
  std::vector<float> grad = fx.param(o.dumpGradientsPath);
  ASSERT_EQ(got.size(), 3u);
  ASSERT_EQ(grad.size(), 3u);
  for (size_t f = 0; f < 3; ++f) {
    EXPECT_NEAR(got[f], w[f], 1e-5);
    EXPECT_NEAR(grad[f], g[f], 1e-5);
  }
}

TEST(TrainerTest, GradientAccumulationAveragesMicroBatches) {
  RegressionConfig cfg;
  cfg.gradAccumSteps = 2;
  Fixture fx(16, cfg);
  TrainOptions o = fx.options();
  o.shuffle = false;
  o.steps = 3; // 2 steps per epoch (16 samples / (4 x 2))
  o.saveParamsPath = fx.dir / "params.npz";
  o.dumpGradientsPath = fx.dir / "grads.npz";
  o.logPath = fx.dir / "log.jsonl";
  ASSERT_TRUE(train(fx.plan, o).isOk());
  std::vector<double> w = {0.5, -0.25, 1.0}, g;
  reference(fx.dir / "train.npz", 4, 2, 3, 0.05f, 0.9f, w, g);
  std::vector<float> got = fx.param(o.saveParamsPath), grad = fx.param(o.dumpGradientsPath);
  for (size_t f = 0; f < 3; ++f) {
    EXPECT_NEAR(got[f], w[f], 1e-5);
    EXPECT_NEAR(grad[f], g[f], 1e-5);
  }
  // One line per step, one per finished epoch and one for the partial last epoch.
  std::ifstream log(o.logPath);
  std::string line;
  int steps = 0, epochs = 0, partial = 0;
  while (std::getline(log, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["event"] == "step") {
      EXPECT_EQ(j["step"].get<int>(), steps);
      EXPECT_EQ(j["epoch"].get<int>(), steps / 2);
      EXPECT_NEAR(j["lr"].get<double>(), 0.05, 1e-7);
      EXPECT_GT(j["samples_per_s"].get<double>(), 0);
      EXPECT_TRUE(j["loss"].is_number());
      ++steps;
    } else {
      EXPECT_EQ(j["event"], "epoch");
      EXPECT_FALSE(j.contains("train_accuracy")); // regression: no class scores
      partial += j.value("partial", false);
      ++epochs;
    }
  }
  EXPECT_EQ(steps, 3);
  EXPECT_EQ(epochs, 2);
  EXPECT_EQ(partial, 1);
}

TEST(TrainerTest, ValidationLeavesParametersUnchanged) {
  Fixture fx;
  TrainOptions o = fx.options();
  o.epochs = 2;
  o.saveParamsPath = fx.dir / "a.npz";
  ASSERT_TRUE(train(fx.plan, o).isOk());
  o.valDataPath = fx.dir / "val.npz";
  o.saveParamsPath = fx.dir / "b.npz";
  o.logPath = fx.dir / "log.jsonl";
  ASSERT_TRUE(train(fx.plan, o).isOk());
  EXPECT_EQ(fx.bytes(fx.dir / "a.npz"), fx.bytes(fx.dir / "b.npz"));
  // The last epoch's validation loss is the MSE of the final parameters on val.npz.
  std::vector<float> w = fx.param(fx.dir / "b.npz");
  auto val = *readArrays(fx.dir / "val.npz");
  std::vector<float> x = values(val[0].name == "x" ? val[0] : val[1]);
  std::vector<float> y = values(val[0].name == "x" ? val[1] : val[0]);
  double mse = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    double p = 0;
    for (size_t f = 0; f < 3; ++f)
      p += x[i * 3 + f] * w[f];
    mse += (p - y[i]) * (p - y[i]) / y.size();
  }
  std::ifstream log(o.logPath);
  std::string line;
  double lastVal = -1;
  int epochs = 0;
  while (std::getline(log, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["event"] == "epoch") {
      lastVal = j["val_loss"].get<double>();
      ++epochs;
    }
  }
  EXPECT_EQ(epochs, 2);
  EXPECT_NEAR(lastVal, mse, 1e-5);
}

TEST(TrainerTest, ResumeIsBitIdentical) {
  Fixture fx(20); // 5 steps per epoch; checkpoints at 3 land mid-epoch
  TrainOptions straight = fx.options();
  straight.steps = 6;
  straight.seed = 42;
  straight.saveParamsPath = fx.dir / "straight.npz";
  ASSERT_TRUE(train(fx.plan, straight).isOk());

  TrainOptions first = fx.options();
  first.steps = 3;
  first.seed = 42;
  first.checkpointDir = fx.dir / "ckpt";
  first.checkpointEvery = 3;
  ASSERT_TRUE(train(fx.plan, first).isOk());
  // One program: one shard and the manifest naming it.
  EXPECT_TRUE(std::filesystem::exists(fx.dir / "ckpt/ckpt-00000003.manifest.json"));
  EXPECT_TRUE(std::filesystem::exists(fx.dir / "ckpt/ckpt-00000003.shard-0.npz"));

  TrainOptions second = fx.options();
  second.steps = 6;
  second.checkpointDir = fx.dir / "ckpt";
  second.checkpointEvery = 3;
  second.resume = true;
  second.saveParamsPath = fx.dir / "resumed.npz";
  Status s = train(fx.plan, second);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(fx.bytes(fx.dir / "straight.npz"), fx.bytes(fx.dir / "resumed.npz"));
  EXPECT_NE(fx.bytes(fx.dir / "straight.npz"), "");
  // The seed comes from the checkpoint; another explicit one is refused.
  second.seed = 7;
  second.steps = 9;
  s = train(fx.plan, second);
  EXPECT_NE(s.message().find("made with --seed 42, not 7"), std::string::npos) << s.message();
}

TEST(TrainerTest, ResumeErrors) {
  Fixture fx;
  TrainOptions o = fx.options();
  o.steps = 2;
  o.checkpointDir = fx.dir / "missing";
  o.resume = true;
  Status s = train(fx.plan, o);
  EXPECT_NE(s.message().find("missing: checkpoint folder does not exist"), std::string::npos)
      << s.message();

  std::filesystem::create_directories(fx.dir / "empty");
  o.checkpointDir = fx.dir / "empty";
  s = train(fx.plan, o);
  EXPECT_NE(s.message().find("no checkpoint"), std::string::npos) << s.message();

  // A run with checkpoints; then a fresh run into the same folder is refused.
  o.resume = false;
  o.checkpointDir = fx.dir / "ckpt";
  ASSERT_TRUE(train(fx.plan, o).isOk());
  s = train(fx.plan, o);
  EXPECT_NE(s.message().find("holds checkpoints of an earlier run"), std::string::npos);

  // Another plan (different learning rate, so another fingerprint) cannot resume from it.
  plan::Plan other = fx.plan;
  other.mutable_hyperparameters()->set_lr(0.5f);
  o.resume = true;
  o.steps = 4;
  s = train(other, o);
  EXPECT_NE(s.message().find("checkpoint of another plan"), std::string::npos) << s.message();

  // A corrupt shard is an error naming it, never a silent restart.
  const std::string path = fx.dir / "ckpt/ckpt-00000002.shard-0.npz";
  auto arrays = *readArrays(path);
  for (HostArray &a : arrays)
    if (a.name == "w")
      a.bytes[0] ^= 1;
  ASSERT_TRUE(writeNpz(path, arrays).isOk());
  s = train(fx.plan, o);
  EXPECT_EQ(s.message().rfind(path + ": corrupt checkpoint shard: its SHA-256 checksum", 0), 0u)
      << s.message();
  // So is a missing one.
  std::filesystem::remove(path);
  s = train(fx.plan, o);
  EXPECT_EQ(s.message().rfind(path + ": is missing", 0), 0u) << s.message();
}

TEST(TrainerTest, ExportReplacesInitializers) {
  Fixture fx;
  TrainOptions o = fx.options();
  o.steps = 3;
  o.saveParamsPath = fx.dir / "params.npz";
  o.exportPath = fx.dir / "trained.onnx";
  ASSERT_TRUE(train(fx.plan, o).isOk());
  onnx::ModelProto model;
  ASSERT_TRUE(onnxio::readModelFile(o.exportPath, model).isOk());
  ASSERT_EQ(model.graph().initializer_size(), 1);
  const onnx::TensorProto &w = model.graph().initializer(0);
  EXPECT_EQ(w.name(), "w");
  EXPECT_EQ(w.float_data_size(), 0);
  EXPECT_EQ(w.raw_data(), fx.bytes(o.saveParamsPath));
  EXPECT_EQ(model.graph().node_size(), 3); // the graph is unchanged
}

TEST(TrainerTest, DataAndOptionErrors) {
  Fixture fx(3); // fewer samples than one batch
  TrainOptions o = fx.options();
  Status s = train(fx.plan, o);
  EXPECT_NE(s.message().find("train.npz: has 3 samples, fewer than one batch of 4"),
            std::string::npos)
      << s.message();
  o.exportPath = fx.dir / "nowhere/x.onnx";
  s = train(fx.plan, o);
  EXPECT_NE(s.message().find("--export " + (fx.dir / "nowhere/x.onnx") + ": folder"),
            std::string::npos)
      << s.message();
  plan::Plan inference = fx.plan;
  inference.set_mode(plan::MODE_INFERENCE);
  EXPECT_NE(train(inference, fx.options()).message().find("not a training plan"),
            std::string::npos);
  plan::Plan bad = fx.plan;
  bad.mutable_programs(0)->mutable_training()->set_loss_output("nope");
  EXPECT_NE(train(bad, fx.options()).message().find("loss output 'nope' is not an output"),
            std::string::npos);
}

TEST(TrainerTest, CountCorrect) {
  // 2 samples x 3 classes: argmax 1 and 0 (first of equal maxima); labels 1, 2.
  HostArray pred = f32("p", {2, 3}, {0.1f, 0.7f, 0.2f, 0.5f, 0.5f, 0.1f});
  HostArray label;
  label.name = "y";
  label.dtype = ir::DType::kInt64;
  label.shape = {2};
  int64_t l[2] = {1, 2};
  label.bytes.assign(reinterpret_cast<const char *>(l), sizeof l);
  int64_t correct = 0, counted = 0;
  EXPECT_TRUE(countCorrect(pred, label, -100, correct, counted));
  EXPECT_EQ(correct, 1);
  EXPECT_EQ(counted, 2);
  l[1] = -100; // ignored
  label.bytes.assign(reinterpret_cast<const char *>(l), sizeof l);
  correct = counted = 0;
  EXPECT_TRUE(countCorrect(pred, label, -100, correct, counted));
  EXPECT_EQ(correct, 1);
  EXPECT_EQ(counted, 1);
  // Segmentation-shaped: [1, 2, 2] scores (N, C, W) vs [1, 2] labels.
  HostArray seg = f32("p", {1, 2, 2}, {0.9f, 0.1f, 0.2f, 0.8f});
  HostArray segLabel;
  segLabel.dtype = ir::DType::kInt32;
  segLabel.shape = {1, 2};
  int32_t sl[2] = {0, 0};
  segLabel.bytes.assign(reinterpret_cast<const char *>(sl), sizeof sl);
  correct = counted = 0;
  EXPECT_TRUE(countCorrect(seg, segLabel, -100, correct, counted));
  EXPECT_EQ(correct, 1);
  EXPECT_EQ(counted, 2);
  // Regression: prediction shaped like the label.
  EXPECT_FALSE(countCorrect(f32("p", {2}, {1, 2}), f32("y", {2}, {1, 2}), -100, correct, counted));
  // Predicted classes (i64, the labels' shape: a tensor-parallel plan's in-graph argmax) against
  // i32 labels [1, 2] x [3]: 2, 0, 1 | 2, 5, 9 with label 9 ignored.
  HostArray classes;
  classes.dtype = ir::DType::kInt64;
  classes.shape = {2, 3};
  int64_t c[6] = {2, 0, 1, 2, 5, 9};
  classes.bytes.assign(reinterpret_cast<const char *>(c), sizeof c);
  HostArray labels32;
  labels32.dtype = ir::DType::kInt32;
  labels32.shape = {2, 3};
  int32_t y[6] = {2, 1, 1, 0, 5, 9};
  labels32.bytes.assign(reinterpret_cast<const char *>(y), sizeof y);
  correct = counted = 0;
  EXPECT_TRUE(countCorrect(classes, labels32, 9, correct, counted));
  EXPECT_EQ(correct, 3);
  EXPECT_EQ(counted, 5);
  // Classes of another shape than the labels: not counted.
  classes.shape = {6};
  correct = counted = 0;
  EXPECT_FALSE(countCorrect(classes, labels32, 9, correct, counted));
  EXPECT_EQ(counted, 0);
}

} // namespace
} // namespace dtc::rt::test
