// ai.dtc.CheckLabels: the label check of a loss that does not read every class itself. The
// vocabulary-parallel cross-entropy (passes/TensorParallel.cpp) reads each label on the one tp
// rank whose class range holds it, so a label outside [0, C) would silently score 0 there; this
// op makes it the error SoftmaxCrossEntropyLoss gives on one device (ops/cpu/Loss.cpp).
#include "ops/OpDef.h"
#include "ops/Sharding.h"

namespace dtc::ops {

/// CheckLabels(labels) -> labels (a view: the output is the input, unchanged), int32 or int64
/// of any shape (N, d1..dk). Attributes: classes (C >= 1, required), ignore_index (optional).
/// The kernel fails the step when a label that is not ignore_index lies outside [0, C):
/// "label L at sample n is out of range [0, C)" (n = the index along axis 0), as
/// SoftmaxCrossEntropyLoss's kernels (ONNX SoftmaxCrossEntropyLoss-13 leaves such labels
/// undefined; PyTorch's cross_entropy asserts on them). Every rank of a tensor-parallel group
/// holds the same labels, so every rank reaches the same verdict before any collective that
/// reads them. No gradient (labels are discrete). Cost: one comparison per label, the labels
/// read, nothing written (the output aliases the input). Sharding: replicated.
OpDef defineCheckLabels() {
  OpDef d;
  d.name = "CheckLabels";
  d.domain = ir::kDtcDomain;
  d.version(1)
      .in("labels", "Tind")
      .out("checked", "Tind")
      .attr("classes", ir::AttrKind::kInt, true)
      .attr("ignore_index", ir::AttrKind::kInt)
      .type("Tind", kInt32Or64Types);
  d.infer = [](InferenceContext &ctx) -> Status {
    const int64_t classes = ctx.node().attrInt("classes", 0);
    if (classes < 1)
      return ctx.error("classes " + std::to_string(classes) + " is not positive");
    ctx.setOutputShape(0, ctx.inputShape(0));
    return Status::ok();
  };
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    return Cost{ctx.inputElements(0), ctx.inputBytes(0), 0};
  };
  d.sharding = replicatedSharding();
  return d;
}

} // namespace dtc::ops
