// Writing the trained model (see ExportModel.h).
#include "runtime/ExportModel.h"

#include "compiler/onnx/ModelFile.h"
#include "compiler/onnx/UntieInitializers.h"
#include "compiler/support/FileIO.h"

#include <onnx/onnx_pb.h>

#include <map>
#include <set>

namespace dtc::rt {

Status exportTrainedModel(const std::string &modelPath, const std::vector<HostArray> &initializers,
                          const std::string &outPath, bool untieInitializers) {
  onnx::ModelProto model;
  DTC_RETURN_IF_ERROR(onnxio::readModelFile(modelPath, model));
  if (untieInitializers) {
    DTC_RETURN_IF_ERROR(onnxio::untieInitializers(*model.mutable_graph()).status());
  }
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
  // An eval-mode model: BatchNormalization nodes exported in training mode (extra outputs, or
  // training_mode=1) normalize with the trained running statistics instead, as model.eval()
  // would. Outputs some node or the graph still reads are kept (and so is the node's mode).
  std::set<std::string> read;
  for (const onnx::NodeProto &n : model.graph().node())
    for (const std::string &in : n.input())
      read.insert(in);
  for (const onnx::ValueInfoProto &o : model.graph().output())
    read.insert(o.name());
  for (onnx::NodeProto &n : *model.mutable_graph()->mutable_node()) {
    if (n.op_type() != "BatchNormalization" || (!n.domain().empty() && n.domain() != "ai.onnx"))
      continue;
    bool extraRead = false;
    for (int i = 1; i < n.output_size(); ++i)
      extraRead = extraRead || (!n.output(i).empty() && read.count(n.output(i)));
    if (extraRead)
      continue;
    while (n.output_size() > 1)
      n.mutable_output()->RemoveLast();
    for (int i = 0; i < n.attribute_size(); ++i)
      if (n.attribute(i).name() == "training_mode") {
        n.mutable_attribute()->DeleteSubrange(i, 1);
        break;
      }
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    return Status::error(outPath, "cannot serialize the model (a binary ONNX model is limited to "
                                  "2 GiB)");
  return writeFileAtomically(outPath, bytes);
}

} // namespace dtc::rt
