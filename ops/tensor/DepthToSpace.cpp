// DepthToSpace: moves blocks of channel data into spatial blocks, (N, C, H, W) -> (N, C/b^2,
// H*b, W*b) (ONNX DepthToSpace-1 DCR order only, -11 adds mode DCR | CRD, -13 bfloat16; one
// canonical form, DCR being the default). Folds. Gradient: the inverse permutation
// (setSpaceDepthFacets, ops/tensor/TensorCommon.h).
#include "ops/tensor/TensorCommon.h"

namespace dtc::ops {

OpDef defineDepthToSpace() {
  OpDef d;
  d.name = "DepthToSpace";
  d.version(1)
      .in("input", "T")
      .out("output", "T")
      .attr("blocksize", ir::AttrKind::kInt, /*required=*/true)
      .type("T", kAllTypes & ~bit(ir::DType::kBFloat16));
  d.version(11).attr("mode", ir::AttrKind::kString);
  d.version(13).type("T", kAllTypes);
  setSpaceDepthFacets(d, /*depthToSpace=*/true);
  return d;
}

} // namespace dtc::ops
