// The Training message and hyperparameters of a training plan (fillTraining in Lowering.h):
// what dtc-run needs beyond the instructions, from the graph's training roles.
#include "compiler/plan/Lowering.h"

#include <algorithm>
#include <unordered_set>

namespace dtc::plan {

Status fillTraining(Plan &plan, RankProgram &program, const ir::Graph &graph,
                    const TrainingConfig &cfg,
                    const std::unordered_map<const ir::Value *, int> &bufferOf,
                    int optimizerBegin) {
  const ir::TrainingRoles &st = graph.training();
  Hyperparameters *hp = plan.mutable_hyperparameters();
  hp->set_batch_size(cfg.batchSize);
  hp->set_loss(cfg.loss);
  hp->set_optimizer(cfg.optimizer);
  hp->set_lr(cfg.lr);
  hp->set_momentum(cfg.momentum);
  hp->set_nesterov(cfg.nesterov);
  hp->set_weight_decay(cfg.weightDecay);
  hp->set_beta1(cfg.beta1);
  hp->set_beta2(cfg.beta2);
  hp->set_eps(cfg.eps);
  hp->set_lr_schedule(cfg.lrSchedule);
  hp->set_warmup_steps(cfg.warmupSteps);
  hp->set_step_size(cfg.stepSize);
  hp->set_gamma(cfg.gamma);
  hp->set_total_steps(cfg.totalSteps);
  hp->set_min_lr(cfg.minLr);
  hp->set_clip_grad_norm(cfg.clipGradNorm);
  hp->set_grad_accum_steps(cfg.gradAccumSteps);
  hp->set_freeze(cfg.freeze);
  hp->set_zero(static_cast<int32_t>(cfg.zero));
  Training *t = program.mutable_training();
  // Pipelines: only the last stage computes the loss (and the prediction, and reads labels).
  if (st.loss)
    t->set_loss_output(st.loss->name());
  if (st.prediction)
    t->set_prediction_output(st.prediction->name());
  if (st.label)
    t->set_label_input(st.label->name());
  t->set_ignore_index(cfg.ignoreIndex);
  auto bufferOfValue = [&](const ir::Value *v) { return v ? bufferOf.at(v) : -1; };
  for (size_t i = 0; i < st.parameters.size(); ++i) {
    if (!st.gradients[i])
      continue;
    TrainedParameter *p = t->add_parameters();
    p->set_name(st.parameters[i]->name());
    p->set_buffer(bufferOfValue(st.parameters[i]));
    p->set_gradient(bufferOfValue(st.gradients[i]));
    if (i < st.optimizerState.size())
      for (const ir::Value *s : st.optimizerState[i])
        p->add_state(bufferOfValue(s));
    // A split parameter's gradient and optimizer state are split alike (ZeRO's bucket state,
    // listed with the bucket's first parameter, is a flat block of local shards: not a split of
    // one whole tensor).
    const Buffer &pb = program.buffers(p->buffer());
    if (pb.has_shard()) {
      std::vector<int> same{p->gradient()};
      same.insert(same.end(), p->state().begin(), p->state().end());
      for (int b : same)
        if (b >= 0 &&
            std::equal(program.buffers(b).shape().begin(), program.buffers(b).shape().end(),
                       pb.shape().begin(), pb.shape().end()))
          *program.mutable_buffers(b)->mutable_shard() = pb.shard();
    }
  }
  t->set_optimizer_begin(optimizerBegin);
  if (st.lr)
    t->set_lr_input(st.lr->name());
  if (st.step)
    t->set_step_input(st.step->name());
  if (st.rng)
    t->set_rng_input(st.rng->name());
  if (st.tpRank)
    t->set_tp_rank_input(st.tpRank->name());
  if (st.dpRank)
    t->set_dp_rank_input(st.dpRank->name());
  std::unordered_set<const ir::Value *> trained(st.parameters.begin(), st.parameters.end());
  for (const auto &states : st.optimizerState)
    for (const ir::Value *s : states)
      trained.insert(s);
  for (const ir::StateUpdate &u : st.updates)
    if (!trained.count(u.state))
      t->add_state_buffers(bufferOfValue(u.state));
  // Every input but the runtime-fed ones comes from the dataset, split along the sample axis.
  for (const ir::Value *v : graph.inputs()) {
    if (v->isInitializer() || v == st.lr || v == st.step || v == st.rng || v == st.tpRank ||
        v == st.dpRank)
      continue;
    DataBinding *d = program.add_data_bindings();
    d->set_array(v->name());
    d->set_input(v->name());
    d->set_shard_axis(0);
  }
  return Status::ok();
}

} // namespace dtc::plan
