// ONNX export: ir::Graph -> ModelProto / .onnx file. Standard-domain graphs pass the ONNX
// checker and re-import to the same IR.
#pragma once

#include "compiler/ir/Graph.h"
#include "compiler/support/Status.h"

#include <cstdint>
#include <string>

namespace onnx {
class ModelProto;
}

namespace dtc::onnxio {

struct ExportOptions {
  /// When the initializers' bytes add up to more than this, every initializer of at least
  /// `externalMinBytes` goes to one external data file `<model file name>.data` beside the
  /// model (protobuf cannot serialize messages over 2 GiB).
  int64_t externalThresholdBytes = int64_t{2} << 30;
  int64_t externalMinBytes = 1024;
};

/// Builds the ModelProto (all initializers inline). Errors name the tensor whose external data
/// cannot be read.
Expected<onnx::ModelProto> exportModel(const ir::Graph &g);

/// Writes the model to `path` (and its external data file when needed). Writes to temporary
/// files and renames them into place, so a failure never leaves an empty or partial model.
Status writeModelFile(const ir::Graph &g, const std::string &path, const ExportOptions &opts = {});

} // namespace dtc::onnxio
