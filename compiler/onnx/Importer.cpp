// STUB importer (to be written).
#include "compiler/onnx/Importer.h"

#include <onnx/onnx_pb.h>

namespace dtc::onnxio {

Expected<std::unique_ptr<ir::Graph>> importModelFile(const std::string &path, Diagnostics &) {
  return Status::error(path, "import not implemented");
}

Expected<std::unique_ptr<ir::Graph>> importModelProto(onnx::ModelProto &, const std::string &,
                                                      const std::string &displayName,
                                                      Diagnostics &) {
  return Status::error(displayName, "import not implemented");
}

} // namespace dtc::onnxio
