// Training plans: the training passes on a small model, then lowerTraining: buffer kinds,
// state updates in place (optimizer) or by a Copy right after their producer (BatchNorm running
// statistics), gradients kept readable, the Training message, and validation of hostile edits.
#include "compiler/driver/TrainConfig.h"
#include "compiler/plan/Lowering.h"
#include "passes/Passes.h"
#include "tests/unit/ops/TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>

namespace dtc::plan {
namespace {

// x -> MatMul(w) -> BatchNormalization -> Relu -> logits (N, 3).
const char *kModel = R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[N,4] x) => (float[N,3] y)
<float[4,3] w = {1,0,0, 0,1,0, 0,0,1, 1,1,1}, float[3] s = {1,1,1}, float[3] b = {0,0,0},
 float[3] m = {0,0,0}, float[3] v = {1,1,1}>
{
  h = MatMul (x, w)
  n = BatchNormalization <epsilon = 0.00001, momentum = 0.9> (h, s, b, m, v)
  y = Relu (n)
}
)";

struct Lowered {
  std::unique_ptr<ir::Graph> graph;
  Expected<Plan> plan = Status::error("not lowered");
};

Lowered lowerText(const char *text, TrainingConfig cfg) {
  Lowered out;
  auto g = test::compileText(text, {"canonicalize"});
  if (!g) {
    out.plan = g.status();
    return out;
  }
  out.graph = std::move(*g);
  Diagnostics diags;
  LowerOptions opts;
  opts.batchSize = cfg.rankBatchSize();
  if (Status s = passes::bindDims(*out.graph, opts.dims, opts.batchSize, diags); !s.isOk()) {
    out.plan = s;
    return out;
  }
  if (Status s = driver::runTrainingPasses(*out.graph, cfg, diags, true); !s.isOk()) {
    out.plan = s;
    return out;
  }
  out.plan = lowerTraining(*out.graph, cfg, opts);
  return out;
}

int bufferIndex(const RankProgram &rp, const std::string &name) {
  for (int i = 0; i < rp.buffers_size(); ++i)
    if (rp.buffers(i).name() == name)
      return i;
  ADD_FAILURE() << "no buffer " << name;
  return -1;
}

TrainingConfig adamConfig() {
  TrainingConfig cfg;
  cfg.loss = "softmax-cross-entropy";
  cfg.optimizer = "adam";
  cfg.lr = 1e-3f;
  cfg.batchSize = 4;
  return cfg;
}

