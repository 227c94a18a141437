// canonicalize: constant folding (including the Shape->Gather->Unsqueeze->Concat->Reshape
// chains exporters emit for a dynamic batch), Identity removal and dead-node removal; warns
// when a constant shape hard-codes the batch size.
#include "ops/OpDef.h"
#include "ops/training/ConvGradRules.h"
#include "passes/Passes.h"
#include "passes/ShapeInference.h"

#include <set>

namespace dtc::passes {
namespace {

/// Folded tensors larger than this stay computed at run time (a ConstantOfShape or Expand of
/// a big shape would otherwise bloat the model).
constexpr int64_t kMaxFoldElements = int64_t{1} << 20;

/// A value whose contents are known at compile time and may be folded into: constants, and
/// non-float initializers (shape tensors; integers are never trained), including those listed
/// as inputs with a default value. Float parameters are trained, so folding through them would
/// freeze them.
bool isFoldable(const ir::Value *v) {
  if (!v || !v->isInitializer())
    return false;
  return v->isConstant() || !ir::isFloat(v->dtype());
}

bool smallStatic(const ir::Value *v) {
  auto n = v->shape().numElements();
  return n && *n <= kMaxFoldElements;
}

class CanonicalizePass : public Pass {
public:
  std::string name() const override { return "canonicalize"; }
  std::string description() const override {
    return "constant folding, shape-chain folding, Identity and dead-node removal";
  }

  Status run(ir::Graph &graph, PassContext &ctx) override {
    // Each round re-infers types (folding needs them) and folds what became constant; the
    // loop ends on the first round that changes nothing, whose inference is then current.
    bool changed = true;
    for (int round = 0; round < 16 && changed; ++round) {
      ops::ShapeValueMap shapeValues;
      DTC_RETURN_IF_ERROR(inferShapes(graph, ctx.diags, &shapeValues));
      changed = false;
      for (ir::Node *n : graph.nodes()) {
        if (removeIdentity(graph, n) || foldShapeValues(graph, n, shapeValues) ||
            foldConstants(graph, n, ctx) || rewriteReshapeTarget(graph, n, shapeValues) ||
            resolveAutoPad(n)) {
          changed = true;
        }
      }
      changed |= removeDeadNodes(graph);
    }
    graph.removeDeadValues();
    if (changed) // stopped by the round limit: bring the types up to date
      DTC_RETURN_IF_ERROR(inferShapes(graph, ctx.diags));
    // Only where the compilation is known to be forward-only (option "inference", set by
    // dtc-compile --inference): the import-time canonicalize of a training compilation runs
    // without ctx.training too, and its BatchNormalization nodes must stay for the training
    // passes (converted here, their running statistics became inputs to be trained).
    if (!ctx.training && ctx.options.count("inference"))
      DTC_RETURN_IF_ERROR(batchStatisticsForInference(graph, ctx.diags));
    // bind-dims re-runs canonicalize on the bound graph, where the first run (on the graph as
    // exported) already warned and every batch now looks fixed: it turns the warning off.
    if (!ctx.options.count("no-batch-warnings"))
      warnHardCodedBatch(graph, ctx.diags);
    return Status::ok();
  }

private:
  /// An inference compilation of a graph exported in training mode (BatchNormalization with
  /// training_mode=1, as torch.onnx.export(..., training=TRAINING) writes it): ONNX defines Y
  /// with the batch's own mean and variance (BatchNormalization-15), so the node becomes
  /// ai.dtc.BatchNormTraining, whose running-statistic outputs are left unused, and the result
  /// equals onnxruntime's. A warning says how to get the running statistics instead (an export
  /// in eval mode). The running-statistic outputs of the ONNX node must be unused: an inference
  /// plan does not update state.
  ///
  /// A Dropout whose training_mode input is an initializer holding true (opset 12+, as a
  /// training-mode export writes it) drops at random, which an inference plan does not: an
  /// error naming the node at compile time (the kernel refused it only when the plan ran).
  static Status batchStatisticsForInference(ir::Graph &graph, Diagnostics &diags) {
    for (ir::Node *n : graph.nodes()) {
      if (!n->domain().empty() || n->opType() != "Dropout" || n->numInputs() < 3 || !n->input(2))
        continue;
      const ir::Value *mode = n->input(2);
      if (!mode->isInitializer() || mode->dtype() != ir::DType::kBool)
        continue;
      DTC_ASSIGN_OR_RETURN(const std::string *bytes, mode->initializer()->bytes());
      if (bytes->size() == 1 && (*bytes)[0] != 0)
        return Status::error(n->where(),
                             "training_mode is true (exported in training mode): Dropout then "
                             "drops at random, which an inference plan does not do; export the "
                             "model in eval mode (model.eval())");
    }
    bool warned = false;
    for (ir::Node *n : graph.nodes()) {
      if (!n->domain().empty() || n->opType() != "BatchNormalization" ||
          n->attrInt("training_mode", 0) == 0)
        continue;
      for (size_t o = 1; o < n->numOutputs(); ++o)
        if (n->output(o) && (n->output(o)->hasUses() || n->output(o)->isGraphOutput()))
          return Status::error(n->where(),
                               "training_mode=1 with the running statistics used (output '" +
                                   n->output(o)->name() +
                                   "') is not supported by an inference compilation (it "
                                   "updates no state); compile for training, or export the model "
                                   "in eval mode");
      DTC_ASSIGN_OR_RETURN(ir::Node * bn,
                           insertBatchNormTraining(graph, n, n->name() + "/batch_stats", diags));
      if (!warned)
        diags.warning(n->where(),
                      "training_mode=1 (exported in training mode): inference normalizes with "
                      "each batch's statistics, as the graph says; export the model in eval mode "
                      "(model.eval()) to normalize with the running statistics");
      warned = true;
      n->output(0)->replaceAllUsesWith(bn->output(0));
      graph.eraseNode(n);
    }
    return Status::ok();
  }

