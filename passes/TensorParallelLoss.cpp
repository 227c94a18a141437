// The vocabulary-parallel cross-entropy of the tensor-parallel pass (passes/TensorParallel.cpp
// calls rewriteVocabParallelLoss when a SoftmaxCrossEntropyLoss's scores arrive split by class):
// Megatron-LM's vocab_parallel_cross_entropy, with the label check and the predicted class that
// give the single-device loss's errors and the trainer's accuracy.
#include "passes/TensorParallelLoss.h"

#include "ops/Gradient.h"

namespace dtc::passes::tp {

namespace {

std::vector<int64_t> staticDims(const ir::Value *v) {
  std::vector<int64_t> d;
  for (const ir::Dim &x : v->shape().dims())
    d.push_back(x.isStatic() ? x.value() : -1);
  return d;
}

/// The predicted class (N, d1..dk) int64 of scores x (N, C/T, d1..dk) split by class, rank's
/// first class `first`: the first class holding the global max `m` (see rewriteVocabParallelLoss).
ir::Value *predictedClass(GraphBuilder &g, ir::Value *x, ir::Value *localMax, ir::Value *m,
                          ir::Value *first, int64_t classes, const std::string &b,
                          ir::Node *before) {
  auto op = [&](const std::string &type, const std::vector<ir::Value *> &in,
                const std::string &name, const std::string &domain = "") {
    return g.insert(before, type, in, b + name, domain);
  };
  const bool wide = classes > (int64_t{1} << 24); // float32 holds integers up to 2^24 exactly
  const ir::DType t = wide ? ir::DType::kFloat64 : ir::DType::kFloat32;
  auto cast = [&](ir::Value *v, ir::DType to, const std::string &name) {
    ir::Node *c = op("Cast", {v}, name);
    c->setAttr("to", ir::Attribute(static_cast<int64_t>(to)));
    return c->output(0);
  };
  ir::Node *arg = op("ArgMax", {x}, "_local_argmax");
  arg->setAttr("axis", ir::Attribute(int64_t{1}));
  ir::Value *global = op("Add", {arg->output(0), first}, "_argmax_class")->output(0);
  ir::Value *c = g.constI64(b + "_classes", {classes}, true);
  ir::Value *fromEnd =
      cast(op("Sub", {c, global}, "_argmax_from_end")->output(0), t, "_argmax_from_end_f");
  ir::Value *holds = op("Equal", {localMax, m}, "_holds_max")->output(0);
  ir::Value *zero =
      g.graph().addConstant(b + "_no_class", ir::TensorData::zeros(b + "_no_class", t, {}));
  ir::Value *cand = op("Where", {holds, fromEnd, zero}, "_argmax_candidate")->output(0);
  ir::Node *ar = op("AllReduce", {cand}, "_argmax", ir::kDtcDomain);
  ar->setAttr("op", ir::Attribute("max"));
  ar->setAttr("group", ir::Attribute("tp"));
  ir::Value *best = cast(ar->output(0), ir::DType::kInt64, "_argmax_from_end_i");
  ir::Value *cls = op("Sub", {c, best}, "_predicted")->output(0);
  return op("Squeeze", {cls, g.constI64(b + "_pred_axis", {1}, false)}, "_predicted_class")
      ->output(0);
}

} // namespace

bool isVocabParallelLoss(const ir::Node *n, const ir::Sharding &s) {
  if (n->opType() != "SoftmaxCrossEntropyLoss" || !n->domain().empty() || n->numInputs() < 2 ||
      (n->numInputs() > 2 && n->input(2)) || n->numOutputs() != 1 || !n->input(0) || !n->input(1) ||
      n->input(0)->dtype() != ir::DType::kFloat32)
    return false;
  return s.isSplit() && s.axis == 1 && s.blocks == 1;
}

/// Vocabulary-parallel cross-entropy (Megatron-LM's vocab_parallel_cross_entropy, Shoeybi et
/// al. 2019 section 3): the scores x (N, C, d1..dk) stay split by class, rank r holding
/// classes [r*C/T, (r+1)*C/T). Per sample, with all-reduces over tp of N*d1..dk floats each:
///   m = AllReduce max (ReduceMax_c x)           the global max (a constant for the gradient)
///   s = AllReduce sum (ReduceSum_c exp(x - m))  the softmax denominator
///   t = AllReduce sum (x[label] on the rank whose range holds the label, else 0)
///   loss = log(s) + m - t
/// then ignore_index (those samples count 0 and leave the mean's count) and the reduction
/// (none, sum, mean), as the loss op does. Autodiff gives softmax(x) - onehot(label) on each
/// rank's own classes with no collective (the all-reduce sums' gradients are identities), so
/// x's gradient stays split. This replaces an all-gather of N*C*d1..dk floats.
///
/// Labels outside [0, C) that are not ignore_index would score 0 on every rank (no range holds
/// them): ai.dtc.CheckLabels fails the step on them first, before the loss's collectives, with
/// the single-device loss's message (the labels are replicated over tp, so every tp rank fails
/// at the same instruction and none waits in a collective its peers never reach).
///
/// The prediction output (x itself, split) is replaced by the predicted class (N, d1..dk)
/// int64, for the trainer's accuracy: the first class holding the global max m, as the
/// trainer's argmax on one device (the first index among ties; runtime/TrainingPlanCheck.cpp):
///   p = C - AllReduce max (m_r == m ? C - (first_r + ArgMax_c x) : 0)
/// with m_r the rank's own max, one more all-reduce of N*d1..dk numbers (float32, exact for
/// C <= 2^24; float64 above), forward only.
Status rewriteVocabParallelLoss(ir::Node *n, GraphBuilder &g) {
  ir::Graph &graph = g.graph();
  ir::Value *x = n->input(0), *labels = n->input(1);
  const ir::Sharding s = g.layoutOf(x);
  int64_t rows = staticDims(x)[1] / s.parts;
  const std::string reduction = n->attrString("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return Status::error(n->where(), "reduction '" + reduction + "' is not none, sum or mean");
  const bool hasIgnore = n->hasAttr("ignore_index");
  const int64_t ignore = n->attrInt("ignore_index", 0);
  const std::string b = n->name() + "/tp_vocab";
  auto op = [&](const std::string &type, const std::vector<ir::Value *> &in,
                const std::string &name,
                const std::string &domain = "") { return g.insert(n, type, in, b + name, domain); };
  auto allReduce = [&](ir::Value *v, const char *kind, const std::string &name) {
    ir::Node *ar = op("AllReduce", {v}, name, ir::kDtcDomain);
    ar->setAttr("op", ir::Attribute(kind));
    ar->setAttr("group", ir::Attribute("tp"));
    return ar->output(0);
  };
  auto f32 = [&](const std::string &name, float v) {
    return graph.addConstant(b + name, ir::TensorData::fromFloats(b + name, {}, {v}));
  };
  ir::Value *classAxis = g.constI64(b + "_class_axis", {1}, false);
  const int64_t classes = staticDims(x)[1];
  // Labels outside [0, C): the step fails on every tp rank before the loss's collectives.
  ir::Node *check = op("CheckLabels", {labels}, "_checked_labels", ir::kDtcDomain);
  check->setAttr("classes", ir::Attribute(classes));
  if (hasIgnore)
    check->setAttr("ignore_index", ir::Attribute(ignore));
  DTC_RETURN_IF_ERROR(ops::inferNode(*check, g.diags()));
  labels = check->output(0);
  // The softmax denominator over all classes, shifted by the global max.
  ir::Value *localMax = op("ReduceMax", {x, classAxis}, "_local_max")->output(0);
  ir::Value *m = allReduce(localMax, "max", "_max");
  ir::Value *shifted = op("Sub", {x, m}, "_shifted")->output(0);
  ir::Value *e = op("Exp", {shifted}, "_exp")->output(0);
  ir::Value *se =
      allReduce(op("ReduceSum", {e, classAxis}, "_local_sum_exp")->output(0), "sum", "_sum_exp");
  // The label's score, read by the rank whose class range holds it (masked Gather).
  ir::Value *lab = labels;
  if (lab->dtype() != ir::DType::kInt64) {
    ir::Node *c = op("Cast", {lab}, "_labels");
    c->setAttr("to", ir::Attribute(static_cast<int64_t>(ir::DType::kInt64)));
    lab = c->output(0);
  }
  ir::Value *first = nullptr;
  if (ir::isUnevenSplit(staticDims(x), s)) {
    DTC_ASSIGN_OR_RETURN(first, g.unevenFirst(classes, s, b, rows, n));
  } else {
    DTC_ASSIGN_OR_RETURN(ir::Value * rank, g.tpRank());
    first = op("Mul", {rank, g.constI64(b + "_rows", {rows}, true)}, "_first")->output(0);
  }
  // The predicted class, where it replaces the split scores as the training prediction.
  ir::TrainingRoles &st = graph.training();
  const bool predicts = st.prediction && !g.layoutOf(st.prediction).isReplicated();
  ir::Value *predicted =
      predicts ? predictedClass(g, x, localMax, m, first, classes, b, n) : nullptr;
  ir::Value *local = op("Sub", {lab, first}, "_local_labels")->output(0);
  ir::Value *ge =
      op("GreaterOrEqual", {local, g.constI64(b + "_zero", {0}, true)}, "_ge")->output(0);
  ir::Value *lt = op("Less", {local, g.constI64(b + "_end", {rows}, true)}, "_lt")->output(0);
  ir::Value *in = op("And", {ge, lt}, "_in_range")->output(0);
  ir::Value *safe =
      op("Where", {in, local, g.constI64(b + "_zero_id", {0}, true)}, "_safe_labels")->output(0);
  ir::Value *idx = op("Unsqueeze", {safe, classAxis}, "_index")->output(0);
  ir::Node *pick = op("GatherElements", {x, idx}, "_local_target");
  pick->setAttr("axis", ir::Attribute(int64_t{1}));
  ir::Value *inMask = op("Unsqueeze", {in, classAxis}, "_mask")->output(0);
  ir::Value *masked =
      op("Where", {inMask, pick->output(0), f32("_zero_score", 0.0f)}, "_masked_target")->output(0);
  ir::Value *target = allReduce(masked, "sum", "_target");
  // loss = log(s) + m - t per sample, the class axis squeezed away. The reduction's last node
  // takes over the loss node's output value (its name, uses and role).
  auto finish = [&](const std::string &type, const std::vector<ir::Value *> &in) {
    ir::Node *last = graph.insertNodeBefore(n, type, in, {}, "", graph.uniqueNodeName(b + "_loss"));
    last->setPhase(ir::Phase::kForward);
    g.adopt(last);
    graph.transferOutputs(n, last);
    return last;
  };
  ir::Value *lse = op("Add", {op("Log", {se}, "_log_sum_exp")->output(0), m}, "_lse")->output(0);
  ir::Value *nll = op("Sub", {lse, target}, "_nll")->output(0);
  const bool none = reduction == "none";
  if (none && !hasIgnore) {
    finish("Squeeze", {nll, classAxis});
  } else {
    ir::Value *per = op("Squeeze", {nll, classAxis}, "_per_sample")->output(0);
    ir::Value *keep = nullptr;
    if (hasIgnore) {
      ir::Value *ignored =
          op("Equal", {lab, g.constI64(b + "_ignore_index", {ignore}, true)}, "_ignored")
              ->output(0);
      keep = op("Not", {ignored}, "_kept")->output(0);
      if (none)
        finish("Where", {keep, per, f32("_zero_loss", 0.0f)});
      else
        per = op("Where", {keep, per, f32("_zero_loss", 0.0f)}, "_per_sample_kept")->output(0);
    }
    if (reduction == "sum") {
      finish("ReduceSum", {per})->setAttr("keepdims", ir::Attribute(int64_t{0}));
    } else if (reduction == "mean") {
      // Divided by the number of samples not ignored (0/0 = NaN when all are, as the op).
      ir::Node *total = op("ReduceSum", {per}, "_total");
      total->setAttr("keepdims", ir::Attribute(int64_t{0}));
      ir::Value *count = nullptr;
      if (keep) {
        ir::Node *w = op("Cast", {keep}, "_weights");
        w->setAttr("to", ir::Attribute(static_cast<int64_t>(ir::DType::kFloat32)));
        ir::Node *c = op("ReduceSum", {w->output(0)}, "_count");
        c->setAttr("keepdims", ir::Attribute(int64_t{0}));
        count = c->output(0);
      } else {
        int64_t samples = 1;
        for (int64_t d : staticDims(labels))
          samples *= d;
        count = f32("_count", static_cast<float>(samples));
      }
      finish("Div", {total->output(0), count});
    }
  }
  graph.eraseNode(n);
  // The prediction (the split scores) is not gathered: the predicted class takes its place.
  if (predicts) {
    std::vector<ir::Value *> outs = graph.outputs();
    for (ir::Value *&o : outs)
      if (o == st.prediction)
        o = predicted;
    graph.setOutputs(outs);
    st.prediction = predicted;
  }
  return Status::ok();
}

} // namespace dtc::passes::tp
