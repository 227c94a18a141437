// Checks of a training plan before it is loaded, and the accuracy count of one batch (see
// Trainer.h): what the training loop needs to trust about the plan and its outputs.
#include "runtime/PlanUtil.h"
#include "runtime/Trainer.h"

#include "ops/cpu/Kernel.h"

#include <cstring>

namespace dtc::rt {

Status checkTrainingPlan(const plan::Plan &plan, const std::string &where) {
  const std::string w = (where.empty() ? std::string("plan") : "plan " + where) + ": training";
  if (plan.mode() != plan::MODE_TRAINING)
    return Status::error(w, "not a training plan");
  if (plan.world_size() < 1 || plan.ranks_size() != plan.world_size())
    return Status::error(w, "the plan has " + std::to_string(plan.ranks_size()) +
                                " ranks for a world of " + std::to_string(plan.world_size()));
  // Every program: data-parallel replicas share one, pipeline stages each have their own.
  if (plan.programs_size() < 1)
    return Status::error(w, "the plan has no rank programs");
  for (int pi = 0; pi < plan.programs_size(); ++pi) {
    // Parameter servers' programs (no loss, only the update) are checked by validatePlan.
    if (plan.has_parameter_host() && pi > 0)
      continue;
    const plan::RankProgram &rp = plan.programs(pi);
    const plan::Training &tr = rp.training();
    const int nb = rp.buffers_size();
    auto inRange = [&](int32_t b) { return b >= 0 && b < nb; };
    // A pipeline's stages before the last compute no loss.
    const bool noLoss = tr.loss_output().empty() && plan.mesh().pp() > 1;
    if (!noLoss) {
      const int lossBuffer = findBinding(rp.outputs(), tr.loss_output());
      if (lossBuffer < 0 || !inRange(lossBuffer))
        return Status::error(w, "loss output '" + tr.loss_output() + "' is not an output binding");
      const plan::Buffer &lb = rp.buffers(lossBuffer);
      if (lb.shape_size() != 0 || (lb.dtype() != static_cast<int32_t>(ir::DType::kFloat32) &&
                                   lb.dtype() != static_cast<int32_t>(ir::DType::kFloat64)))
        return Status::error(w, "loss output '" + tr.loss_output() + "' is " +
                                    typeStr(static_cast<ir::DType>(lb.dtype()), shapeOf(lb)) +
                                    ", not an f32 scalar");
    }
    if (!tr.prediction_output().empty() && findBinding(rp.outputs(), tr.prediction_output()) < 0)
      return Status::error(w, "prediction output '" + tr.prediction_output() +
                                  "' is not an output binding");
    if (!tr.label_input().empty() && findBinding(rp.inputs(), tr.label_input()) < 0)
      return Status::error(w, "label input '" + tr.label_input() + "' is not an input binding");
    // Another rank's program read without its instructions (a summary): that rank checks them.
    if (!rp.summary() && (tr.optimizer_begin() < (rp.instructions_size() ? 1 : 0) ||
                          tr.optimizer_begin() > rp.instructions_size()))
      return Status::error(w, "optimizer_begin " + std::to_string(tr.optimizer_begin()) +
                                  " is outside [1, " + std::to_string(rp.instructions_size()) +
                                  "] (instructions before it compute the loss)");
    if (tr.forward_end() < 0 || tr.forward_end() > tr.optimizer_begin())
      return Status::error(w, "forward_end " + std::to_string(tr.forward_end()) +
                                  " is outside [0, optimizer_begin " +
                                  std::to_string(tr.optimizer_begin()) + "]");
    for (const plan::TrainedParameter &p : tr.parameters()) {
      const std::string pw = w + ": parameter '" + p.name() + "'";
      if (!inRange(p.buffer()) || (p.gradient() != -1 && !inRange(p.gradient())))
        return Status::error(pw, "buffer index out of range");
      for (int32_t s : p.state())
        if (!inRange(s))
          return Status::error(pw, "state buffer index " + std::to_string(s) + " out of range");
      if (p.gradient() >= 0 &&
          (rp.buffers(p.gradient()).dtype() != rp.buffers(p.buffer()).dtype() ||
           shapeOf(rp.buffers(p.gradient())) != shapeOf(rp.buffers(p.buffer()))))
        return Status::error(pw, "its gradient's type differs from the parameter's");
    }
    for (int32_t s : tr.state_buffers())
      if (!inRange(s))
        return Status::error(w, "state buffer index " + std::to_string(s) + " out of range");
    struct Fed {
      std::string name;
      ir::DType dtype;
      std::vector<int64_t> shape;
    };
    for (const Fed &f :
         {Fed{tr.lr_input(), ir::DType::kFloat32, {}}, Fed{tr.step_input(), ir::DType::kInt64, {}},
          Fed{tr.rng_input(), ir::DType::kInt64, {3}},
          Fed{tr.tp_rank_input(), ir::DType::kInt64, {}},
          Fed{tr.dp_rank_input(), ir::DType::kInt64, {}}}) {
      if (f.name.empty())
        continue;
      const int b = findBinding(rp.inputs(), f.name);
      if (b < 0 || !inRange(b))
        return Status::error(w, "runtime input '" + f.name + "' is not an input binding");
      if (rp.buffers(b).dtype() != static_cast<int32_t>(f.dtype) ||
          shapeOf(rp.buffers(b)) != f.shape)
        return Status::error(
            w, "runtime input '" + f.name + "' is " +
                   typeStr(static_cast<ir::DType>(rp.buffers(b).dtype()), shapeOf(rp.buffers(b))) +
                   ", expected " + typeStr(f.dtype, f.shape));
    }
  }
  if (plan.hyperparameters().grad_accum_steps() < 0)
    return Status::error(w, "grad_accum_steps " +
                                std::to_string(plan.hyperparameters().grad_accum_steps()) +
                                " is below 1");
  return Status::ok();
}

bool countCorrect(const HostArray &prediction, const HostArray &label, int64_t ignoreIndex,
                  int64_t &correct, int64_t &counted) {
  if (label.dtype != ir::DType::kInt32 && label.dtype != ir::DType::kInt64)
    return false;
  const std::vector<int64_t> &p = prediction.shape;
  const std::vector<int64_t> &y = label.shape;
  auto labelAt = [&](int64_t i) -> int64_t {
    if (label.dtype == ir::DType::kInt64) {
      int64_t v;
      std::memcpy(&v, label.bytes.data() + 8 * i, 8);
      return v;
    }
    int32_t v;
    std::memcpy(&v, label.bytes.data() + 4 * i, 4);
    return v;
  };
  if (prediction.dtype == ir::DType::kInt64 && p == y) {
    // Predicted classes, one per label.
    int64_t n = 1;
    for (int64_t d : y)
      n *= d;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t want = labelAt(i);
      if (want == ignoreIndex)
        continue;
      int64_t got;
      std::memcpy(&got, prediction.bytes.data() + 8 * i, 8);
      ++counted;
      if (got == want)
        ++correct;
    }
    return true;
  }
  if (prediction.dtype != ir::DType::kFloat32)
    return false;
  if (p.size() != y.size() + 1 || y.empty() || p[0] != y[0] || p[1] < 1)
    return false;
  for (size_t i = 1; i < y.size(); ++i)
    if (p[i + 1] != y[i])
      return false;
  const int64_t n = p[0], c = p[1];
  int64_t inner = 1;
  for (size_t i = 2; i < p.size(); ++i)
    inner *= p[i];
  const float *scores = reinterpret_cast<const float *>(prediction.bytes.data());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t s = 0; s < inner; ++s) {
      const int64_t want = labelAt(b * inner + s);
      if (want == ignoreIndex)
        continue;
      const float *row = scores + b * c * inner + s;
      int64_t best = 0;
      for (int64_t k = 1; k < c; ++k)
        if (row[k * inner] > row[best * inner])
          best = k;
      ++counted;
      if (best == want)
        ++correct;
    }
  return true;
}

} // namespace dtc::rt