TEST(TrainingLowering, BuffersStateUpdatesAndTrainingSection) {
  Lowered l = lowerText(kModel, adamConfig());
  ASSERT_TRUE(l.plan) << l.plan.status().message();
  const Plan &plan = *l.plan;
  EXPECT_EQ(plan.mode(), MODE_TRAINING);
  const RankProgram &rp = plan.programs(0);
  const Training &t = plan.programs(0).training();
  EXPECT_EQ(t.label_input(), "label");
  EXPECT_EQ(t.prediction_output(), "y");
  EXPECT_EQ(t.lr_input(), "dtc::lr");
  EXPECT_EQ(t.step_input(), "dtc::step");
  EXPECT_EQ(plan.hyperparameters().optimizer(), "adam");
  EXPECT_EQ(plan.hyperparameters().batch_size(), 4);
  ASSERT_EQ(plan.programs(0).data_bindings_size(),
            2); // x and label; the runtime inputs are not data
  // Trained: w, s, b (not the running statistics m, v).
  std::vector<std::string> trained;
  for (const TrainedParameter &p : t.parameters()) {
    trained.push_back(p.name());
    EXPECT_EQ(rp.buffers(p.buffer()).kind(), BUFFER_PARAMETER);
    EXPECT_EQ(rp.buffers(p.gradient()).kind(), BUFFER_GRADIENT);
    EXPECT_EQ(rp.buffers(p.gradient()).source(), p.name());
    ASSERT_EQ(p.state_size(), 2); // Adam's exp_avg, exp_avg_sq
    for (int32_t s : p.state())
      EXPECT_EQ(rp.buffers(s).kind(), BUFFER_OPTIMIZER_STATE);
  }
  EXPECT_EQ(trained, (std::vector<std::string>{"w", "s", "b"}));
  ASSERT_EQ(t.state_buffers_size(), 2);
  EXPECT_EQ(rp.buffers(t.state_buffers(0)).name(), "m");
  EXPECT_EQ(rp.buffers(t.state_buffers(1)).name(), "v");
  // The running statistics are copied right after the BatchNormTraining instruction.
  int bnAt = -1;
  for (int i = 0; i < rp.instructions_size(); ++i)
    if (rp.instructions(i).has_kernel() && rp.instructions(i).kernel().op() == "BatchNormTraining")
      bnAt = i;
  ASSERT_GE(bnAt, 0);
  ASSERT_TRUE(rp.instructions(bnAt + 1).has_copy());
  ASSERT_TRUE(rp.instructions(bnAt + 2).has_copy());
  EXPECT_EQ(rp.instructions(bnAt + 1).copy().dst(), bufferIndex(rp, "m"));
  EXPECT_EQ(rp.instructions(bnAt + 2).copy().dst(), bufferIndex(rp, "v"));
  // Adam writes the new parameter and state in place.
  const int optBegin = t.optimizer_begin();
  ASSERT_GT(optBegin, bnAt);
  const KernelCall &adam = rp.instructions(optBegin).kernel();
  EXPECT_EQ(adam.op(), "Adam");
  EXPECT_EQ(rp.buffers(adam.outputs(0)).offset(), rp.buffers(adam.inputs(0)).offset());
  // Gradients are not reused: no other buffer defined after a gradient overlaps it.
  for (const TrainedParameter &p : t.parameters()) {
    const Buffer &g = rp.buffers(p.gradient());
    for (int i = 0; i < rp.buffers_size(); ++i) {
      const Buffer &o = rp.buffers(i);
      if (i == p.gradient() || o.kind() == BUFFER_PARAMETER || o.kind() == BUFFER_OPTIMIZER_STATE)
        continue;
      const bool overlap =
          o.offset() < g.offset() + g.size_bytes() && g.offset() < o.offset() + o.size_bytes();
      if (!overlap)
        continue;
      // Only values dead before the gradient is computed (or views of it) may share its bytes.
      int defG = -1, defO = -1;
      for (int k = 0; k < rp.instructions_size(); ++k)
        if (rp.instructions(k).has_kernel())
          for (int32_t out : rp.instructions(k).kernel().outputs()) {
            if (out == p.gradient())
              defG = k;
            if (out == i)
              defO = k;
          }
      EXPECT_LE(defO, defG) << o.name() << " overwrites the gradient of " << p.name();
    }
  }
  EXPECT_TRUE(validatePlan(plan, "test").isOk());
}

TEST(TrainingLowering, ValidationRejectsBadTrainingSections) {
  Lowered l = lowerText(kModel, adamConfig());
  ASSERT_TRUE(l.plan) << l.plan.status().message();
  {
    Plan p = *l.plan;
    p.mutable_programs(0)->mutable_training()->mutable_parameters(0)->set_gradient(100000);
    EXPECT_EQ(validatePlan(p, "x").message(),
              "plan x: program 0: training: parameter 'w': buffer or gradient index out of range");
  }
  {
    Plan p = *l.plan;
    p.mutable_programs(0)->mutable_training()->set_loss_output("nope");
    EXPECT_EQ(validatePlan(p, "x").message(),
              "plan x: program 0: training: loss output 'nope' is not a f32 output binding");
  }
  {
    Plan p = *l.plan;
    p.mutable_programs(0)->mutable_training()->set_optimizer_begin(-7);
    EXPECT_NE(validatePlan(p, "x").message().find("optimizer_begin -7"), std::string::npos);
  }
  {
    Plan p = *l.plan;
    p.mutable_hyperparameters()->set_grad_accum_steps(0);
    EXPECT_EQ(validatePlan(p, "x").message(),
              "plan x: training: grad_accum_steps 0 is not in [1, 1048576]");
  }
  {
    Plan p = *l.plan;
    p.mutable_programs(0)->clear_training();
    EXPECT_EQ(validatePlan(p, "x").message(),
              "plan x: program 0: training: a training plan needs its training section");
  }
}

