// Size: the number of elements of its input as an int64 scalar (ONNX Size-1; Size-13/19/21 only
// widen the input types). Data propagation records the (possibly symbolic) product, so that
// canonicalization folds it when the input's shape is static; its contents are never read.
#include "ops/tensor/TensorCommon.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineSize() {
  OpDef d;
  d.name = "Size";
  d.version(1).in("data", "T").out("size", "T1").type("T", kAllTypes).type("T1", kInt64Type);
  d.version(13);
  d.version(19);
  d.version(21);
  d.infer = [](InferenceContext &ctx) -> Status {
    ctx.setOutputShape(0, ir::Shape::ofStatic({}));
    const ir::Shape &x = ctx.inputShape(0);
    if (x.hasRank()) {
      ir::Dim n = ir::Dim::fixed(1);
      for (const ir::Dim &dim : x.dims())
        n = n * dim;
      ctx.setShapeValue(0, {n});
    }
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const ir::Node &node = ctx.node();
    int64_t n = 0;
    if (node.input(0) && node.input(0)->shape().isStatic())
      n = node.input(0)->shape().numElements().value_or(0);
    else if (ctx.numInputs() > 0 && ctx.input(0))
      n = ctx.input(0)->numElements();
    else
      return ctx.error("cannot fold Size: the input shape is not static");
    return std::vector<ir::TensorDataPtr>{
        ir::TensorData::fromInt64s(node.output(0)->name(), {}, {n})};
  };
  // Reads only the input's metadata: writes one int64.
  d.cost = writeOnlyCost();
  d.sharding = replicatedSharding();
  return d;
}

} // namespace dtc::ops
