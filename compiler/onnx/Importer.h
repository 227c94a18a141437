// ONNX import: a model file (binary protobuf `.onnx`, or ONNX text syntax `.onnxtxt` parsed by
// libonnx's own parser) into an ir::Graph in canonical form (DESIGN.md sections 3-4).
#pragma once

#include "compiler/ir/Graph.h"
#include "compiler/support/Diagnostics.h"
#include "compiler/support/Status.h"

#include <memory>
#include <string>

namespace onnx {
class ModelProto;
}

namespace dtc::onnxio {

/// What import may change in the model before it becomes a graph.
struct ImportOptions {
  /// Give every use of a constant-filled floating-point initializer its own copy
  /// (compiler/onnx/UntieInitializers.h; dtc-compile --untie-initializers).
  bool untieInitializers = false;
};

/// Reads and imports the model at `path`. The format is chosen by content: ONNX text syntax
/// when the file is text starting with `<` or a graph/model header, binary protobuf otherwise
/// (`.onnxtxt`/`.onnxtext` always parse as text).
///
/// What import does:
///  - external data is resolved relative to the model file's folder; absolute locations,
///    locations escaping that folder, missing files and ranges past the end are errors naming
///    the tensor; the bytes are not read (TensorData loads them on first use);
///  - initializers also listed as graph inputs become inputs with a default value;
///  - with `options.untieInitializers`, merged initializers are untied (UntieInitializers.h);
///  - sequence operators are rewritten into tensor operators when their lengths and positions
///    are static (compiler/onnx/SequenceRewrite.h), otherwise an error naming the node;
///  - the opset-23 function ops RMSNormalization, RotaryEmbedding and Attention are expanded
///    into primitive ops (compiler/onnx/FunctionOps.h);
///  - Constant nodes (every value_* form) become constant initializers;
///  - nodes are sorted topologically (a cycle, or an input nobody produces, is an error naming
///    the node);
///  - every node is checked against its op's form for the model's opset (7 to 23) and rewritten
///    into the canonical form (ops/OpDef.h); an unsupported op is an error naming the node,
///    op type and domain and listing the supported ops;
///  - declared types (graph inputs/outputs, value_info) are attached; unnamed dims of graph
///    inputs get fresh symbols (unk__0, ...).
/// Errors are "<file or node>: <what>".
Expected<std::unique_ptr<ir::Graph>> importModelFile(const std::string &path, Diagnostics &diags,
                                                     const ImportOptions &options = {});

/// Imports an already parsed model; `modelDir` is the folder external data is resolved
/// against and `displayName` names the model in messages. Weights are moved out of `model`.
Expected<std::unique_ptr<ir::Graph>> importModelProto(onnx::ModelProto &model,
                                                      const std::string &modelDir,
                                                      const std::string &displayName,
                                                      Diagnostics &diags,
                                                      const ImportOptions &options = {});

} // namespace dtc::onnxio