TEST(TrainingLowering, SgdWithoutMomentumHasNoStateAndFrozenParametersAreNotTrained) {
  TrainingConfig cfg = adamConfig();
  cfg.optimizer = "sgd";
  cfg.freeze = "^w$";
  Lowered l = lowerText(kModel, cfg);
  ASSERT_TRUE(l.plan) << l.plan.status().message();
  std::vector<std::string> trained;
  for (const TrainedParameter &p : l.plan->programs(0).training().parameters()) {
    trained.push_back(p.name());
    EXPECT_EQ(p.state_size(), 0);
  }
  EXPECT_EQ(trained, (std::vector<std::string>{"s", "b"}));
}

TEST(TrainingLowering, LossErrorsNameTheOutputAndTheLoss) {
  TrainingConfig cfg = adamConfig();
  cfg.loss = "model";
  Lowered l = lowerText(kModel, cfg);
  ASSERT_FALSE(l.plan);
  EXPECT_EQ(l.plan.status().message(),
            "loss 'model' on output 'y': with --loss model the output must hold one element (the "
            "loss), got f32[4,3]");
  cfg.loss = "softmax-cross-entropy";
  cfg.classAxis = 2;
  l = lowerText(kModel, cfg);
  ASSERT_FALSE(l.plan);
  EXPECT_EQ(l.plan.status().message(), "--class-axis 2: must name a non-batch axis of f32[4,3]");
}

// Data parallelism: x -> MatMul(w1) + b1 -> Relu -> MatMul(w2) -> BatchNormalization -> y.
const char *kDpModel = R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[N,4] x) => (float[N,3] y)
<float[4,8] w1 = {1,0,0,0,0,0,0,0, 0,1,0,0,0,0,0,0, 0,0,1,0,0,0,0,0, 0,0,0,1,0,0,0,0},
 float[8] b1 = {0,0,0,0,0,0,0,0},
 float[8,3] w2 = {1,0,0, 0,1,0, 0,0,1, 1,1,1, 1,0,0, 0,1,0, 0,0,1, 1,1,1},
 float[3] s = {1,1,1}, float[3] b = {0,0,0}, float[3] m = {0,0,0}, float[3] v = {1,1,1}>
{
  h = MatMul (x, w1)
  hb = Add (h, b1)
  r = Relu (hb)
  z = MatMul (r, w2)
  y = BatchNormalization <epsilon = 0.00001, momentum = 0.9> (z, s, b, m, v)
}
)";

TrainingConfig dpConfig(int64_t ranks, float bucketMb) {
  TrainingConfig cfg = adamConfig();
  cfg.batchSize = 8;
  cfg.mesh = *parseMesh("dp=" + std::to_string(ranks));
  cfg.bucketMb = bucketMb;
  return cfg;
}

std::vector<int> collectivesOf(const RankProgram &rp) {
  std::vector<int> out;
  for (int i = 0; i < rp.instructions_size(); ++i)
    if (rp.instructions(i).has_collective())
      out.push_back(i);
  return out;
}