  /// Conv, MaxPool and AveragePool with auto_pad SAME_UPPER, SAME_LOWER or VALID get the
  /// explicit pads ONNX defines for them (convPoolShapeInference; ops::grad::convPoolWindow)
  /// once their spatial input sizes are static, so kernels, gradients and exports see one form
  /// (the CPU kernels refused auto_pad). A window that does not resolve is left to shape
  /// inference's error.
  static bool resolveAutoPad(ir::Node *n) {
    const std::string &op = n->opType();
    if (!n->domain().empty() || (op != "Conv" && op != "MaxPool" && op != "AveragePool") ||
        n->attrString("auto_pad", "NOTSET") == "NOTSET" || n->numInputs() < 1 || !n->input(0))
      return false;
    auto spatialOf = [](const ir::Value *v, std::vector<int64_t> &out) {
      const ir::Shape &s = v->shape();
      if (!s.hasRank() || s.rank() < 3)
        return false;
      for (size_t i = 2; i < s.rank(); ++i) {
        if (!s[i].isStatic())
          return false;
        out.push_back(s[i].value());
      }
      return true;
    };
    std::vector<int64_t> in, kernel = n->attrInts("kernel_shape");
    if (!spatialOf(n->input(0), in))
      return false;
    if (kernel.empty() && op == "Conv" &&
        (n->numInputs() < 2 || !n->input(1) || !spatialOf(n->input(1), kernel)))
      return false;
    auto window = ops::grad::convPoolWindow(*n, in, kernel);
    if (!window)
      return false;
    n->setAttr("pads", ir::Attribute(window->pads));
    n->removeAttr("auto_pad");
    // SAME's output is ceil(in / stride) whatever ceil_mode says (shape inference and
    // onnxruntime ignore it); with these pads the floor formula gives exactly that, while
    // ceil_mode=1 could add an element where the padding was clamped at 0 (in 6, kernel 1,
    // stride 4: 2 outputs, 3 with ceil).
    n->removeAttr("ceil_mode");
    return true;
  }

