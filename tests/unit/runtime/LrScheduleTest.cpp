// Learning-rate schedules: exact values of warm-up, step decay and cosine annealing, and the
// configuration errors.
#include "runtime/LrSchedule.h"

#include <gtest/gtest.h>

#include <cmath>

namespace dtc::rt {
namespace {

plan::Hyperparameters hp(const std::string &kind, float lr, int64_t warmup) {
  plan::Hyperparameters h;
  h.set_lr_schedule(kind);
  h.set_lr(lr);
  h.set_warmup_steps(warmup);
  return h;
}

TEST(LrScheduleTest, ConstantWithWarmup) {
  auto s = LrSchedule::create(hp("constant", 0.5f, 4), 100);
  ASSERT_TRUE(s.hasValue()) << s.status().message();
  EXPECT_EQ(s->lr(0), 0.125);
  EXPECT_EQ(s->lr(1), 0.25);
  EXPECT_EQ(s->lr(2), 0.375);
  EXPECT_EQ(s->lr(3), 0.5);
  EXPECT_EQ(s->lr(4), 0.5);
  EXPECT_EQ(s->lr(1000), 0.5);
  // "" means constant; no warm-up gives lr from step 0.
  auto c = LrSchedule::create(hp("", 0.25f, 0), 10);
  ASSERT_TRUE(c.hasValue());
  EXPECT_EQ(c->kind(), "constant");
  EXPECT_EQ(c->lr(0), 0.25);
}

TEST(LrScheduleTest, StepDecay) {
  plan::Hyperparameters h = hp("step", 0.5f, 2);
  h.set_step_size(3);
  h.set_gamma(0.5f);
  auto s = LrSchedule::create(h, 100);
  ASSERT_TRUE(s.hasValue()) << s.status().message();
  EXPECT_EQ(s->lr(0), 0.25);  // warm-up 1/2
  EXPECT_EQ(s->lr(1), 0.5);   // warm-up 2/2
  EXPECT_EQ(s->lr(2), 0.5);   // t = 0
  EXPECT_EQ(s->lr(4), 0.5);   // t = 2
  EXPECT_EQ(s->lr(5), 0.25);  // t = 3: one decay
  EXPECT_EQ(s->lr(8), 0.125); // t = 6: two decays
  EXPECT_EQ(s->lr(10), 0.125);
  EXPECT_EQ(s->lr(11), 0.0625);
}

TEST(LrScheduleTest, Cosine) {
  plan::Hyperparameters h = hp("cosine", 1.0f, 0);
  h.set_total_steps(4);
  auto s = LrSchedule::create(h, 100);
  ASSERT_TRUE(s.hasValue()) << s.status().message();
  EXPECT_DOUBLE_EQ(s->lr(0), 1.0);
  EXPECT_DOUBLE_EQ(s->lr(1), (1 + std::cos(M_PI / 4)) / 2); // 0.8535533905932737
  EXPECT_NEAR(s->lr(1), 0.8535533905932737, 1e-15);
  EXPECT_DOUBLE_EQ(s->lr(2), 0.5);
  EXPECT_NEAR(s->lr(3), 0.14644660940672627, 1e-15);
  EXPECT_EQ(s->lr(4), 0.0); // t >= T: min_lr, no restart
  EXPECT_EQ(s->lr(9), 0.0);

  h.set_min_lr(0.25f);
  auto m = LrSchedule::create(h, 100);
  EXPECT_DOUBLE_EQ(m->lr(2), 0.625);
  EXPECT_EQ(m->lr(7), 0.25);

  // Warm-up 2 then cosine over total 6 - 2 = 4 steps.
  h = hp("cosine", 1.0f, 2);
  h.set_total_steps(6);
  auto w = LrSchedule::create(h, 100);
  EXPECT_EQ(w->lr(0), 0.5);
  EXPECT_EQ(w->lr(1), 1.0);
  EXPECT_EQ(w->lr(2), 1.0);
  EXPECT_DOUBLE_EQ(w->lr(4), 0.5);

  // total_steps 0: the run's length.
  h = hp("cosine", 1.0f, 0);
  auto r = LrSchedule::create(h, 8);
  EXPECT_DOUBLE_EQ(r->lr(4), 0.5);
}

TEST(LrScheduleTest, Errors) {
  auto e = LrSchedule::create(hp("linear", 0.1f, 0), 10);
  EXPECT_EQ(e.status().message(),
            "lr schedule: unknown schedule 'linear' (expected constant, step or cosine)");
  plan::Hyperparameters h = hp("step", 0.1f, 0);
  h.set_step_size(0);
  EXPECT_EQ(LrSchedule::create(h, 10).status().message(),
            "lr schedule: step schedule: step_size 0 is below 1");
  h = hp("cosine", 0.1f, 5);
  h.set_total_steps(5);
  EXPECT_EQ(LrSchedule::create(h, 10).status().message(),
            "lr schedule: cosine schedule: total_steps 5 must exceed warmup_steps 5");
  EXPECT_FALSE(LrSchedule::create(hp("constant", 0.1f, -1), 10).hasValue());
  EXPECT_FALSE(LrSchedule::create(hp("constant", -0.1f, 0), 10).hasValue());
}

} // namespace
} // namespace dtc::rt
