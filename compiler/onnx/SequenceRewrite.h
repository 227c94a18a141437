// Import-time rewriting of ONNX sequence operators into tensor operators (issue 12): dtc's IR
// has tensors only, and exporters use sequences where a Python list of tensors had a length
// known when the model was traced (torch.split / chunk / unbind: SplitToSequence + SequenceAt,
// torch.stack / cat of a list: SequenceConstruct + ConcatFromSequence).
#pragma once

#include "compiler/support/Status.h"

#include <cstdint>

namespace onnx {
class GraphProto;
}

namespace dtc::onnxio {

/// Rewrites, in the order of `graph`'s node list, every sequence value into the list of tensor
/// names it holds, and the sequence ops into tensor ops (or none) at the model's ai.onnx
/// `opset`:
///  - SequenceEmpty -> []; SequenceConstruct(x1..xn) -> [x1..xn];
///  - SequenceInsert(s, t[, pos]) / SequenceErase(s[, pos]) -> the list with t inserted at / the
///    element at pos removed (default: at the end / the last; negative pos counts from the end);
///  - SplitToSequence(x[, split]; axis, keepdims) -> Split (sizes from the constant `split`: a
///    1-D list of sizes, or a scalar chunk length with a smaller last chunk; without `split`,
///    chunks of 1, each squeezed when keepdims = 0), then the Split's outputs;
///  - SequenceAt(s, pos) -> Identity of element pos; SequenceLength(s) -> an int64 constant;
///  - ConcatFromSequence(s; axis, new_axis) -> Concat of the elements (each unsqueezed at axis
///    first when new_axis = 1).
/// Positions and `split` must be constants (initializers or Constant nodes), and a
/// SplitToSequence without a 1-D `split` needs the static length of its axis (from a graph
/// input, an initializer, a Constant or value_info). Errors name the node and say what is not
/// static: "node 's' (SplitToSequence): the length of axis 1 of 'x' is not known at import ...".
/// A sequence that is a graph input or output, or that feeds any other op, is an error too.
/// No-op for graphs without sequence ops.
Status rewriteSequences(onnx::GraphProto &graph, int64_t opset);

} // namespace dtc::onnxio