TEST(DataParallelLowering, OneBucketPerGradientWithWaitsBeforeTheOptimizer) {
  Lowered l = lowerText(kDpModel, dpConfig(2, 1e-6f));
  ASSERT_TRUE(l.plan) << l.plan.status().message();
  const Plan &plan = *l.plan;
  EXPECT_EQ(plan.world_size(), 2);
  ASSERT_EQ(plan.ranks_size(), 2);
  ASSERT_EQ(plan.groups_size(), 1);
  EXPECT_EQ(plan.groups(0).axis(), "dp");
  EXPECT_EQ(plan.groups(0).ranks_size(), 2);
  EXPECT_EQ(plan.hyperparameters().batch_size(), 8); // global
  EXPECT_EQ(plan.bound_dims().at("N"), 4);           // per rank
  EXPECT_EQ(plan.ranks(1).rank(), 1);
  EXPECT_EQ(plan.programs_size(), 1); // both ranks run the one program
  EXPECT_EQ(plan.ranks(1).program(), 0);
  const RankProgram &rp = plan.programs(0);
  const Training &t = plan.programs(0).training();
  const std::vector<int> cols = collectivesOf(rp);
  ASSERT_EQ(cols.size(), static_cast<size_t>(t.parameters_size())); // w1, b1, w2, s, b
  EXPECT_EQ(t.parameters_size(), 5);
  std::set<int32_t> reducedOutputs;
  for (int c : cols) {
    const Collective &col = rp.instructions(c).collective();
    EXPECT_EQ(col.kind(), COLLECTIVE_ALL_REDUCE);
    EXPECT_EQ(col.op(), REDUCE_MEAN);
    EXPECT_EQ(col.group(), "dp");
    ASSERT_EQ(col.inputs_size(), 1);
    reducedOutputs.insert(col.outputs(0));
    // Launched right after the instruction producing its gradient.
    ASSERT_GT(c, 0);
    bool producedBefore = false;
    for (int k = c - 1; k >= 0 && !producedBefore; --k) {
      const Instruction &ins = rp.instructions(k);
      if (ins.has_kernel())
        for (int32_t o : ins.kernel().outputs())
          producedBefore = producedBefore || o == col.inputs(0);
    }
    EXPECT_TRUE(producedBefore) << "bucket " << col.name();
    // Exactly one wait, inside the micro-batch part.
    int waits = 0;
    for (int i = 0; i < rp.instructions_size(); ++i)
      if (rp.instructions(i).has_wait() && rp.instructions(i).wait().collective() == c) {
        ++waits;
        EXPECT_GT(i, c);
        EXPECT_LT(i, t.optimizer_begin());
      }
    EXPECT_EQ(waits, 1);
  }
  // The optimizer reads the reduced gradients, which the plan reports as the gradients.
  for (const TrainedParameter &p : t.parameters())
    EXPECT_TRUE(reducedOutputs.count(p.gradient())) << p.name();
  // The first bucket holds the last layer's gradient (BatchNorm's scale, ready first), and its
  // launch comes before the backward of the layers below it.
  const int32_t first = rp.instructions(cols[0]).collective().inputs(0);
  for (int i = 0; i < cols[0]; ++i)
    if (rp.instructions(i).has_kernel())
      for (int32_t o : rp.instructions(i).kernel().outputs())
        if (o == first) {
          EXPECT_EQ(rp.instructions(i).kernel().op(), "BatchNormGrad");
        }
  int matMulsAfter = 0;
  for (int i = cols[0]; i < t.optimizer_begin(); ++i)
    matMulsAfter +=
        rp.instructions(i).has_kernel() && rp.instructions(i).kernel().op() == "MatMulT";
  EXPECT_EQ(matMulsAfter, 3);
  EXPECT_TRUE(validatePlan(plan, "").isOk());
}

TEST(DataParallelLowering, DefaultBucketIsOneBackToBackAllReduce) {
  Lowered l = lowerText(kDpModel, dpConfig(4, 25.0f));
  ASSERT_TRUE(l.plan) << l.plan.status().message();
  const RankProgram &rp = l.plan->programs(0);
  EXPECT_EQ(l.plan->world_size(), 4);
  const std::vector<int> cols = collectivesOf(rp);
  ASSERT_EQ(cols.size(), 1u);
  const Collective &col = rp.instructions(cols[0]).collective();
  ASSERT_EQ(col.outputs_size(), 5);
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (int32_t o : col.outputs())
    spans.push_back({rp.buffers(o).offset(), rp.buffers(o).size_bytes()});
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i)
    EXPECT_EQ(spans[i].first, spans[i - 1].first + (spans[i - 1].second + 63) / 64 * 64)
        << "bucket outputs are not back to back";
  // The all-reduce comes after the last gradient's producer: nothing after it writes a gradient.
  for (int i = cols[0] + 1; i < l.plan->programs(0).training().optimizer_begin(); ++i) {
    if (!rp.instructions(i).has_kernel())
      continue;
    for (int32_t o : rp.instructions(i).kernel().outputs())
      for (int32_t in : col.inputs()) {
        EXPECT_NE(o, in);
      }
  }
}

