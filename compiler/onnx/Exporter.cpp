// ONNX export: IR -> ModelProto, written atomically through exclusive temporaries (FileIO.h),
// with automatic external data for models whose initializers exceed protobuf's 2 GiB limit.
#include "compiler/onnx/Exporter.h"

#include "compiler/ir/Sharding.h"
#include "compiler/support/FileIO.h"
#include "ops/OpDef.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <new>
#include <optional>
#include <unordered_set>

namespace dtc::onnxio {
namespace {

void setType(onnx::TypeProto *tp, const ir::TensorType &t) {
  onnx::TypeProto_Tensor *tt = tp->mutable_tensor_type();
  tt->set_elem_type(static_cast<int32_t>(t.dtype));
  if (!t.shape.hasRank())
    return;
  onnx::TensorShapeProto *sp = tt->mutable_shape();
  for (const ir::Dim &d : t.shape.dims()) {
    onnx::TensorShapeProto_Dimension *dp = sp->add_dim();
    if (d.isStatic())
      dp->set_dim_value(d.value());
    else if (d.isSymbolic())
      dp->set_dim_param(d.str());
  }
}

void setValueInfo(onnx::ValueInfoProto *vi, const ir::Value &v) {
  vi->set_name(v.name());
  setType(vi->mutable_type(), v.type());
}

Status setAttribute(onnx::AttributeProto *ap, const std::string &name, const ir::Attribute &a,
                    const std::string &where) {
  ap->set_name(name);
  switch (a.kind()) {
  case ir::AttrKind::kInt:
    ap->set_type(onnx::AttributeProto::INT);
    ap->set_i(a.i());
    break;
  case ir::AttrKind::kFloat:
    ap->set_type(onnx::AttributeProto::FLOAT);
    ap->set_f(a.f());
    break;
  case ir::AttrKind::kString:
    ap->set_type(onnx::AttributeProto::STRING);
    ap->set_s(a.s());
    break;
  case ir::AttrKind::kInts:
    ap->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : a.ints())
      ap->add_ints(x);
    break;
  case ir::AttrKind::kFloats:
    ap->set_type(onnx::AttributeProto::FLOATS);
    for (float x : a.floats())
      ap->add_floats(x);
    break;
  case ir::AttrKind::kStrings:
    ap->set_type(onnx::AttributeProto::STRINGS);
    for (const std::string &x : a.strings())
      ap->add_strings(x);
    break;
  case ir::AttrKind::kTensor: {
    ap->set_type(onnx::AttributeProto::TENSOR);
    onnx::TensorProto *tp = ap->mutable_t();
    const ir::TensorData &t = *a.t();
    tp->set_name(t.name());
    tp->set_data_type(static_cast<int32_t>(t.dtype()));
    for (int64_t d : t.dims())
      tp->add_dims(d);
    auto bytes = t.bytes();
    if (!bytes)
      return bytes.status().withContext(where);
    tp->set_raw_data(**bytes);
    break;
  }
  }
  return Status::ok();
}

/// The lowest ai.onnx opset >= `floor` at which every standard-domain node's form (inputs,
/// outputs, attributes) is valid. Canonical forms are the newest forms, so a model whose ops
/// were normalized from an old opset may need a newer one (ReduceMean axes as an input: 18).
/// Softmax/LogSoftmax changed meaning at 13 without changing form: they need 13.
int64_t exportOpset(const ir::Graph &g, int64_t floor) {
  constexpr int64_t kNewest = 23; // the newest opset the importer accepts
  for (int64_t opset = std::max<int64_t>(floor, 7); opset <= kNewest; ++opset) {
    bool valid = true;
    for (const ir::Node *n : g.nodes()) {
      if (!n->domain().empty())
        continue;
      const ops::OpDef *def = ops::lookupOp("", n->opType());
      if (!def)
        continue;
      const ops::OpVersion *v = def->versionFor(opset);
      if (!v || !ops::checkForm(*n, *v, opset).isOk() ||
          ((n->opType() == "Softmax" || n->opType() == "LogSoftmax") && opset < 13)) {
        valid = false;
        break;
      }
    }
    if (valid)
      return opset;
  }
  return kNewest;
}

/// IR version the ONNX checker requires for an ai.onnx opset (onnx/docs/Versioning.md).
int64_t irVersionFor(int64_t opset) {
  if (opset >= 23)
    return 11;
  if (opset >= 21)
    return 10;
  if (opset >= 19)
    return 9;
  if (opset >= 15)
    return 8;
  return 7;
}

} // namespace

