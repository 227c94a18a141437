// Writing the trained model (see ExportModel.h).
#include "runtime/ExportModel.h"

#include "compiler/onnx/ModelFile.h"
#include "compiler/support/FileIO.h"

#include <onnx/onnx_pb.h>

#include <map>

namespace dtc::rt {

Status exportTrainedModel(const std::string &modelPath, const std::vector<HostArray> &initializers,
                          const std::string &outPath) {
  onnx::ModelProto model;
  DTC_RETURN_IF_ERROR(onnxio::readModelFile(modelPath, model));
  std::map<std::string, onnx::TensorProto *> byName;
  for (onnx::TensorProto &t : *model.mutable_graph()->mutable_initializer())
    byName.emplace(t.name(), &t);
  for (const HostArray &a : initializers) {
    const std::string where = modelPath + ": initializer '" + a.name + "'";
    auto it = byName.find(a.name);
    if (it == byName.end())
      return Status::error(where, "not found in the model's main graph");
    onnx::TensorProto &t = *it->second;
    std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
    if (t.data_type() != static_cast<int32_t>(a.dtype) || dims != a.shape)
      return Status::error(where, "the model's dtype or shape differs from the trained buffer's");
    t.clear_float_data();
    t.clear_int32_data();
    t.clear_int64_data();
    t.clear_double_data();
    t.clear_uint64_data();
    t.clear_string_data();
    t.clear_external_data();
    t.set_data_location(onnx::TensorProto::DEFAULT);
    t.set_raw_data(a.bytes);
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    return Status::error(outPath, "cannot serialize the model (a binary ONNX model is limited to "
                                  "2 GiB)");
  return writeFileAtomically(outPath, bytes);
}

} // namespace dtc::rt
