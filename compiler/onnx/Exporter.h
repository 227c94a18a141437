// ONNX export: ir::Graph -> ModelProto / .onnx file. Standard-domain graphs pass the ONNX
// checker and re-import to the same IR.
#pragma once

#include "compiler/ir/Graph.h"
#include "compiler/support/Mesh.h"
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

/// Rank `rank`'s program of a training (or inference) graph partitioned over `mesh` (after the
/// training passes), as its own model (dtc-compile --emit onnx --rank R): on a pipeline the
/// nodes of the rank's stages (Send/Recv where values cross stages), all of its forward,
/// backward and optimizer nodes and collectives (ai.dtc nodes, with the ai.dtc opset import);
/// tensor-parallel split weights sliced to the rank's shard (ir::sliceShard, as dtc-run loads
/// them), every other initializer whole. Inputs: the graph inputs it reads (data, label, the
/// runtime-fed dtc::lr, dtc::step, ...); outputs: the graph outputs it computes (the loss on the
/// last stage), then the new values of the parameters and optimizer state it updates. Errors:
/// a rank outside the mesh ("--rank R: the plan has N rank(s)"), parameter-server and
/// central-storage strategies, a node reading a value another stage computes.
Expected<onnx::ModelProto> exportRankModel(const ir::Graph &g, const Mesh &mesh, int64_t rank);

/// writeModelFile for exportRankModel's model.
Status writeRankModelFile(const ir::Graph &g, const Mesh &mesh, int64_t rank,
                          const std::string &path, const ExportOptions &opts = {});

} // namespace dtc::onnxio
