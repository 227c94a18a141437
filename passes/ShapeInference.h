// Shape inference as a function, for passes that need the symbolic shape values it computes
// (canonicalize folds Shape->Gather->Concat chains with them).
#pragma once

#include "compiler/ir/Graph.h"
#include "compiler/support/Diagnostics.h"
#include "ops/OpDef.h"

namespace dtc::passes {

/// Infers every node's output types in order (see createShapeInferencePass()). When
/// `shapeValues` is given it receives the symbolic contents of small integer tensors.
Status inferShapes(ir::Graph &graph, Diagnostics &diags, ops::ShapeValueMap *shapeValues = nullptr);

} // namespace dtc::passes