TEST(DataParallelLowering, SyncBatchNormMarksTheBatchNormNodes) {
  TrainingConfig cfg = dpConfig(2, 25.0f);
  cfg.syncBatchNorm = true;
  Lowered l = lowerText(kDpModel, cfg);
  ASSERT_TRUE(l.plan) << l.plan.status().message();
  int marked = 0;
  for (const Instruction &ins : l.plan->programs(0).instructions())
    if (ins.has_kernel() &&
        (ins.kernel().op() == "BatchNormTraining" || ins.kernel().op() == "BatchNormGrad"))
      for (const Attr &a : ins.kernel().attributes())
        marked += a.name() == "sync" && a.i() == 1;
  EXPECT_EQ(marked, 2);
  EXPECT_TRUE(l.plan->hyperparameters().sync_batchnorm());
}

TEST(DataParallelLowering, GradientAccumulationKeepsValidPlans) {
  TrainingConfig cfg = dpConfig(2, 1e-6f);
  cfg.gradAccumSteps = 2;
  Lowered l = lowerText(kDpModel, cfg);
  ASSERT_TRUE(l.plan) << l.plan.status().message();
  // The accumulated gradients are reduced once per step, in the optimizer part (DDP's
  // no_sync() for all micro-batches but the last), not after every micro-batch.
  const std::vector<int> cols = collectivesOf(l.plan->programs(0));
  EXPECT_EQ(cols.size(), 5u);
  for (int c : cols)
    EXPECT_GE(c, l.plan->programs(0).training().optimizer_begin());
  EXPECT_TRUE(validatePlan(*l.plan, "").isOk());
}

TEST(DataParallelLowering, ValidationRefusesUnwaitedAndMisdirectedWaits) {
  Lowered l = lowerText(kDpModel, dpConfig(2, 25.0f));
  ASSERT_TRUE(l.plan) << l.plan.status().message();
  Plan noWait = *l.plan;
  for (RankProgram &rp : *noWait.mutable_programs()) {
    auto *ins = rp.mutable_instructions();
    for (int i = 0; i < ins->size(); ++i)
      if (ins->Get(i).has_wait()) {
        ins->DeleteSubrange(i, 1);
        break;
      }
  }
  Status s = validatePlan(noWait, "");
  EXPECT_NE(s.message().find("is never waited for"), std::string::npos) << s.message();
  Plan badWait = *l.plan;
  for (RankProgram &rp : *badWait.mutable_programs())
    for (Instruction &ins : *rp.mutable_instructions())
      if (ins.has_wait())
        ins.mutable_wait()->set_collective(0);
  s = validatePlan(badWait, "");
  EXPECT_NE(s.message().find("is not a collective before it"), std::string::npos) << s.message();
}

TEST(DataParallelLowering, OneValuePerChannelNeedsSyncBatchNorm) {
  TrainingConfig cfg = dpConfig(2, 25.0f);
  cfg.batchSize = 2; // one sample per rank, BatchNormalization over (N, 3)
  Lowered l = lowerText(kDpModel, cfg);
  ASSERT_FALSE(l.plan);
  EXPECT_NE(l.plan.status().message().find("has 1 value per channel"), std::string::npos)
      << l.plan.status().message();
  EXPECT_NE(l.plan.status().message().find("--sync-batchnorm"), std::string::npos);
  cfg.syncBatchNorm = true; // statistics over both ranks: 2 values per channel
  Lowered synced = lowerText(kDpModel, cfg);
  EXPECT_TRUE(synced.plan) << synced.plan.status().message();
}

