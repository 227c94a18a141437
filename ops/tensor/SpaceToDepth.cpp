// SpaceToDepth: moves spatial blocks into channels, (N, C, H, W) -> (N, C*b^2, H/b, W/b) (ONNX
// SpaceToDepth-1, -13 bfloat16; one canonical form); the inverse of DCR DepthToSpace. Folds.
// Gradient: the inverse permutation (setSpaceDepthFacets, ops/tensor/TensorCommon.h).
#include "ops/tensor/TensorCommon.h"

namespace dtc::ops {

OpDef defineSpaceToDepth() {
  OpDef d;
  d.name = "SpaceToDepth";
  d.version(1)
      .in("input", "T")
      .out("output", "T")
      .attr("blocksize", ir::AttrKind::kInt, /*required=*/true)
      .type("T", kAllTypes & ~bit(ir::DType::kBFloat16));
  d.version(13).type("T", kAllTypes);
  setSpaceDepthFacets(d, /*depthToSpace=*/false);
  return d;
}

} // namespace dtc::ops
