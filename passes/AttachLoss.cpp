// attach-loss: adds the training loss to a forward graph. The loss reads one model output (the
// first, or TrainingConfig::lossOutput) and a new label input, and reduces to a scalar mean over
// the batch, as the PyTorch losses of the same name with reduction='mean':
//   softmax-cross-entropy  ONNX SoftmaxCrossEntropyLoss = torch.nn.CrossEntropyLoss: scores
//                          (N, C, d1..dk), int64 labels (N, d1..dk), ignore_index; another
//                          class axis (--class-axis) is transposed to 1 first
//   mse                    mean((y - label)^2) = torch.nn.MSELoss
//   bce-with-logits        mean(max(x, 0) - x*z + log(1 + exp(-|x|))) = torch.nn.BCEWithLogitsLoss
//                          (its numerically stable form)
//   model                  the model output already is the loss (a one-element float tensor)
// The graph's outputs become the loss, then the prediction (the output the loss reads).
#include "ops/OpDef.h"
#include "passes/Passes.h"

namespace dtc::passes {
namespace {

class LossBuilder {
public:
  LossBuilder(ir::Graph &g, Diagnostics &diags) : g_(g), diags_(diags) {}

  Expected<ir::Value *> node(const std::string &op, const std::vector<ir::Value *> &inputs,
                             const std::map<std::string, ir::Attribute> &attrs = {}) {
    const std::string name = g_.uniqueName("loss/" + op);
    ir::Node *n = g_.addNode(op, inputs, {name}, "", name);
    for (const auto &[k, a] : attrs)
      n->setAttr(k, a);
    DTC_RETURN_IF_ERROR(ops::inferNode(*n, diags_));
    return n->output(0);
  }
  ir::Value *scalar(float v) {
    const std::string name = g_.uniqueName("loss/const");
    return g_.addConstant(name, ir::TensorData::fromFloats(name, {}, {v}));
  }
  /// Mean over every element, as a scalar.
  Expected<ir::Value *> mean(ir::Value *x) {
    return node("ReduceMean", {x}, {{"keepdims", ir::Attribute(int64_t{0})}});
  }

private:
  ir::Graph &g_;
  Diagnostics &diags_;
};

class AttachLossPass : public Pass {
public:
  std::string name() const override { return "attach-loss"; }
  std::string description() const override {
    return "add the training loss (and its label input) to the model's output";
  }

