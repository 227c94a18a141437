// data-parallel: synchronous data parallelism (--strategy dp=N; DESIGN.md section 6). Every rank
// runs the same program on its shard of the global batch (batchSize / N samples); this pass
// makes the gradients the optimizer reads equal on every rank and equal to single-device
// gradients of the global batch: each rank's loss is the mean over its shard, so the mean over
// the ranks of their gradients is the gradient of the global mean loss.
//
// Gradients are all-reduced in buckets, as PyTorch DDP does (Li et al., "PyTorch Distributed",
// VLDB 2020): in the order backward produces them, the first bucket capped at 1 MiB (so that
// communication starts early) and the others at TrainingConfig::bucketMb MiB; one
// ai.dtc.AllReduce node per bucket placed right after the node producing the bucket's last
// gradient, so that lowering launches it while the rest of backward runs. A parameter without a
// gradient (unused, frozen) is in no bucket on any rank (every rank compiles the same graph, so
// the collective sequence is the same everywhere); a gradient shared by several parameters, or
// a parameter used by several nodes (whose contributions autodiff already summed), is reduced
// once. --sync-batchnorm marks BatchNormTraining / BatchNormGrad with sync = 1: their kernels
// reduce the batch statistics over the group (torch.nn.SyncBatchNorm).
//
// ZeRO stage 2 (--zero 2; Rajbhandari et al. 2020): each bucket is instead flattened, zero-padded
// to a multiple of N and reduce-scattered (ai.dtc.ReduceScatter, mean over dp) at the same place;
// the shards go to TrainingRoles::gradientShards for the optimizer pass.
#include "ops/Gradient.h"
#include "ops/OpDef.h"
#include "passes/DataParallel.h"
#include "passes/Pass.h"
#include "passes/Passes.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace dtc::passes {
namespace {

/// PyTorch DDP's first bucket (torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES).
constexpr uint64_t kFirstBucketBytes = uint64_t{1} << 20;

class DataParallelPass : public Pass {
public:
  std::string name() const override { return "data-parallel"; }
  std::string description() const override {
    return "all-reduce (mean) the gradients over the data-parallel ranks in buckets placed "
           "where backward completes them; --sync-batchnorm";
  }