namespace {

/// What of a graph goes into a model: the nodes (in order), the graph inputs and outputs, the
/// initializers (constants become Constant nodes), and the tensor-parallel index whose shards the
/// split initializers are cut to (-1: whole tensors).
struct Selection {
  std::vector<const ir::Node *> nodes;
  std::vector<const ir::Value *> inputs, initializers, outputs;
  int64_t tpIndex = -1;
};

Expected<onnx::ModelProto> exportSelection(const ir::Graph &g, const Selection &sel) {
  onnx::ModelProto model;
  const ir::ModelInfo &info = g.modelInfo();
  model.set_producer_name("dtc");
  model.set_producer_version("0.1.0");
  if (!info.docString.empty())
    model.set_doc_string(info.docString);

  std::map<std::string, int64_t> opsets = g.opsets();
  for (const ir::Node *n : sel.nodes)
    if (!n->domain().empty() && !opsets.count(n->domain()))
      opsets[n->domain()] = 1;
  int64_t onnxOpset = exportOpset(g, g.onnxOpset());
  opsets[""] = std::max<int64_t>(onnxOpset, 7);
  for (const auto &[domain, version] : opsets) {
    onnx::OperatorSetIdProto *op = model.add_opset_import();
    op->set_domain(domain);
    op->set_version(version);
  }
  model.set_ir_version(std::max(info.irVersion, irVersionFor(opsets[""])));

  onnx::GraphProto *gp = model.mutable_graph();
  gp->set_name(g.name());
  for (const ir::Value *v : sel.inputs)
    setValueInfo(gp->add_input(), *v);
  for (const ir::Value *v : sel.initializers) {
    // Constants (from Constant nodes or folding) go back as Constant nodes so a re-import
    // keeps them apart from trainable parameters; parameters and input defaults are
    // initializers.
    onnx::TensorProto *tp;
    if (v->isConstant()) {
      onnx::NodeProto *np = gp->add_node();
      np->set_op_type("Constant");
      np->set_name(v->name() + ".constant");
      np->add_output(v->name());
      onnx::AttributeProto *ap = np->add_attribute();
      ap->set_name("value");
      ap->set_type(onnx::AttributeProto::TENSOR);
      tp = ap->mutable_t();
    } else {
      tp = gp->add_initializer();
    }
    const ir::TensorData &t = *v->initializer();
    tp->set_name(v->name());
    tp->set_data_type(static_cast<int32_t>(t.dtype()));
    DTC_ASSIGN_OR_RETURN(const std::string *bytes, t.bytes());
    if (sel.tpIndex >= 0 && v->shard().isSplit()) {
      // A tensor-parallel weight: the rank's shard, as the runtime loads it (an uneven split's
      // splitRange rows).
      auto dims = ir::shardDimsOf(t.dims(), v->shard(), sel.tpIndex);
      if (!dims)
        return dims.status().withContext("initializer '" + v->name() + "'");
      for (int64_t d : *dims)
        tp->add_dims(d);
      tp->set_raw_data(
          ir::sliceShard(*bytes, t.dims(), ir::dtypeSize(t.dtype()), v->shard(), sel.tpIndex));
      continue;
    }
    for (int64_t d : t.dims())
      tp->add_dims(d);
    tp->set_raw_data(*bytes);
  }
  for (const ir::Node *n : sel.nodes) {
    onnx::NodeProto *np = gp->add_node();
    np->set_name(n->name());
    np->set_op_type(n->opType());
    if (!n->domain().empty())
      np->set_domain(n->domain());
    for (const ir::Value *in : n->inputs())
      np->add_input(in ? in->name() : "");
    for (const ir::Value *out : n->outputs())
      np->add_output(out->name());
    for (const auto &[name, a] : n->attributes())
      DTC_RETURN_IF_ERROR(setAttribute(np->add_attribute(), name, a, n->where()));
    for (const ir::Value *out : n->outputs())
      if (std::find(sel.outputs.begin(), sel.outputs.end(), out) == sel.outputs.end() &&
          out->dtype() != ir::DType::kUndefined)
        setValueInfo(gp->add_value_info(), *out);
  }
  for (const ir::Value *v : sel.outputs)
    setValueInfo(gp->add_output(), *v);
  return model;
}

/// Writes `model` to `path`, its large initializers to `<file name>.data` when they add up to
/// more than opts.externalThresholdBytes.
Status writeModelProto(onnx::ModelProto &model, const std::string &path, const ExportOptions &opts);

} // namespace

Expected<onnx::ModelProto> exportModel(const ir::Graph &g) {
  Selection all;
  const std::vector<ir::Node *> nodes = g.nodes();
  all.nodes.assign(nodes.begin(), nodes.end());
  all.inputs.assign(g.inputs().begin(), g.inputs().end());
  const std::vector<ir::Value *> initializers = g.initializers(); // a new vector per call
  all.initializers.assign(initializers.begin(), initializers.end());
  all.outputs.assign(g.outputs().begin(), g.outputs().end());
  return exportSelection(g, all);
}

