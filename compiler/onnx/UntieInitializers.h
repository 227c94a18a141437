// --untie-initializers (issue 12): gives every use of a merged initializer its own copy, so that
// weights an exporter merged because their values were equal train as separate parameters.
// torch.onnx.export's default optimizer (onnx_ir's DeduplicateInitializersPass) merges every
// LayerNorm's ones and every zero bias of a freshly initialized model into one initializer.
#pragma once

#include "compiler/support/Status.h"

#include <string>
#include <vector>

namespace onnx {
class GraphProto;
}

namespace dtc::onnxio {

/// One initializer that was given copies.
struct UntiedInitializer {
  std::string name;                ///< the initializer; it keeps its first use
  std::vector<std::string> copies; ///< the new initializers, one per further use, in node order
};

/// The rule: a floating-point initializer of the main graph (float, float16, bfloat16, double)
/// whose elements all hold the same value (what equal-value merging makes of ones and zeros;
/// trained weights are never constant-filled, and an intentional tie such as GPT-2's token
/// embedding and output projection is not), that is neither a graph input nor a graph output,
/// and that more than one node input reads (directly, or through Identity nodes, which are
/// bypassed) gets a copy for each use after the first: "<name>.untied.<k>", k = 1, 2, ... (a
/// further suffix when the name is taken), with the same type and bytes, and that use reads it.
/// Initializers whose data is external are left as they are. Deterministic: the same graph
/// gives the same copies, so the runtime (weights) and --export (the trained, untied model)
/// redo it from the source model. Errors only for unreadable tensor data (naming it).
Expected<std::vector<UntiedInitializer>> untieInitializers(onnx::GraphProto &graph);

} // namespace dtc::onnxio