TEST(DataParallelConfig, StrategyAndBatchErrors) {
  TrainingConfig cfg = adamConfig();
  EXPECT_TRUE(driver::parseStrategy("dp=4", cfg).isOk());
  EXPECT_EQ(cfg.dataParallel(), 4);
  EXPECT_TRUE(driver::parseStrategy("single", cfg).isOk());
  EXPECT_EQ(cfg.dataParallel(), 0);
  for (const char *bad :
       {"dp=0", "dp=", "dp=2x", "dp=-1", "pp=0", "dp=100000", "tp=0", "dp=2,dp=2", "xx=1"}) {
    Status s = driver::parseStrategy(bad, cfg);
    EXPECT_FALSE(s.isOk()) << bad;
    EXPECT_NE(s.message().find("--strategy"), std::string::npos) << s.message();
  }
  cfg.mesh = *parseMesh("dp=3");
  cfg.batchSize = 8;
  Status s = driver::validateTrainConfig(cfg);
  EXPECT_NE(s.message().find("does not split evenly over dp=3"), std::string::npos) << s.message();
  cfg.mesh = Mesh{};
  cfg.syncBatchNorm = true;
  EXPECT_NE(driver::validateTrainConfig(cfg).message().find("--sync-batchnorm"), std::string::npos);
}

// --- compacted pipeline programs (plan format 4) ---

// x -> MatMul -> Relu -> MatMul -> Relu -> MatMul: enough layers for two pipeline stages.
const char *kDeepModel = R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[N,4] x) => (float[N,3] y)
<float[4,4] w1 = {1,0,0,0, 0,1,0,0, 0,0,1,0, 0,0,0,1}, float[4,4] w2 = {1,1,0,0, 0,1,1,0, 0,0,1,1,
 1,0,0,1}, float[4,3] w3 = {1,0,0, 0,1,0, 0,0,1, 1,1,1}>
{
  h1 = MatMul (x, w1)
  r1 = Relu (h1)
  h2 = MatMul (r1, w2)
  r2 = Relu (h2)
  y = MatMul (r2, w3)
}
)";

Plan pipelinePlan(const std::string &strategy, int64_t batch) {
  TrainingConfig cfg = adamConfig();
  cfg.batchSize = batch;
  EXPECT_TRUE(driver::parseStrategy(strategy, cfg).isOk());
  Lowered l = lowerText(kDeepModel, cfg);
  EXPECT_TRUE(l.plan) << l.plan.status().message();
  return l.plan ? *l.plan : Plan();
}

// Every schedule's slots for micro-batches 2.. repeat slot 1's: the compacted plan is smaller,
// its size grows less than the unrolled one with the micro-batches, and the file reads back as
// exactly the program lowering produced (same fingerprint).
TEST(PlanCompaction, PipelineSlotsRepeatAndReadBackExactly) {
  for (const char *schedule : {"gpipe", "1f1b", "zb-h1", "interleaved,virtual-stages=2"}) {
    SCOPED_TRACE(schedule);
    size_t unrolled[2], compacted[2];
    for (int i = 0; i < 2; ++i) {
      const int64_t M = i == 0 ? 4 : 16;
      Plan plan =
          pipelinePlan("pp=2,microbatches=" + std::to_string(M) + ",schedule=" + schedule, M * 2);
      ASSERT_GT(plan.programs_size(), 0);
      Plan c = plan;
      ASSERT_TRUE(compactPlan(c));
      EXPECT_EQ(c.format_version(), kCompactPlanFormatVersion);
      int repeated = 0;
      for (const RankProgram &p : c.programs())
        repeated += p.repeated_slots_size();
      EXPECT_GE(repeated, static_cast<int>(2 * (M - 2)));
      unrolled[i] = plan.ByteSizeLong();
      compacted[i] = c.ByteSizeLong();
      EXPECT_LT(compacted[i], unrolled[i]);
      auto back = parsePlan(c.SerializeAsString(), "c.dtc");
      ASSERT_TRUE(back) << back.status().message();
      EXPECT_EQ(back->SerializeAsString(), plan.SerializeAsString());
      EXPECT_EQ(fingerprint(*back), fingerprint(plan));
      EXPECT_TRUE(validatePlan(*back, "c.dtc").isOk());
      // Each rank as it reads the file: its own program expanded, the others' buffers (derived
      // ones rebuilt) without instructions; the file's fingerprint is the plan's.
      auto file = splitPlan(c.SerializeAsString(), "c.dtc");
      ASSERT_TRUE(file) << file.status().message();
      EXPECT_EQ(fingerprint(*file), fingerprint(plan));
      for (int rank = 0; rank < plan.world_size(); ++rank) {
        auto r = planForRank(*file, rank, "c.dtc");
        ASSERT_TRUE(r) << r.status().message();
        ASSERT_EQ(r->programs_size(), plan.programs_size());
        for (int p = 0; p < plan.programs_size(); ++p) {
          RankProgram want = plan.programs(p);
          if (p != plan.ranks(rank).program()) {
            want.clear_instructions();
            want.set_summary(true);
          }
          EXPECT_EQ(r->programs(p).SerializeAsString(), want.SerializeAsString()) << p;
        }
        EXPECT_TRUE(validatePlan(*r, "c.dtc").isOk());
      }
    }
    // 12 more micro-batches: the compacted plan grows by well under half of what the unrolled
    // one grows by.
    EXPECT_LT(compacted[1] - compacted[0], (unrolled[1] - unrolled[0]) / 2);
  }
}

