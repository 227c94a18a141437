// AveragePool: mean over sliding windows of X [N, C, D1..Dn] (onnx/docs/Operators.md#
// AveragePool). Forms: 7 (count_include_pad), 10 (ceil_mode), 11 (same form, reworded pads),
// 19 (dilations). Every form is already canonical.
#include "ops/OpDef.h"
#include "ops/nn/NNCommon.h"

namespace dtc::ops {

OpDef defineAveragePool() {
  OpDef d;
  d.name = "AveragePool";
  d.version(7)
      .in("X", "T")
      .out("Y", "T")
      .attr("auto_pad", ir::AttrKind::kString)
      .attr("count_include_pad", ir::AttrKind::kInt)
      .attr("kernel_shape", ir::AttrKind::kInts, /*required=*/true)
      .attr("pads", ir::AttrKind::kInts)
      .attr("strides", ir::AttrKind::kInts)
      .type("T", kFloatTypes & ~bit(ir::DType::kBFloat16));
  d.version(10).attr("ceil_mode", ir::AttrKind::kInt);
  d.version(11);
  d.version(19).attr("dilations", ir::AttrKind::kInts);
  d.infer = nn::inferPool;
  return d;
}

} // namespace dtc::ops