  /// Identity(x) -> x, and so is a Cast to the type x already has (torch.onnx.export's dynamo
  /// path casts every Softmax output to float), unless it defines a graph output (its name is
  /// the model's interface) fed by another graph output or input.
  static bool removeIdentity(ir::Graph &, ir::Node *n) {
    if (!n->domain().empty() || n->numInputs() < 1 || !n->input(0))
      return false;
    const bool sameTypeCast = n->opType() == "Cast" &&
                              n->input(0)->dtype() != ir::DType::kUndefined &&
                              n->attrInt("to", -1) == static_cast<int64_t>(n->input(0)->dtype());
    if (n->opType() != "Identity" && !sameTypeCast)
      return false;
    ir::Value *in = n->input(0);
    ir::Value *out = n->output(0);
    if (out->isGraphOutput())
      return false;
    out->replaceAllUsesWith(in);
    return true;
  }

  /// Integer outputs whose contents data propagation knows completely become constants.
  static bool foldShapeValues(ir::Graph &graph, ir::Node *n, const ops::ShapeValueMap &sv) {
    if (n->numOutputs() == 0)
      return false;
    std::vector<ir::TensorDataPtr> data;
    for (ir::Value *out : n->outputs()) {
      auto it = sv.find(out);
      if (it == sv.end() || out->dtype() != ir::DType::kInt64 || !out->shape().hasRank() ||
          out->shape().rank() > 1)
        return false;
      std::vector<int64_t> values;
      for (const ir::Dim &d : it->second) {
        if (!d.isStatic())
          return false;
        values.push_back(d.value());
      }
      std::vector<int64_t> dims;
      if (out->shape().rank() == 1)
        dims.push_back(static_cast<int64_t>(values.size()));
      else if (values.size() != 1)
        return false;
      data.push_back(ir::TensorData::fromInt64s(out->name(), dims, values));
    }
    graph.foldToConstants(n, data);
    return true;
  }

  /// Evaluates nodes whose inputs are all compile-time constants with the op's fold function.
  static bool foldConstants(ir::Graph &graph, ir::Node *n, PassContext &ctx) {
    const ops::OpDef *def = ops::lookupOp(n->domain(), n->opType());
    if (!def || !def->fold || n->numOutputs() == 0)
      return false;
    std::vector<ir::TensorDataPtr> inputs;
    for (ir::Value *in : n->inputs()) {
      if (in && !isFoldable(in))
        return false;
      inputs.push_back(in ? in->initializer() : nullptr);
    }
    for (ir::Value *out : n->outputs())
      if (!smallStatic(out))
        return false;
    ops::FoldContext fctx(*n, std::move(inputs));
    auto result = def->fold(fctx);
    if (!result) {
      ctx.diags.warning(n->where(), "not folded: " + result.status().message());
      return false;
    }
    if (result->size() != n->numOutputs())
      return false;
    for (size_t i = 0; i < result->size(); ++i) {
      const ir::TensorDataPtr &t = (*result)[i];
      if (!t || t->dtype() != n->output(i)->dtype() ||
          ir::Shape::ofStatic(t->dims()) != n->output(i)->shape()) {
        ctx.diags.warning(n->where(), "not folded: the folded value of output '" +
                                          n->output(i)->name() +
                                          "' does not match its inferred type");
        return false;
      }
    }
    graph.foldToConstants(n, *result);
    return true;
  }

