// STUB exporter (to be written).
#include "compiler/onnx/Exporter.h"

#include <onnx/onnx_pb.h>

namespace dtc::onnxio {

Expected<onnx::ModelProto> exportModel(const ir::Graph &) {
  return Status::error("export not implemented");
}

Status writeModelFile(const ir::Graph &, const std::string &path, const ExportOptions &) {
  return Status::error(path, "export not implemented");
}

} // namespace dtc::onnxio