// Hostile compaction records are errors naming the program, never out-of-range reads.
TEST(PlanCompaction, BadRecordsAreErrors) {
  Plan c = pipelinePlan("pp=2,microbatches=4,schedule=gpipe", 8);
  ASSERT_TRUE(compactPlan(c));
  int prog = 0;
  while (c.programs(prog).repeated_slots_size() == 0 ||
         c.programs(prog).derived_buffers().index_size() == 0)
    ++prog;
  auto reject = [&](const std::function<void(Plan &)> &edit, const std::string &want) {
    Plan bad = c;
    edit(bad);
    auto r = parsePlan(bad.SerializeAsString(), "bad.dtc");
    ASSERT_FALSE(r) << want;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().rfind("bad.dtc: program " + std::to_string(prog), 0), 0u)
        << r.status().message();
  };
  auto prog0 = [&](Plan &p) { return p.mutable_programs(prog); };
  reject([&](Plan &p) { prog0(p)->mutable_repeated_slots(0)->set_like(99); },
         "not an earlier slot");
  reject(
      [&](Plan &p) {
        RepeatedSlot *r = prog0(p)->mutable_repeated_slots(0);
        r->set_like(r->slot());
      },
      "not an earlier slot");
  reject([&](Plan &p) { prog0(p)->mutable_repeated_slots(0)->add_from(1); },
         "buffer lists differ in length");
  reject([&](Plan &p) { *prog0(p)->add_repeated_slots() = prog0(p)->repeated_slots(0); },
         "repeated twice");
  reject([&](Plan &p) { prog0(p)->mutable_derived_buffers()->set_index(0, 1 << 30); },
         "derived buffer indices not ascending or out of range");
  reject([&](Plan &p) { prog0(p)->mutable_derived_buffers()->add_like(0); },
         "derived buffers' lists differ in length");
  reject(
      [&](Plan &p) {
        DerivedBuffers *d = prog0(p)->mutable_derived_buffers();
        d->set_like(0, d->index(0));
      },
      "which is not a stored buffer");
  reject(
      [&](Plan &p) {
        RankProgram *r = prog0(p);
        r->mutable_schedule(r->schedule_size() - 1)->set_first_instruction(1 << 30);
      },
      "compacted program: "); // too few stored instructions, or a repeat cut short
  reject([&](Plan &p) { prog0(p)->mutable_schedule(1)->set_first_instruction(-1); },
         "schedule slots out of order");
  reject([&](Plan &p) { p.set_format_version(kPlanFormatVersion); },
         "is compacted, which plan format version 3 does not allow");
}

} // namespace
} // namespace dtc::plan