  Status run(ir::Graph &g, PassContext &ctx) override {
    if (!ctx.training)
      return Status::error("attach-loss", "needs a training compilation");
    const TrainingConfig &cfg = *ctx.training;
    ir::TrainingRoles &st = g.training();
    if (g.outputs().empty())
      return Status::error("attach-loss", "the model has no outputs");
    ir::Value *pred = nullptr;
    std::string names;
    for (ir::Value *o : g.outputs()) {
      names += (names.empty() ? "'" : ", '") + o->name() + "'";
      if (cfg.lossOutput.empty() ? !pred : o->name() == cfg.lossOutput)
        pred = o;
    }
    if (!pred)
      return Status::error("--loss-output '" + cfg.lossOutput + "'",
                           "is not a model output (outputs: " + names + ")");
    const std::string where = "loss '" + cfg.loss + "' on output '" + pred->name() + "'";
    if (pred->dtype() != ir::DType::kFloat32 || !pred->shape().isStatic())
      return Status::error(where, "needs a f32 output with a static shape, got " +
                                      pred->type().str());
    LossBuilder b(g, ctx.diags);
    const std::vector<int64_t> ps = pred->shape().staticSizes();
    ir::Value *loss = nullptr;

    auto addLabel = [&](ir::DType dtype, std::vector<int64_t> shape) -> Expected<ir::Value *> {
      if (g.findValue(cfg.labelName))
        return Status::error("label '" + cfg.labelName + "'",
                             "the model already has a value of that name; choose another with "
                             "--label-name");
      ir::Value *label = g.createValue(cfg.labelName, {dtype, ir::Shape::ofStatic(shape)});
      g.addInput(label);
      st.label = label;
      return label;
    };

    if (cfg.loss == "softmax-cross-entropy") {
      if (ps.size() < 2)
        return Status::error(where, "needs scores of rank >= 2 (N, C, d1..dk), got " +
                                        pred->type().str());
      const int64_t rank = static_cast<int64_t>(ps.size());
      const int64_t axis = cfg.classAxis < 0 ? cfg.classAxis + rank : cfg.classAxis;
      if (axis < 1 || axis >= rank)
        return Status::error("--class-axis " + std::to_string(cfg.classAxis),
                             "must name a non-batch axis of " + pred->type().str());
      if (axis != 1) {
        // Move the class axis to 1, as SoftmaxCrossEntropyLoss wants: (N, .., C, ..) -> (N, C, ..).
        std::vector<int64_t> perm = {0, axis};
        for (int64_t a = 1; a < rank; ++a)
          if (a != axis)
            perm.push_back(a);
        DTC_ASSIGN_OR_RETURN(pred, b.node("Transpose", {pred}, {{"perm", ir::Attribute(perm)}}));
      }
      std::vector<int64_t> ls = pred->shape().staticSizes();
      ls.erase(ls.begin() + 1);
      DTC_ASSIGN_OR_RETURN(ir::Value * label, addLabel(ir::DType::kInt64, ls));
      DTC_ASSIGN_OR_RETURN(loss, b.node("SoftmaxCrossEntropyLoss", {pred, label},
                                        {{"reduction", ir::Attribute("mean")},
                                         {"ignore_index", ir::Attribute(cfg.ignoreIndex)}}));
    } else if (cfg.loss == "mse") {
      DTC_ASSIGN_OR_RETURN(ir::Value * label, addLabel(ir::DType::kFloat32, ps));
      DTC_ASSIGN_OR_RETURN(ir::Value * d, b.node("Sub", {pred, label}));
      DTC_ASSIGN_OR_RETURN(ir::Value * sq, b.node("Mul", {d, d}));
      DTC_ASSIGN_OR_RETURN(loss, b.mean(sq));
    } else if (cfg.loss == "bce-with-logits") {
      DTC_ASSIGN_OR_RETURN(ir::Value * z, addLabel(ir::DType::kFloat32, ps));
      DTC_ASSIGN_OR_RETURN(ir::Value * relu, b.node("Relu", {pred}));
      DTC_ASSIGN_OR_RETURN(ir::Value * xz, b.node("Mul", {pred, z}));
      DTC_ASSIGN_OR_RETURN(ir::Value * abs, b.node("Abs", {pred}));
      DTC_ASSIGN_OR_RETURN(ir::Value * neg, b.node("Neg", {abs}));
      DTC_ASSIGN_OR_RETURN(ir::Value * ex, b.node("Exp", {neg}));
      DTC_ASSIGN_OR_RETURN(ir::Value * onePlus, b.node("Add", {ex, b.scalar(1.0f)}));
      DTC_ASSIGN_OR_RETURN(ir::Value * log, b.node("Log", {onePlus}));
      DTC_ASSIGN_OR_RETURN(ir::Value * t, b.node("Sub", {relu, xz}));
      DTC_ASSIGN_OR_RETURN(ir::Value * all, b.node("Add", {t, log}));
      DTC_ASSIGN_OR_RETURN(loss, b.mean(all));
    } else if (cfg.loss == "model") {
      if (*pred->shape().numElements() != 1)
        return Status::error(where, "with --loss model the output must hold one element (the "
                                    "loss), got " +
                                        pred->type().str());
      DTC_ASSIGN_OR_RETURN(loss, b.mean(pred));
      pred = nullptr;
    } else {
      return Status::error("--loss '" + cfg.loss + "'",
                           "unknown loss (known: softmax-cross-entropy, mse, bce-with-logits, "
                           "model)");
    }
    // Outputs: the loss, then the prediction; the other model outputs are not computed.
    g.setOutputs(pred ? std::vector<ir::Value *>{loss, pred} : std::vector<ir::Value *>{loss});
    st.loss = loss;
    st.prediction = pred;
    return Status::ok();
  }
};

} // namespace

std::unique_ptr<Pass> createAttachLossPass() { return std::make_unique<AttachLossPass>(); }

} // namespace dtc::passes