  /// Reshape whose target is computed from Shape(x) on a symbolic batch: replace the computed
  /// target by a constant using 0 ("copy this input dim") and -1 ("infer"), e.g.
  /// Concat(Unsqueeze(Gather(Shape(x), 0)), [-1]) on x: [N,16,7,7] becomes [0,-1].
  static bool rewriteReshapeTarget(ir::Graph &graph, ir::Node *n, const ops::ShapeValueMap &sv) {
    if (n->opType() != "Reshape" || !n->domain().empty() || !n->input(1) ||
        n->input(1)->isInitializer())
      return false;
    auto it = sv.find(n->input(1));
    if (it == sv.end())
      return false;
    const ir::Shape &inShape = n->input(0)->shape();
    bool allowZero = n->attrInt("allowzero", 0) != 0;
    std::vector<int64_t> target;
    int inferred = 0;
    for (size_t i = 0; i < it->second.size(); ++i) {
      const ir::Dim &d = it->second[i];
      if (d.isStatic()) {
        if (d.value() == 0 && allowZero) {
          target.push_back(0);
          continue;
        }
        if (d.value() == -1)
          ++inferred;
        target.push_back(d.value());
      } else if (!allowZero && inShape.hasRank() && i < inShape.rank() && inShape[i] == d &&
                 !d.isUnknown()) {
        target.push_back(0);
      } else {
        target.push_back(-1);
        ++inferred;
      }
    }
    if (inferred > 1)
      return false;
    ir::Value *c =
        graph.addConstant(n->name() + ".shape",
                          ir::TensorData::fromInt64s(
                              n->name() + ".shape", {static_cast<int64_t>(target.size())}, target));
    n->setInput(1, c);
    return true;
  }

  /// Removes nodes none of whose outputs is used or a graph output.
  static bool removeDeadNodes(ir::Graph &graph) {
    bool changed = false;
    std::vector<ir::Node *> nodes = graph.nodes();
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      ir::Node *n = *it;
      bool live = false;
      for (ir::Value *out : n->outputs())
        live |= out->hasUses() || graph.isLiveRoot(out);
      if (!live) {
        graph.eraseNode(n);
        changed = true;
      }
    }
    return changed;
  }

  /// A shape constant that fixes the batch size breaks batch sharding (data parallelism
  /// splits the batch): warn naming the node.
  static void warnHardCodedBatch(const ir::Graph &graph, Diagnostics &diags) {
    std::set<std::string> batchSymbols;
    std::set<int64_t> staticBatches;
    for (const ir::Value *in : graph.inputs()) {
      if (in->isInitializer() || !in->shape().hasRank() || in->shape().rank() == 0)
        continue;
      const ir::Dim &b = in->shape()[0];
      if (b.isSymbolic())
        batchSymbols.insert(b.symbols().begin(), b.symbols().end());
      else if (b.isStatic())
        staticBatches.insert(b.value());
    }
    auto hasBatchSymbol = [&](const ir::Dim &d) {
      for (const std::string &s : d.symbols())
        if (batchSymbols.count(s))
          return true;
      return false;
    };
    for (const ir::Node *n : graph.nodes()) {
      if (n->opType() != "Reshape" || !n->input(1) || !n->input(1)->isInitializer())
        continue;
      const ir::Shape &in = n->input(0)->shape();
      const ir::Shape &out = n->output(0)->shape();
      if (!in.hasRank() || !out.hasRank() || in.rank() == 0 || out.rank() == 0)
        continue;
      auto target = n->input(1)->initializer()->toInt64s();
      if (!target || target->empty())
        continue;
      if (hasBatchSymbol(in[0]) && out[0].isStatic())
        diags.warning(n->where(), "constant target shape fixes dimension 0 to " +
                                      std::to_string(out[0].value()) + " while the input's is " +
                                      in[0].str() +
                                      "; the batch size is hard-coded (re-export with a dynamic "
                                      "batch axis), so batch sharding cannot split this node");
      else if (batchSymbols.empty() && staticBatches.size() == 1 && in[0].isStatic() &&
               (*target)[0] == in[0].value() && in[0].value() == *staticBatches.begin() &&
               in[0].value() > 1)
        diags.warning(n->where(), "constant target shape starts with the model's fixed batch "
                                  "size " +
                                      std::to_string(in[0].value()) +
                                      "; the model was exported with a fixed batch, and batch "
                                      "sharding will break here (re-export with a dynamic "
                                      "batch axis)");
    }
  }
};

} // namespace

std::unique_ptr<Pass> createCanonicalizePass() { return std::make_unique<CanonicalizePass>(); }

} // namespace dtc::passes