  Status run(ir::Graph &graph, PassContext &ctx) override {
    if (!ctx.training)
      return Status::error("data-parallel", "runs on training graphs only (after autodiff)");
    TrainingConfig &cfg = *ctx.training;
    ir::TrainingRoles &st = graph.training();
    if (st.optimizerBegin)
      return Status::error("data-parallel", "must run before the optimizer pass");
    if (cfg.syncBatchNorm)
      for (ir::Node *n : graph.nodes())
        if (n->domain() == ir::kDtcDomain &&
            (n->opType() == "BatchNormTraining" || n->opType() == "BatchNormGrad"))
          n->setAttr("sync", ir::Attribute(int64_t{1}));

    // With gradient accumulation the optimizer pass all-reduces the accumulated gradients once
    // per step instead (as DDP's no_sync() does for all micro-batches but the last).
    if (cfg.gradAccumSteps > 1)
      return Status::ok();
    std::unordered_map<const ir::Node *, size_t> position;
    const std::vector<ir::Node *> nodes = graph.nodes();
    for (size_t i = 0; i < nodes.size(); ++i)
      position[nodes[i]] = i;
    if (cfg.zero == 2)
      return reduceScatter(graph, cfg, ctx.diags, nodes, position);
    // Distinct gradients in the order backward completes them (ties: parameter order).
    struct Ready {
      ir::Value *gradient;
      int64_t at; // position of the producer, -1 when none
    };
    std::vector<Ready> ready;
    std::unordered_map<const ir::Value *, bool> seen;
    for (ir::Value *g : st.gradients) {
      if (!g || seen[g])
        continue;
      seen[g] = true;
      const ir::Node *p = g->producer();
      ready.push_back({g, p ? static_cast<int64_t>(position.at(p)) : -1});
    }
    std::stable_sort(ready.begin(), ready.end(),
                     [](const Ready &a, const Ready &b) { return a.at < b.at; });

    std::vector<ir::Value *> order;
    for (const Ready &r : ready)
      order.push_back(r.gradient);
    DTC_ASSIGN_OR_RETURN(std::vector<std::vector<ir::Value *>> buckets,
                         bucketGradients(order, cfg.bucketMb));
    std::unordered_map<const ir::Value *, int64_t> at;
    for (const Ready &r : ready)
      at[r.gradient] = r.at;
    std::unordered_map<const ir::Value *, ir::Value *> reduced;
    for (size_t k = 0; k < buckets.size(); ++k) {
      int64_t last = -1;
      for (const ir::Value *g : buckets[k])
        last = std::max(last, at.at(g));
      // Right after the producer of the bucket's last gradient: nodes[last + 1] in the order
      // before this pass inserted anything (inserting before it keeps earlier buckets first).
      const size_t next = static_cast<size_t>(last + 1);
      DTC_ASSIGN_OR_RETURN(ir::Node * n,
                           addBucketAllReduce(graph, buckets[k], k,
                                              next < nodes.size() ? nodes[next] : nullptr,
                                              ir::Phase::kBackward, ctx.diags));
      for (size_t i = 0; i < buckets[k].size(); ++i)
        reduced[buckets[k][i]] = n->output(i);
    }
    for (ir::Value *&g : st.gradients)
      if (g)
        g = reduced.at(g);
    return Status::ok();
  }

private:
  /// ZeRO stage 2: the trained parameters' gradients in the order backward completes them, in
  /// buckets as above, each flattened, zero-padded and reduce-scattered right after its last
  /// gradient is computed; the shards are recorded in TrainingRoles::gradientShards for the
  /// optimizer pass (the gradients themselves stay the rank's own, unreduced).
  Status reduceScatter(ir::Graph &graph, const TrainingConfig &cfg, Diagnostics &diags,
                       const std::vector<ir::Node *> &nodes,
                       const std::unordered_map<const ir::Node *, size_t> &position) {
    ir::TrainingRoles &st = graph.training();
    struct Ready {
      size_t parameter;
      int64_t at; // position of the gradient's producer, -1 when none
    };
    std::vector<Ready> ready;
    for (size_t i = 0; i < st.parameters.size(); ++i)
      if (ir::Value *g = st.gradients[i]) {
        const ir::Node *p = g->producer();
        ready.push_back({i, p ? static_cast<int64_t>(position.at(p)) : -1});
      }
    std::stable_sort(ready.begin(), ready.end(),
                     [](const Ready &a, const Ready &b) { return a.at < b.at; });
    std::vector<ir::Value *> order;
    std::vector<int> kinds; // tensor-parallel split or replicated parameter (bucketGradients)
    for (const Ready &r : ready) {
      order.push_back(st.gradients[r.parameter]);
      kinds.push_back(st.parameters[r.parameter]->shard().isSplit() ? 1 : 0);
    }
    DTC_ASSIGN_OR_RETURN(std::vector<std::vector<ir::Value *>> buckets,
                         bucketGradients(order, cfg.bucketMb, kinds));
    size_t next = 0; // index into `ready` of the bucket's first member
    for (size_t k = 0; k < buckets.size(); ++k) {
      ir::GradientShard shard;
      int64_t last = -1;
      for (size_t j = 0; j < buckets[k].size(); ++j, ++next) {
        shard.members.push_back(ready[next].parameter);
        last = std::max(last, ready[next].at);
      }
      const size_t after = static_cast<size_t>(last + 1);
      DTC_ASSIGN_OR_RETURN(shard.shard,
                           addBucketReduceScatter(graph, buckets[k], k, cfg.mesh.dp,
                                                  after < nodes.size() ? nodes[after] : nullptr,
                                                  ir::Phase::kBackward, diags));
      st.gradientShards.push_back(std::move(shard));
    }
    return Status::ok();
  }
};

} // namespace

Expected<std::vector<std::vector<ir::Value *>>>
bucketGradients(const std::vector<ir::Value *> &ready, float bucketMb,
                const std::vector<int> &kinds) {
  if (!kinds.empty() && kinds.size() != ready.size())
    return Status::error("bucketGradients", "needs one kind per gradient, got " +
                                                std::to_string(kinds.size()) + " for " +
                                                std::to_string(ready.size()));
  const uint64_t cap = static_cast<uint64_t>(static_cast<double>(bucketMb) * (1 << 20));
  std::vector<std::vector<ir::Value *>> buckets;
  uint64_t bucketBytes = 0;
  int bucketKind = 0;
  for (size_t i = 0; i < ready.size(); ++i) {
    ir::Value *g = ready[i];
    const int kind = kinds.empty() ? 0 : kinds[i];
    if (!g->shape().isStatic() || !g->shape().numElements())
      return Status::error("gradient '" + g->name() + "'", "has no static shape");
    const uint64_t bytes =
        static_cast<uint64_t>(*g->shape().numElements() * ir::dtypeSize(g->dtype()));
    // The bucket being filled is full when this gradient would take it over its cap (a
    // gradient larger than the cap gets a bucket of its own).
    const uint64_t limit = buckets.size() == 1 ? std::min(cap, kFirstBucketBytes) : cap;
    const bool full = !buckets.empty() && bucketBytes + bytes > limit;
    // Pipelines: a bucket holds the gradients of one stage (each stage has its own group).
    auto stageOf = [](const ir::Value *v) { return v->producer() ? v->producer()->stage() : -1; };
    if (buckets.empty() || full || buckets.back().front()->dtype() != g->dtype() ||
        stageOf(buckets.back().front()) != stageOf(g) || bucketKind != kind) {
      buckets.emplace_back();
      bucketBytes = 0;
      bucketKind = kind;
    }
    buckets.back().push_back(g);
    bucketBytes += bytes;
  }
  return buckets;
}

