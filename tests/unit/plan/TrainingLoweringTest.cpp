// Training plans: the training passes on a small model, then lowerTraining: buffer kinds,
// state updates in place (optimizer) or by a Copy right after their producer (BatchNorm running
// statistics), gradients kept readable, the Training message, and validation of hostile edits.
#include "compiler/driver/TrainConfig.h"
#include "compiler/plan/Lowering.h"
#include "tests/unit/ops/TestUtil.h"

#include <gtest/gtest.h>

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
  passes::TrainingState state;
  Expected<Plan> plan = Status::error("not lowered");
};

Lowered lowerText(const char *text, passes::TrainingConfig cfg) {
  Lowered out;
  auto g = test::compileText(text, {"canonicalize"});
  if (!g) {
    out.plan = g.status();
    return out;
  }
  out.graph = std::move(*g);
  Diagnostics diags;
  LowerOptions opts;
  opts.batchSize = cfg.batchSize;
  if (Status s = bindDims(*out.graph, opts, diags); !s.isOk()) {
    out.plan = s;
    return out;
  }
  if (Status s = driver::runTrainingPasses(*out.graph, cfg, out.state, diags, true); !s.isOk()) {
    out.plan = s;
    return out;
  }
  out.plan = lowerTraining(*out.graph, out.state, cfg, opts);
  return out;
}

int bufferIndex(const RankProgram &rp, const std::string &name) {
  for (int i = 0; i < rp.buffers_size(); ++i)
    if (rp.buffers(i).name() == name)
      return i;
  ADD_FAILURE() << "no buffer " << name;
  return -1;
}

passes::TrainingConfig adamConfig() {
  passes::TrainingConfig cfg;
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
  const RankProgram &rp = plan.ranks(0);
  const Training &t = plan.training();
  EXPECT_EQ(t.label_input(), "label");
  EXPECT_EQ(t.prediction_output(), "y");
  EXPECT_EQ(t.lr_input(), "dtc::lr");
  EXPECT_EQ(t.step_input(), "dtc::step");
  EXPECT_EQ(plan.hyperparameters().optimizer(), "adam");
  EXPECT_EQ(plan.hyperparameters().batch_size(), 4);
  ASSERT_EQ(plan.data_bindings_size(), 2); // x and label; the runtime inputs are not data
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
      const bool overlap = o.offset() < g.offset() + g.size_bytes() &&
                           g.offset() < o.offset() + o.size_bytes();
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
    p.mutable_training()->mutable_parameters(0)->set_gradient(100000);
    EXPECT_EQ(validatePlan(p, "x").message(),
              "plan x: training: parameter 'w': buffer or gradient index out of range");
  }
  {
    Plan p = *l.plan;
    p.mutable_training()->set_loss_output("nope");
    EXPECT_EQ(validatePlan(p, "x").message(),
              "plan x: training: loss output 'nope' is not a f32 output binding");
  }
  {
    Plan p = *l.plan;
    p.mutable_training()->set_optimizer_begin(-7);
    EXPECT_NE(validatePlan(p, "x").message().find("optimizer_begin -7"), std::string::npos);
  }
  {
    Plan p = *l.plan;
    p.mutable_hyperparameters()->set_grad_accum_steps(0);
    EXPECT_EQ(validatePlan(p, "x").message(), "plan x: training: grad_accum_steps 0 is not in [1, 1048576]");
  }
  {
    Plan p = *l.plan;
    p.clear_training();
    EXPECT_EQ(validatePlan(p, "x").message(),
              "plan x: training: a training plan needs its training section");
  }
}

TEST(TrainingLowering, SgdWithoutMomentumHasNoStateAndFrozenParametersAreNotTrained) {
  passes::TrainingConfig cfg = adamConfig();
  cfg.optimizer = "sgd";
  cfg.freeze = "^w$";
  Lowered l = lowerText(kModel, cfg);
  ASSERT_TRUE(l.plan) << l.plan.status().message();
  std::vector<std::string> trained;
  for (const TrainedParameter &p : l.plan->training().parameters()) {
    trained.push_back(p.name());
    EXPECT_EQ(p.state_size(), 0);
  }
  EXPECT_EQ(trained, (std::vector<std::string>{"s", "b"}));
}

TEST(TrainingLowering, LossErrorsNameTheOutputAndTheLoss) {
  passes::TrainingConfig cfg = adamConfig();
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

} // namespace
} // namespace dtc::plan
