// MaxPool: max over sliding windows of X [N, C, D1..Dn] (onnx/docs/Operators.md#MaxPool).
// Forms: 1 (Y only), 8 (optional Indices output, storage_order), 10 (dilations, ceil_mode),
// 11 (same form, reworded pads), 12 (int8/uint8 types). Every form is already canonical.
#include "ops/OpDef.h"
#include "ops/nn/NNCommon.h"

namespace dtc::ops {

OpDef defineMaxPool() {
  OpDef d;
  d.name = "MaxPool";
  d.version(1)
      .in("X", "T")
      .out("Y", "T")
      .attr("auto_pad", ir::AttrKind::kString)
      .attr("kernel_shape", ir::AttrKind::kInts, /*required=*/true)
      .attr("pads", ir::AttrKind::kInts)
      .attr("strides", ir::AttrKind::kInts)
      .type("T", kFloatTypes & ~bit(ir::DType::kBFloat16));
  d.version(8)
      .optOut("Indices", "I")
      .attr("storage_order", ir::AttrKind::kInt)
      .type("I", kInt64Type);
  d.version(10).attr("ceil_mode", ir::AttrKind::kInt).attr("dilations", ir::AttrKind::kInts);
  d.version(11);
  d.version(12).type("T", (kFloatTypes & ~bit(ir::DType::kBFloat16)) | bit(ir::DType::kInt8) |
                              bit(ir::DType::kUInt8));
  d.infer = [](InferenceContext &ctx) -> Status {
    int64_t order = ctx.node().attrInt("storage_order", 0);
    if (order != 0 && order != 1)
      return ctx.error("storage_order must be 0 (row major) or 1 (column major), got " +
                       std::to_string(order));
    DTC_RETURN_IF_ERROR(nn::inferPool(ctx));
    if (ctx.node().numOutputs() > 1)
      ctx.setOutputDType(1, ir::DType::kInt64);
    return Status::ok();
  };
  return d;
}

} // namespace dtc::ops