Expected<ir::Node *> addBucketAllReduce(ir::Graph &graph, const std::vector<ir::Value *> &bucket,
                                        size_t index, ir::Node *before, ir::Phase phase,
                                        Diagnostics &diags) {
  std::vector<std::string> names;
  for (const ir::Value *g : bucket)
    names.push_back(graph.uniqueName(g->name() + "/all-reduced"));
  const std::string nodeName = "dp/bucket" + std::to_string(index) + "/AllReduce";
  ir::Node *n = before ? graph.insertNodeBefore(before, "AllReduce", bucket, names,
                                                ir::kDtcDomain, nodeName)
                       : graph.addNode("AllReduce", bucket, names, ir::kDtcDomain, nodeName);
  n->setPhase(phase);
  if (!bucket.empty() && bucket[0]->producer())
    n->setStage(bucket[0]->producer()->stage());
  n->setAttr("op", ir::Attribute("mean"));
  n->setAttr("group", ir::Attribute("dp"));
  n->setAttr("bucket", ir::Attribute(static_cast<int64_t>(index)));
  DTC_RETURN_IF_ERROR(ops::inferNode(*n, diags));
  return n;
}

int64_t paddedBucketSize(const std::vector<ir::Value *> &values, int64_t parts) {
  int64_t total = 0;
  for (const ir::Value *v : values)
    total += *v->shape().numElements();
  return (total + parts - 1) / parts * parts;
}

namespace {

/// Inserts node `op` before `before` (appended when null) with one output named
/// uniqueName(out), in `phase` and `stage`, and infers its types.
Expected<ir::Node *> place(ir::Graph &graph, ir::Node *before, const std::string &op,
                           const std::vector<ir::Value *> &inputs, const std::string &out,
                           const std::string &domain, ir::Phase phase, int stage,
                           const std::map<std::string, ir::Attribute> &attrs, Diagnostics &diags) {
  const std::vector<std::string> names{graph.uniqueName(out)};
  ir::Node *n = before ? graph.insertNodeBefore(before, op, inputs, names, domain, names[0])
                       : graph.addNode(op, inputs, names, domain, names[0]);
  n->setPhase(phase);
  n->setStage(stage);
  for (const auto &[key, a] : attrs)
    n->setAttr(key, a);
  DTC_RETURN_IF_ERROR(ops::inferNode(*n, diags));
  return n;
}

} // namespace

Expected<ir::Value *> flattenBucket(ir::Graph &graph, const std::vector<ir::Value *> &values,
                                    int64_t padded, const std::string &prefix, ir::Node *before,
                                    ir::Phase phase, Diagnostics &diags) {
  const int stage = values[0]->producer() ? values[0]->producer()->stage() : -1;
  std::vector<ir::Value *> parts;
  int64_t total = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    ir::Value *v = values[i];
    const int64_t n = *v->shape().numElements();
    total += n;
    const std::string name = prefix + "/flat" + std::to_string(i);
    ir::Value *shape =
        graph.addConstant(name + "/shape", ir::TensorData::fromInt64s(name + "/shape", {1}, {n}));
    DTC_ASSIGN_OR_RETURN(ir::Node * r, place(graph, before, "Reshape", {v, shape}, name, "", phase,
                                             stage, {}, diags));
    parts.push_back(r->output(0));
  }
  if (padded < total)
    return Status::error("bucket '" + prefix + "'", "padded size " + std::to_string(padded) +
                                                        " is below its " + std::to_string(total) +
                                                        " elements");
  if (padded > total) {
    const std::string name = prefix + "/padding";
    parts.push_back(
        graph.addConstant(name, ir::TensorData::zeros(name, values[0]->dtype(), {padded - total})));
  }
  if (parts.size() == 1)
    return parts[0];
  DTC_ASSIGN_OR_RETURN(ir::Node * c, place(graph, before, "Concat", parts, prefix, "", phase, stage,
                                           {{"axis", ir::Attribute(int64_t{0})}}, diags));
  return c->output(0);
}

Expected<ir::Value *> addBucketReduceScatter(ir::Graph &graph,
                                             const std::vector<ir::Value *> &bucket, size_t index,
                                             int64_t parts, ir::Node *before, ir::Phase phase,
                                             Diagnostics &diags) {
  const std::string prefix = "dp/bucket" + std::to_string(index);
  DTC_ASSIGN_OR_RETURN(ir::Value * flat,
                       flattenBucket(graph, bucket, paddedBucketSize(bucket, parts),
                                     prefix + "/gradients", before, phase, diags));
  const int stage = bucket[0]->producer() ? bucket[0]->producer()->stage() : -1;
  DTC_ASSIGN_OR_RETURN(ir::Node * rs,
                       place(graph, before, "ReduceScatter", {flat}, prefix + "/grad_shard",
                             ir::kDtcDomain, phase, stage,
                             {{"op", ir::Attribute("mean")},
                              {"group", ir::Attribute("dp")},
                              {"parts", ir::Attribute(parts)},
                              {"bucket", ir::Attribute(static_cast<int64_t>(index))}},
                             diags));
  return rs->output(0);
}

std::unique_ptr<Pass> createDataParallelPass() { return std::make_unique<DataParallelPass>(); }

} // namespace dtc::passes
