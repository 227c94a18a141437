// mixed-precision (--precision bf16|fp16): autocast of the forward graph before autodiff, with
// PyTorch autocast's split of the work (Micikevicius et al. 2018, "Mixed Precision Training"):
// the matrix products MatMul (including attention's batched ones), Gemm and Conv read bf16/fp16
// copies of their f32 inputs and write a bf16/fp16 result that is cast straight back to f32, so
// every other op (softmax, normalizations, reductions, losses, elementwise) runs in f32 as
// before. Each use of a value gets its own cast: a value read by several products (a ResNet
// block's input feeding its convolution and the downsampling one, MatMul(x, x)) then receives
// its gradients in f32 through the casts' gradients and sums them in f32, where one shared cast
// would sum them in bf16 (no elementwise op has a bf16 kernel, and the sum would round). Parameters stay f32 (the master weights): the optimizer and its state are untouched
// and each weight's gradient arrives in f32 through Cast's gradient (a Cast back to f32), while
// the backward products (MatMulT, Gemm, ConvGradData, ConvGradWeight) run in low precision too.
#include "ops/OpDef.h"
#include "passes/Passes.h"


namespace dtc::passes {
namespace {

bool isLowPrecisionOp(const ir::Node &n) {
  if (!n.domain().empty())
    return false;
  const std::string &op = n.opType();
  return op == "MatMul" || op == "Gemm" || op == "Conv";
}

class MixedPrecisionPass : public Pass {
public:
  std::string name() const override { return "mixed-precision"; }
  std::string description() const override {
    return "autocast: MatMul, Gemm and Conv in bf16/fp16 between Casts, everything else in f32";
  }

  Status run(ir::Graph &graph, PassContext &ctx) override {
    if (!ctx.training)
      return Status::error("mixed-precision", "needs a training compilation");
    const std::string &precision = ctx.training->precision;
    if (precision == "fp32")
      return Status::ok();
    if (precision != "bf16" && precision != "fp16")
      return Status::error("--precision",
                           "unknown precision '" + precision + "' (known: fp32, bf16, fp16)");
    low_ = precision == "bf16" ? ir::DType::kBFloat16 : ir::DType::kFloat16;
    suffix_ = precision;
    for (ir::Node *n : graph.nodes()) {
      if (!isLowPrecisionOp(*n) || n->phase() != ir::Phase::kForward)
        continue;
      bool allF32 = n->numOutputs() == 1 && n->output(0)->dtype() == ir::DType::kFloat32;
      for (ir::Value *v : n->inputs())
        allF32 = allF32 && (!v || v->dtype() == ir::DType::kFloat32);
      if (!allF32)
        continue;
      // Gemm's C joins in f32 after the product (an Add), so that its gradient (a sum over the
      // rows) stays in f32; a Gemm that scales C (beta != 1) stays in f32 altogether.
      const bool gemmC = n->opType() == "Gemm" && n->input(2);
      if (gemmC && n->attrFloat("beta", 1.0f) != 1.0f) {
        ctx.diags.note(n->where(), "beta != 1: left in f32 by --precision " + precision);
        continue;
      }
      DTC_RETURN_IF_ERROR(convert(graph, n, gemmC, ctx.diags));
    }
    return Status::ok();
  }

private:
  /// Copies the placement annotations of `from` (pipeline stage, micro-batch, rank) to `to`.
  static void annotateLike(ir::Node *to, const ir::Node *from) {
    to->setPhase(from->phase());
    to->setStage(from->stage());
    to->setMicroBatch(from->microBatch());
    to->setPlacement(from->placement());
  }

  /// Emits one `Cast(to)` of `v` before `before`, named after `v`.
  Expected<ir::Value *> cast(ir::Graph &g, ir::Node *before, ir::Value *v, ir::DType to,
                             const std::string &suffix, Diagnostics &diags) {
    const std::string out = g.uniqueName(v->name() + "/" + suffix);
    ir::Node *c = g.insertNodeBefore(before, "Cast", {v}, {out}, "", g.uniqueNodeName(out));
    c->setAttr("to", ir::Attribute(static_cast<int64_t>(to)));
    annotateLike(c, before);
    DTC_RETURN_IF_ERROR(ops::inferNode(*c, diags));
    c->output(0)->setShard(v->shard());
    return c->output(0);
  }

  /// Rewrites Y = op(inputs) as Y = Cast<f32>(op(Cast<low>(inputs))) (Gemm's C added after the
  /// Cast when `gemmC`). Y keeps its name, uses and training roles; the product keeps the node's
  /// name.
  Status convert(ir::Graph &g, ir::Node *n, bool gemmC, Diagnostics &diags) {
    std::vector<ir::Value *> ins;
    const size_t count = gemmC ? 2 : n->numInputs();
    for (size_t i = 0; i < count; ++i) {
      ir::Value *v = n->input(i);
      if (!v) {
        ins.push_back(nullptr);
        continue;
      }
      DTC_ASSIGN_OR_RETURN(ir::Value * c, cast(g, n, v, low_, suffix_, diags));
      ins.push_back(c);
    }
    ir::Value *y = n->output(0);
    const std::string name = n->name();
    n->setName(g.uniqueNodeName(name + "/f32"));
    const std::string lowOut = g.uniqueName(y->name() + "/" + suffix_);
    ir::Node *p = g.insertNodeBefore(n, n->opType(), ins, {lowOut}, n->domain(), name);
    for (const auto &[key, attr] : n->attributes())
      if (!(gemmC && key == "beta"))
        p->setAttr(key, attr);
    annotateLike(p, n);
    p->setSharding(n->sharding());
    DTC_RETURN_IF_ERROR(ops::inferNode(*p, diags));
    p->output(0)->setShard(y->shard());

    const std::string back = g.uniqueNodeName(name + "/to_f32");
    if (!gemmC) {
      ir::Node *c = g.insertNodeBefore(n, "Cast", {p->output(0)}, {}, "", back);
      c->setAttr("to", ir::Attribute(static_cast<int64_t>(ir::DType::kFloat32)));
      annotateLike(c, n);
      g.transferOutputs(n, c);
      g.eraseNode(n);
      return Status::ok();
    }
    // Y = Cast(A'B') + C: the Cast gets a new value, the Add takes over Y.
    const std::string prod = g.uniqueName(y->name() + "/product");
    ir::Node *c = g.insertNodeBefore(n, "Cast", {p->output(0)}, {prod}, "", back);
    c->setAttr("to", ir::Attribute(static_cast<int64_t>(ir::DType::kFloat32)));
    annotateLike(c, n);
    DTC_RETURN_IF_ERROR(ops::inferNode(*c, diags));
    c->output(0)->setShard(y->shard());
    ir::Node *add = g.insertNodeBefore(n, "Add", {c->output(0), n->input(2)}, {}, "",
                                       g.uniqueNodeName(name + "/bias"));
    annotateLike(add, n);
    g.transferOutputs(n, add);
    g.eraseNode(n);
    return Status::ok();
  }

  ir::DType low_ = ir::DType::kBFloat16;
  std::string suffix_;
};

} // namespace

std::unique_ptr<Pass> createMixedPrecisionPass() { return std::make_unique<MixedPrecisionPass>(); }

} // namespace dtc::passes
