// Learning-rate schedules (see LrSchedule.h).
#include "runtime/LrSchedule.h"

#include <cmath>
#include <numbers>

namespace dtc::rt {

Expected<LrSchedule> LrSchedule::create(const plan::Hyperparameters &hp, int64_t runTotalSteps) {
  const std::string where = "lr schedule";
  LrSchedule s;
  s.kind_ = hp.lr_schedule().empty() ? "constant" : hp.lr_schedule();
  s.base_ = hp.lr();
  s.minLr_ = hp.min_lr();
  s.gamma_ = hp.gamma();
  s.warmup_ = hp.warmup_steps();
  s.stepSize_ = hp.step_size();
  s.total_ = hp.total_steps() > 0 ? hp.total_steps() : runTotalSteps;
  if (s.kind_ != "constant" && s.kind_ != "step" && s.kind_ != "cosine")
    return Status::error(where,
                         "unknown schedule '" + s.kind_ + "' (expected constant, step or cosine)");
  if (!(s.base_ >= 0) || !std::isfinite(s.base_))
    return Status::error(where, "lr " + std::to_string(s.base_) + " is not a finite value >= 0");
  if (s.warmup_ < 0)
    return Status::error(where, "warmup_steps " + std::to_string(s.warmup_) + " is below 0");
  if (s.kind_ == "step") {
    if (s.stepSize_ < 1)
      return Status::error(where, "step schedule: step_size " + std::to_string(s.stepSize_) +
                                      " is below 1");
    if (!(s.gamma_ >= 0))
      return Status::error(where,
                           "step schedule: gamma " + std::to_string(s.gamma_) + " is below 0");
  }
  if (s.kind_ == "cosine" && s.total_ <= s.warmup_)
    return Status::error(where, "cosine schedule: total_steps " + std::to_string(s.total_) +
                                    " must exceed warmup_steps " + std::to_string(s.warmup_));
  return s;
}

double LrSchedule::lr(int64_t step) const {
  if (step < warmup_)
    return base_ * static_cast<double>(step + 1) / static_cast<double>(warmup_);
  const int64_t t = step - warmup_;
  if (kind_ == "step")
    return base_ * std::pow(gamma_, static_cast<double>(t / stepSize_));
  if (kind_ == "cosine") {
    const int64_t period = total_ - warmup_;
    if (t >= period)
      return minLr_;
    return minLr_ + (base_ - minLr_) *
                        (1 + std::cos(std::numbers::pi * static_cast<double>(t) /
                                      static_cast<double>(period))) /
                        2;
  }
  return base_;
}

} // namespace dtc::rt