Expected<onnx::ModelProto> exportRankModel(const ir::Graph &g, const Mesh &mesh, int64_t rank) {
  const std::string where = "--rank " + std::to_string(rank);
  if (mesh.hasParameterHost())
    return Status::error(where, "--emit onnx --rank writes a rank of a dp/pp/tp mesh; " +
                                    mesh.text() +
                                    (mesh.csDevices > 0
                                         ? " runs devices beside a host that updates the parameters"
                                         : " runs server and worker roles") +
                                    " (see --emit plan-text --rank)");
  if (rank < 0 || rank >= mesh.worldSize())
    return Status::error(where, "the plan has " + std::to_string(mesh.worldSize()) + " rank(s)");
  const MeshCoord at = mesh.coordOf(rank);
  Selection sel;
  sel.tpIndex = mesh.tp > 1 ? at.tp : -1;
  // Pipelines: the rank runs virtual stages pp, pp + S, ... (every node has its stage by now).
  std::unordered_set<const ir::Value *> defined;
  for (const ir::Node *n : g.nodes())
    if (mesh.pp <= 1 || (n->stage() >= 0 && n->stage() % mesh.pp == at.pp)) {
      sel.nodes.push_back(n);
      for (const ir::Value *v : n->outputs())
        defined.insert(v);
    }
  std::unordered_set<const ir::Value *> read;
  for (const ir::Node *n : sel.nodes)
    for (const ir::Value *v : n->inputs()) {
      if (!v)
        continue;
      read.insert(v);
      if (!defined.count(v) && !v->isGraphInput() && !v->isInitializer())
        return Status::error(where, "node '" + n->name() + "' reads '" + v->name() +
                                        "', which another rank computes (the graph is not "
                                        "partitioned into stages yet)");
    }
  for (const ir::Value *v : g.inputs())
    if (read.count(v))
      sel.inputs.push_back(v);
  for (const ir::Value *v : g.initializers())
    if (read.count(v))
      sel.initializers.push_back(v);
  // Outputs: the graph's outputs this rank computes, then the new values of the training state
  // it updates (parameters, optimizer state), so that the step's results are visible.
  std::unordered_set<const ir::Value *> out;
  auto addOutput = [&](const ir::Value *v) {
    if (v && defined.count(v) && out.insert(v).second)
      sel.outputs.push_back(v);
  };
  for (const ir::Value *v : g.outputs())
    addOutput(v);
  for (const ir::StateUpdate &u : g.training().updates)
    addOutput(u.next);
  return exportSelection(g, sel);
}

Status writeRankModelFile(const ir::Graph &g, const Mesh &mesh, int64_t rank,
                          const std::string &path, const ExportOptions &opts) {
  DTC_RETURN_IF_ERROR(checkOutputTarget(path));
  DTC_ASSIGN_OR_RETURN(onnx::ModelProto model, exportRankModel(g, mesh, rank));
  return writeModelProto(model, path, opts);
}

Status writeModelFile(const ir::Graph &g, const std::string &path, const ExportOptions &opts) {
  DTC_RETURN_IF_ERROR(checkOutputTarget(path));
  DTC_ASSIGN_OR_RETURN(onnx::ModelProto model, exportModel(g));
  return writeModelProto(model, path, opts);
}

namespace {

Status writeModelProto(onnx::ModelProto &model, const std::string &path,
                       const ExportOptions &opts) {
  namespace fs = std::filesystem;
  onnx::GraphProto *gp = model.mutable_graph();
  int64_t total = 0;
  for (const onnx::TensorProto &t : gp->initializer())
    total += static_cast<int64_t>(t.raw_data().size());

  // Both files go to exclusive temporaries next to their targets (FileIO.h) and are renamed
  // into place at the end, the data file first.
  std::optional<AtomicFile> dataFile;
  if (total > opts.externalThresholdBytes) {
    std::string dataName = fs::path(path).filename().string() + ".data";
    std::string dataPath = (fs::path(path).parent_path() / dataName).string();
    DTC_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::create(dataPath));
    dataFile.emplace(std::move(f));
    int64_t offset = 0;
    for (onnx::TensorProto &t : *gp->mutable_initializer()) {
      int64_t size = static_cast<int64_t>(t.raw_data().size());
      if (size < opts.externalMinBytes)
        continue;
      int64_t aligned = (offset + 4095) / 4096 * 4096; // page-aligned for mmap readers
      if (aligned > offset)
        DTC_RETURN_IF_ERROR(
            dataFile->write(std::string(static_cast<size_t>(aligned - offset), '\0')));
      offset = aligned;
      DTC_RETURN_IF_ERROR(dataFile->write(t.raw_data()));
      t.clear_raw_data();
      t.set_data_location(onnx::TensorProto::EXTERNAL);
      auto add = [&](const std::string &k, const std::string &v) {
        onnx::StringStringEntryProto *e = t.add_external_data();
        e->set_key(k);
        e->set_value(v);
      };
      add("location", dataName);
      add("offset", std::to_string(offset));
      add("length", std::to_string(size));
      offset += size;
    }
  }
  if (model.ByteSizeLong() > static_cast<size_t>(INT32_MAX))
    return Status::error(path, "model is larger than 2 GiB even with external data");
  std::string bytes;
  try {
    if (!model.SerializeToString(&bytes))
      return Status::error(path, "cannot serialize the model");
  } catch (const std::bad_alloc &) {
    return Status::error(path, "out of memory serializing the model");
  }
  DTC_ASSIGN_OR_RETURN(AtomicFile modelFile, AtomicFile::create(path));
  DTC_RETURN_IF_ERROR(modelFile.write(bytes));
  if (dataFile)
    DTC_RETURN_IF_ERROR(dataFile->commit());
  return modelFile.commit();
}

} // namespace

} // namespace dtc::onnxio
