// Learning-rate schedules of training plans (plan.proto Hyperparameters): a linear warm-up, then
// constant, step decay or cosine annealing. The trainer feeds lr(step) to the plan's lr input
// before every optimizer step.
#pragma once

#include "compiler/plan/Plan.h"
#include "compiler/support/Status.h"

#include <cstdint>
#include <string>

namespace dtc::rt {

class LrSchedule {
public:
  /// Reads the schedule from `hp` (lr, lr_schedule "" | constant | step | cosine, warmup_steps,
  /// step_size, gamma, total_steps, min_lr). `runTotalSteps` stands in for total_steps when the
  /// plan leaves it 0 (cosine decays over the whole run then). Errors ("lr schedule: ..."): an
  /// unknown name, a negative lr or warm-up, step_size < 1 for step, gamma < 0, and for cosine
  /// total_steps <= warmup_steps.
  static Expected<LrSchedule> create(const plan::Hyperparameters &hp, int64_t runTotalSteps);

  /// The learning rate of optimizer step `step` (0-based):
  ///  - step < W (W = warmup_steps): lr * (step + 1) / W (linear warm-up, reaches lr at W - 1);
  ///  - constant: lr;
  ///  - step: lr * gamma^floor((step - W) / step_size) (PyTorch StepLR);
  ///  - cosine: min_lr + (lr - min_lr) * (1 + cos(pi * t / T)) / 2 with t = step - W and
  ///    T = total_steps - W (PyTorch CosineAnnealingLR's closed form, eta_min = min_lr, without
  ///    restarts: t >= T gives min_lr).
  /// Computed in double precision; the plan's lr input is f32.
  double lr(int64_t step) const;

  const std::string &kind() const { return kind_; }

private:
  std::string kind_ = "constant";
  double base_ = 0, minLr_ = 0, gamma_ = 1;
  int64_t warmup_ = 0, stepSize_ = 1, total_ = 0;
};

} // namespace dtc::rt
