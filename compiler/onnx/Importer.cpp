// ONNX import: ModelProto -> ir::Graph (values, initializers, Constant folding, nodes sorted
// topologically) followed by the opset normalization driver, which checks every node against
// its op's form for the declared opset and rewrites it into the canonical form (ops/OpDef.h).
// Reading model files (binary, text syntax, and the diagnosis of bad files) is in ModelFile.cpp.
#include "compiler/onnx/Importer.h"

#include "compiler/onnx/FunctionOps.h"
#include "compiler/onnx/ModelFile.h"
#include "compiler/onnx/SequenceRewrite.h"
#include "compiler/onnx/TensorImport.h"
#include "compiler/onnx/UntieInitializers.h"
#include "ops/OpDef.h"

#include <onnx/onnx_pb.h>

#include <filesystem>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace dtc::onnxio {

namespace {

constexpr int64_t kMinOnnxOpset = 7;
constexpr int64_t kMaxOnnxOpset = 23;

std::string normDomain(const std::string &d) { return d == "ai.onnx" ? "" : d; }
std::string domainText(const std::string &d) { return d.empty() ? "ai.onnx" : d; }

const char *attrTypeName(int t) {
  switch (t) {
  case onnx::AttributeProto::FLOAT:
    return "FLOAT";
  case onnx::AttributeProto::INT:
    return "INT";
  case onnx::AttributeProto::STRING:
    return "STRING";
  case onnx::AttributeProto::TENSOR:
    return "TENSOR";
  case onnx::AttributeProto::GRAPH:
    return "GRAPH";
  case onnx::AttributeProto::SPARSE_TENSOR:
    return "SPARSE_TENSOR";
  case onnx::AttributeProto::TYPE_PROTO:
    return "TYPE_PROTO";
  case onnx::AttributeProto::FLOATS:
    return "FLOATS";
  case onnx::AttributeProto::INTS:
    return "INTS";
  case onnx::AttributeProto::STRINGS:
    return "STRINGS";
  case onnx::AttributeProto::TENSORS:
    return "TENSORS";
  case onnx::AttributeProto::GRAPHS:
    return "GRAPHS";
  case onnx::AttributeProto::SPARSE_TENSORS:
    return "SPARSE_TENSORS";
  case onnx::AttributeProto::TYPE_PROTOS:
    return "TYPE_PROTOS";
  default:
    return "UNDEFINED";
  }
}

/// The attribute's kind; old models leave `type` unset, so fall back to the filled field.
int attrType(const onnx::AttributeProto &a) {
  if (a.type() != onnx::AttributeProto::UNDEFINED)
    return a.type();
  if (a.has_f())
    return onnx::AttributeProto::FLOAT;
  if (a.has_i())
    return onnx::AttributeProto::INT;
  if (a.has_s())
    return onnx::AttributeProto::STRING;
  if (a.has_t())
    return onnx::AttributeProto::TENSOR;
  if (a.has_g())
    return onnx::AttributeProto::GRAPH;
  if (a.has_sparse_tensor())
    return onnx::AttributeProto::SPARSE_TENSOR;
  if (a.floats_size())
    return onnx::AttributeProto::FLOATS;
  if (a.ints_size())
    return onnx::AttributeProto::INTS;
  if (a.strings_size())
    return onnx::AttributeProto::STRINGS;
  if (a.tensors_size())
    return onnx::AttributeProto::TENSORS;
  if (a.graphs_size())
    return onnx::AttributeProto::GRAPHS;
  return onnx::AttributeProto::UNDEFINED;
}

/// Whether a declared shape admits a tensor with these static dims (unknown rank: any).
bool shapeAccepts(const ir::Shape &declared, const std::vector<int64_t> &dims) {
  if (!declared.hasRank())
    return true;
  if (declared.rank() != dims.size())
    return false;
  for (size_t i = 0; i < dims.size(); ++i)
    if (declared[i].isStatic() && declared[i].value() != dims[i])
      return false;
  return true;
}

/// Whether two shapes can describe the same tensor (ranks agree, static sizes agree).
bool shapesCompatible(const ir::Shape &a, const ir::Shape &b) {
  if (!a.hasRank() || !b.hasRank())
    return true;
  if (a.rank() != b.rank())
    return false;
  for (size_t i = 0; i < a.rank(); ++i)
    if (a[i].isStatic() && b[i].isStatic() && a[i].value() != b[i].value())
      return false;
  return true;
}

class Importer {
public:
  Importer(onnx::ModelProto &model, const std::string &modelDir, const std::string &displayName,
           Diagnostics &diags, const ImportOptions &options)
      : model_(model), graphProto_(*model.mutable_graph()), modelDir_(modelDir),
        display_(displayName.empty() ? "<model>" : displayName), diags_(diags),
        graph_(std::make_unique<ir::Graph>()), options_(options) {}

  Expected<std::unique_ptr<ir::Graph>> run() {
    DTC_RETURN_IF_ERROR(readModelHeader());
    if (options_.untieInitializers) {
      DTC_ASSIGN_OR_RETURN(std::vector<UntiedInitializer> untied, untieInitializers(graphProto_));
      for (const UntiedInitializer &u : untied)
        diags_.note("initializer '" + u.name + "'",
                    "untied: " + std::to_string(u.copies.size() + 1) +
                        " uses, each with its own copy (" + u.name + ".untied.1...)");
    }
    DTC_RETURN_IF_ERROR(rewriteSequences(graphProto_, opsets_.at("")));
    DTC_RETURN_IF_ERROR(expandFunctionOps(graphProto_, opsets_.at("")));
    collectNames();
    DTC_RETURN_IF_ERROR(importInputs());
    DTC_RETURN_IF_ERROR(importInitializers());
    DTC_RETURN_IF_ERROR(createNodes());
    DTC_RETURN_IF_ERROR(connectNodes());
    DTC_RETURN_IF_ERROR(attachDeclaredTypes());
    DTC_RETURN_IF_ERROR(importOutputs());
    for (auto &[node, data] : constants_)
      graph_->foldToConstants(node, {data});
    constants_.clear();
    DTC_RETURN_IF_ERROR(graph_->topologicalSort());
    DTC_RETURN_IF_ERROR(normalizeNodes());
    return std::move(graph_);
  }

private:
  Status fileError(const std::string &what) const { return Status::error(display_, what); }

  // --- model header: IR version, opsets, functions ------------------------------------------
  Status readModelHeader() {
    if (!model_.has_ir_version() || model_.ir_version() <= 0)
      return fileError("ir_version is missing (is this an ONNX model?)");
    if (!model_.has_graph())
      return fileError("the model has no graph");
    ir::ModelInfo &info = graph_->modelInfo();
    info.path = display_;
    info.directory = modelDir_;
    info.irVersion = model_.ir_version();
    info.producerName = model_.producer_name();
    info.producerVersion = model_.producer_version();
    info.docString = model_.doc_string();
    if (!graphProto_.name().empty())
      graph_->setName(graphProto_.name());

    for (const onnx::FunctionProto &f : model_.functions()) {
      functions_.insert({normDomain(f.domain()), f.name()});
      functionDomains_.insert(normDomain(f.domain()));
    }
    for (const onnx::OperatorSetIdProto &o : model_.opset_import()) {
      std::string d = normDomain(o.domain());
      if (opsets_.count(d))
        return fileError("opset_import lists domain '" + domainText(d) + "' twice");
      int64_t v = o.version();
      if (d.empty()) {
        if (v < kMinOnnxOpset || v > kMaxOnnxOpset)
          return fileError("opset_import: ai.onnx version " + std::to_string(v) +
                           " is not supported; dtc supports ai.onnx opsets " +
                           std::to_string(kMinOnnxOpset) + " to " + std::to_string(kMaxOnnxOpset));
      } else if (d != ir::kDtcDomain && d != "ai.onnx.ml" && !functionDomains_.count(d)) {
        return fileError("opset_import: unknown domain '" + d + "' (version " + std::to_string(v) +
                         "); dtc supports the domains ai.onnx and " + ir::kDtcDomain);
      } else if (v < 1) {
        return fileError("opset_import: domain '" + d + "' has invalid version " +
                         std::to_string(v));
      }
      opsets_[d] = v;
    }
    if (!opsets_.count(""))
      return fileError("opset_import has no entry for ai.onnx (the default domain); dtc "
                       "supports ai.onnx opsets " +
                       std::to_string(kMinOnnxOpset) + " to " + std::to_string(kMaxOnnxOpset));
    for (const auto &[d, v] : opsets_)
      if (!functionDomains_.count(d) || d.empty() || d == ir::kDtcDomain)
        graph_->setOpset(d, v);
    if (model_.functions_size() > 0)
      diags_.note(display_, "ignoring " + std::to_string(model_.functions_size()) +
                                " model-local function(s); no node calls them");
    return Status::ok();
  }

  /// Every name the model uses, so generated names never collide with a later definition.
  void collectNames() {
    for (const auto &i : graphProto_.input())
      modelNames_.insert(i.name());
    for (const auto &t : graphProto_.initializer())
      modelNames_.insert(t.name());
    for (const auto &n : graphProto_.node()) {
      for (const std::string &s : n.input())
        modelNames_.insert(s);
      for (const std::string &s : n.output())
        modelNames_.insert(s);
    }
    for (const auto &o : graphProto_.output())
      modelNames_.insert(o.name());
    // Declared symbols, so fresh unk__N symbols never clash with them.
    for (const auto *list :
         {&graphProto_.input(), &graphProto_.output(), &graphProto_.value_info()})
      for (const auto &vi : *list)
        if (vi.type().has_tensor_type() && vi.type().tensor_type().has_shape())
          for (const auto &d : vi.type().tensor_type().shape().dim())
            if (d.has_dim_param())
              symbols_.insert(d.dim_param());
  }

  std::string freshSymbol() {
    for (;;) {
      std::string s = "unk__" + std::to_string(nextSymbol_++);
      if (!symbols_.count(s)) {
        symbols_.insert(s);
        return s;
      }
    }
  }

  std::string freshValueName(const std::string &base) {
    std::string name = graph_->uniqueName(base);
    for (size_t i = 1; modelNames_.count(name) || graph_->findValue(name); ++i)
      name = graph_->uniqueName(base + "_" + std::to_string(i));
    modelNames_.insert(name);
    return name;
  }

  // --- types ---------------------------------------------------------------------------------
  /// Converts a declared type. `fresh`: unnamed dims get fresh symbols (graph inputs);
  /// otherwise they stay unknown. `where` names the value for messages.
  Expected<ir::TensorType> convertType(const onnx::TypeProto &tp, const std::string &where,
                                       bool fresh) {
    switch (tp.value_case()) {
    case onnx::TypeProto::kTensorType:
      break;
    case onnx::TypeProto::VALUE_NOT_SET:
      return ir::TensorType{};
    case onnx::TypeProto::kSequenceType:
      return Status::error(where, "sequence types are not supported (only tensors)");
    case onnx::TypeProto::kMapType:
      return Status::error(where, "map types are not supported (only tensors)");
    case onnx::TypeProto::kOptionalType:
      return Status::error(where, "optional types are not supported (only tensors)");
    case onnx::TypeProto::kSparseTensorType:
      return Status::error(where, "sparse tensor types are not supported (only dense tensors)");
    default:
      return Status::error(where, "this kind of type is not supported (only tensors)");
    }
    const onnx::TypeProto_Tensor &tt = tp.tensor_type();
    ir::TensorType out;
    int32_t et = tt.elem_type();
    if (et != 0) {
      if (!ir::isKnownDType(et) || et == static_cast<int32_t>(ir::DType::kString))
        return Status::error(where, "element type " + onnxTypeName(et) + " is not supported");
      out.dtype = static_cast<ir::DType>(et);
    }
    if (!tt.has_shape())
      return out;
    std::vector<ir::Dim> dims;
    std::vector<int64_t> staticSizes;
    for (const onnx::TensorShapeProto_Dimension &d : tt.shape().dim()) {
      if (d.has_dim_value()) {
        if (d.dim_value() < 0)
          return Status::error(where, "negative dimension " + std::to_string(d.dim_value()) +
                                          " in its declared shape");
        dims.push_back(ir::Dim::fixed(d.dim_value()));
        staticSizes.push_back(d.dim_value());
      } else if (d.has_dim_param() && !d.dim_param().empty()) {
        dims.push_back(ir::Dim::symbol(d.dim_param()));
      } else {
        dims.push_back(fresh ? ir::Dim::symbol(freshSymbol()) : ir::Dim::unknown());
      }
    }
    ir::Shape shape(std::move(dims));
    if (!ir::checkedProduct(staticSizes))
      return Status::error(where, "declared shape " + shape.str() +
                                      " has more elements than fit in int64");
    out.shape = std::move(shape);
    return out;
  }

  // --- graph inputs and initializers ----------------------------------------------------------
  Status importInputs() {
    for (const onnx::TensorProto &t : graphProto_.initializer())
      initializerNames_.insert(t.name());
    for (int i = 0; i < graphProto_.sparse_initializer_size(); ++i) {
      const onnx::SparseTensorProto &s = graphProto_.sparse_initializer(i);
      return Status::error("tensor '" + s.values().name() + "'",
                           "sparse initializers are not supported");
    }
    for (int i = 0; i < graphProto_.input_size(); ++i) {
      const onnx::ValueInfoProto &vi = graphProto_.input(i);
      if (vi.name().empty())
        return fileError("graph input #" + std::to_string(i) + " has no name");
      std::string where = "input '" + vi.name() + "'";
      if (graph_->findValue(vi.name()))
        return Status::error(where, "listed twice in the graph inputs");
      bool hasDefault = initializerNames_.count(vi.name()) != 0;
      if (!vi.type().has_tensor_type() && !hasDefault &&
          vi.type().value_case() == onnx::TypeProto::VALUE_NOT_SET)
        return Status::error(where, "has no declared type");
      DTC_ASSIGN_OR_RETURN(ir::TensorType type, convertType(vi.type(), where, true));
      ir::Value *v = graph_->createValue(vi.name(), type);
      graph_->addInput(v);
      definedBy_[vi.name()] = "a graph input";
    }
    return Status::ok();
  }

  Status importInitializers() {
    for (int i = 0; i < graphProto_.initializer_size(); ++i) {
      onnx::TensorProto &t = *graphProto_.mutable_initializer(i);
      if (t.name().empty())
        return fileError("graph initializer #" + std::to_string(i) + " has no name");
      std::string where = "tensor '" + t.name() + "'";
      if (!seenInitializers_.insert(t.name()).second)
        return Status::error(where, "two initializers have this name");
      DTC_ASSIGN_OR_RETURN(ir::TensorDataPtr data, importTensor(t, t.name(), modelDir_, &externalFiles_));
      if (ir::Value *input = graph_->findValue(t.name())) {
        // An initializer listed as a graph input: an input with a default value.
        ir::DType declared = input->dtype();
        if (declared != ir::DType::kUndefined && declared != data->dtype())
          return Status::error("input '" + t.name() + "'",
                               std::string("declared ") + ir::dtypeName(declared) +
                                   " but its default value (initializer) is " +
                                   ir::dtypeName(data->dtype()));
        if (!shapeAccepts(input->type().shape, data->dims()))
          return Status::error("input '" + t.name() + "'",
                               "declared with shape " + input->type().shape.str() +
                                   " but its default value (initializer) has dims " +
                                   dimsText(data->dims()));
        graph_->setInitializer(input, std::move(data), /*isConstant=*/false);
        continue;
      }
      ir::Value *v = graph_->createValue(t.name());
      graph_->setInitializer(v, std::move(data), /*isConstant=*/false);
      definedBy_[t.name()] = "an initializer";
    }
    return Status::ok();
  }

  // --- nodes -----------------------------------------------------------------------------------
  Expected<ir::Attribute> convertAttribute(onnx::AttributeProto &a, const std::string &nodeName,
                                           const std::string &where) {
    std::string attrWhere = where + ": attribute '" + a.name() + "'";
    if (!a.ref_attr_name().empty())
      return Status::error(attrWhere, "refers to function attribute '" + a.ref_attr_name() +
                                          "', which is only valid inside a function body");
    int kind = attrType(a);
    switch (kind) {
    case onnx::AttributeProto::INT:
      return ir::Attribute(static_cast<int64_t>(a.i()));
    case onnx::AttributeProto::FLOAT:
      return ir::Attribute(a.f());
    case onnx::AttributeProto::STRING:
      return ir::Attribute(a.s());
    case onnx::AttributeProto::INTS:
      return ir::Attribute(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case onnx::AttributeProto::FLOATS:
      return ir::Attribute(std::vector<float>(a.floats().begin(), a.floats().end()));
    case onnx::AttributeProto::STRINGS:
      return ir::Attribute(std::vector<std::string>(a.strings().begin(), a.strings().end()));
    case onnx::AttributeProto::TENSOR: {
      std::string tname = a.t().name().empty() ? nodeName + "." + a.name() : a.t().name();
      auto data = importTensor(*a.mutable_t(), tname, modelDir_, &externalFiles_);
      if (!data)
        return data.status().withContext(where);
      return ir::Attribute(data.takeValue());
    }
    case onnx::AttributeProto::GRAPH:
    case onnx::AttributeProto::GRAPHS:
      return Status::error(where, "graph-valued attribute '" + a.name() +
                                      "' (a control-flow body) is not supported");
    default:
      return Status::error(attrWhere, std::string("has kind ") + attrTypeName(kind) +
                                          ", which is not supported");
    }
  }

  /// The contents of a Constant node (every value_* form).
  Expected<ir::TensorDataPtr> constantData(onnx::NodeProto &np, const std::string &where,
                                           const std::string &outName) {
    if (np.input_size() != 0)
      return Status::error(where, "takes no inputs, got " + std::to_string(np.input_size()));
    if (np.attribute_size() != 1)
      return Status::error(where, "needs exactly one value attribute (value, value_float, "
                                  "value_floats, value_int, value_ints), got " +
                                      std::to_string(np.attribute_size()));
    onnx::AttributeProto &a = *np.mutable_attribute(0);
    if (!a.ref_attr_name().empty())
      return Status::error(where + ": attribute '" + a.name() + "'",
                           "refers to function attribute '" + a.ref_attr_name() +
                               "', which is only valid inside a function body");
    int64_t opset = opsets_[""];
    auto needOpset = [&](int64_t since) -> Status {
      if (opset < since)
        return Status::error(where, "attribute '" + a.name() + "' needs opset " +
                                        std::to_string(since) + " or later (the model declares " +
                                        std::to_string(opset) + ")");
      return Status::ok();
    };
    int kind = attrType(a);
    auto kindIs = [&](int k) -> Status {
      if (kind != k)
        return Status::error(where, "attribute '" + a.name() + "' must be " + attrTypeName(k) +
                                        ", got " + attrTypeName(kind));
      return Status::ok();
    };
    const std::string &n = a.name();
    if (n == "value") {
      DTC_RETURN_IF_ERROR(kindIs(onnx::AttributeProto::TENSOR));
      auto data = importTensor(*a.mutable_t(), outName, modelDir_, &externalFiles_);
      if (!data)
        return data.status().withContext(where);
      return data.takeValue();
    }
    if (n == "value_float") {
      DTC_RETURN_IF_ERROR(needOpset(12));
      DTC_RETURN_IF_ERROR(kindIs(onnx::AttributeProto::FLOAT));
      return ir::TensorDataPtr(ir::TensorData::fromFloats(outName, {}, {a.f()}));
    }
    if (n == "value_floats") {
      DTC_RETURN_IF_ERROR(needOpset(12));
      DTC_RETURN_IF_ERROR(kindIs(onnx::AttributeProto::FLOATS));
      std::vector<float> v(a.floats().begin(), a.floats().end());
      return ir::TensorDataPtr(
          ir::TensorData::fromFloats(outName, {static_cast<int64_t>(v.size())}, v));
    }
    if (n == "value_int") {
      DTC_RETURN_IF_ERROR(needOpset(12));
      DTC_RETURN_IF_ERROR(kindIs(onnx::AttributeProto::INT));
      return ir::TensorDataPtr(ir::TensorData::fromInt64s(outName, {}, {a.i()}));
    }
    if (n == "value_ints") {
      DTC_RETURN_IF_ERROR(needOpset(12));
      DTC_RETURN_IF_ERROR(kindIs(onnx::AttributeProto::INTS));
      std::vector<int64_t> v(a.ints().begin(), a.ints().end());
      return ir::TensorDataPtr(
          ir::TensorData::fromInt64s(outName, {static_cast<int64_t>(v.size())}, v));
    }
    if (n == "value_string" || n == "value_strings")
      return Status::error(where, "string constants (" + n + ") are not supported");
    if (n == "sparse_value")
      return Status::error(where, "sparse constants (sparse_value) are not supported");
    return Status::error(where, "unknown attribute '" + n + "' for Constant");
  }

  Status createNodes() {
    const std::string supported = ops::supportedOpsText();
    for (int i = 0; i < graphProto_.node_size(); ++i) {
      onnx::NodeProto &np = *graphProto_.mutable_node(i);
      const std::string &opType = np.op_type();
      std::string domain = normDomain(np.domain());
      std::string name = np.name().empty() ? opType + "_" + std::to_string(i) : np.name();
      std::string where = "node '" + name + "' (" + opType + ")";
      if (opType.empty())
        return Status::error("node '" + name + "'", "has no op_type");

      // Domain, control flow, functions, then the op itself.
      if (functions_.count({domain, opType}))
        return Status::error(where, "calls the model-local function '" + domainText(domain) + "." +
                                        opType +
                                        "'; functions are not supported (inline them before "
                                        "import)");
      if (!opsets_.count(domain) && domain != ir::kDtcDomain)
        return Status::error(where, "domain '" + domain + "' of op type '" + opType +
                                        "' is unknown (not in opset_import); dtc supports the "
                                        "domains ai.onnx and " +
                                        ir::kDtcDomain);
      for (const onnx::AttributeProto &a : np.attribute()) {
        int kind = attrType(a);
        if (kind == onnx::AttributeProto::GRAPH || kind == onnx::AttributeProto::GRAPHS)
          return Status::error(where, "graph-valued attribute '" + a.name() +
                                          "' (a control-flow body) is not supported; dtc "
                                          "needs graphs without If/Loop/Scan");
      }
      bool isConstant = domain.empty() && opType == "Constant";
      if (!isConstant && !ops::lookupOp(domain, opType))
        return Status::error(where, "unsupported operator '" + opType + "' in domain '" +
                                        domainText(domain) +
                                        "'; supported operators: " + supported);

      // Outputs: trailing omitted outputs are dropped, omitted ones before a present one get a
      // generated name.
      int numOut = np.output_size();
      while (numOut > 0 && np.output(numOut - 1).empty())
        --numOut;
      std::vector<std::string> outNames;
      std::unordered_set<std::string> seen;
      for (int k = 0; k < numOut; ++k) {
        const std::string &o = np.output(k);
        if (o.empty()) {
          outNames.push_back(freshValueName(name + "_unused_output" + std::to_string(k)));
          continue;
        }
        if (!seen.insert(o).second)
          return Status::error(where, "output '" + o + "' is listed twice");
        auto it = definedBy_.find(o);
        if (it != definedBy_.end())
          return Status::error(where, "output '" + o + "' is already defined by " + it->second);
        if (initializerNames_.count(o))
          return Status::error(where, "output '" + o + "' is already defined by an initializer");
        outNames.push_back(o);
      }
      if (isConstant && outNames.size() != 1)
        return Status::error(where,
                             "needs exactly one output, got " + std::to_string(outNames.size()));

      ir::TensorDataPtr constant;
      std::map<std::string, ir::Attribute> attrs;
      if (isConstant) {
        DTC_ASSIGN_OR_RETURN(constant, constantData(np, where, outNames[0]));
      } else {
        for (int k = 0; k < np.attribute_size(); ++k) {
          onnx::AttributeProto &a = *np.mutable_attribute(k);
          if (a.name().empty())
            return Status::error(where, "attribute #" + std::to_string(k) + " has no name");
          if (attrs.count(a.name()))
            return Status::error(where, "attribute '" + a.name() + "' is given twice");
          DTC_ASSIGN_OR_RETURN(ir::Attribute attr, convertAttribute(a, name, where));
          attrs.emplace(a.name(), std::move(attr));
        }
      }

      ir::Node *node = graph_->addNode(opType, {}, outNames, domain, name);
      if (node->name() != name)
        diags_.warning(where, "node name used twice; renamed to '" + node->name() + "'");
      for (auto &[k, a] : attrs)
        node->setAttr(k, std::move(a));
      for (const std::string &o : outNames)
        definedBy_[o] = node->where();
      created_.push_back({node, i});
      if (isConstant)
        constants_.push_back({node, std::move(constant)});
    }
    return Status::ok();
  }

  /// Resolves node inputs by name, once every node's outputs exist (node lists need not be
  /// sorted).
  Status connectNodes() {
    for (auto &[node, index] : created_) {
      const onnx::NodeProto &np = graphProto_.node(index);
      for (const std::string &in : np.input()) {
        if (in.empty()) {
          node->addInput(nullptr);
          continue;
        }
        ir::Value *v = graph_->findValue(in);
        if (!v)
          return Status::error(node->where(), "input '" + in +
                                                  "' is not defined by any graph input, "
                                                  "initializer or node output (dangling "
                                                  "input)");
        node->addInput(v);
      }
    }
    return Status::ok();
  }

  /// Merges a declared type into a node output's type (what ShapeInference treats as declared).
  static void mergeInto(ir::Value &v, const ir::TensorType &declared) {
    ir::TensorType t = v.type();
    if (declared.dtype != ir::DType::kUndefined)
      t.dtype = declared.dtype;
    if (declared.shape.hasRank())
      t.shape = declared.shape;
    v.setType(std::move(t));
  }

  Status attachDeclaredTypes() {
    for (const onnx::ValueInfoProto &vi : graphProto_.value_info()) {
      ir::Value *v = graph_->findValue(vi.name());
      if (!v || !v->producer())
        continue; // types of inputs and initializers are known; unknown names are harmless
      DTC_ASSIGN_OR_RETURN(ir::TensorType t,
                           convertType(vi.type(), "value '" + vi.name() + "'", false));
      mergeInto(*v, t);
    }
    return Status::ok();
  }

  Status importOutputs() {
    for (const onnx::ValueInfoProto &vi : graphProto_.output()) {
      std::string where = "output '" + vi.name() + "'";
      ir::Value *v = graph_->findValue(vi.name());
      if (!v)
        return Status::error(where, "is not produced by any node, graph input or initializer");
      DTC_ASSIGN_OR_RETURN(ir::TensorType t, convertType(vi.type(), where, false));
      if (v->producer()) {
        mergeInto(*v, t);
      } else {
        // A graph input or initializer passed straight through: nothing infers its type later,
        // so a conflicting declaration is reported here.
        if (t.dtype != ir::DType::kUndefined && v->dtype() != ir::DType::kUndefined &&
            t.dtype != v->dtype())
          return Status::error(where, std::string("declared ") + ir::dtypeName(t.dtype) +
                                          " but it is " + definedBy_[vi.name()] + " of type " +
                                          ir::dtypeName(v->dtype()));
        if (!shapesCompatible(t.shape, v->type().shape))
          return Status::error(where, "declared with shape " + t.shape.str() + " but it is " +
                                          definedBy_[vi.name()] + " of shape " +
                                          v->type().shape.str());
      }
      graph_->addOutput(v);
    }
    return Status::ok();
  }

  // --- opset normalization driver -------------------------------------------------------------
  Status normalizeNodes() {
    for (ir::Node *n : graph_->nodes()) {
      const ops::OpDef *def = ops::lookupOp(n->domain(), n->opType());
      if (!def)
        return Status::error(n->where(), "unsupported operator '" + n->opType() + "' in domain '" +
                                             domainText(n->domain()) + "'");
      auto it = opsets_.find(n->domain());
      int64_t opset = it == opsets_.end() ? 1 : it->second;
      const ops::OpVersion *v = def->versionFor(opset);
      if (!v) {
        std::string since = def->versions.empty() ? "?" : std::to_string(def->versions[0].since);
        return Status::error(n->where(), n->opType() + " does not exist in " +
                                             (n->domain().empty() ? "" : n->domain() + " ") +
                                             "opset " + std::to_string(opset) + " (since " + since +
                                             ")");
      }
      DTC_RETURN_IF_ERROR(ops::checkForm(*n, *v, opset));
      if (def->normalize) {
        ops::NormalizeContext ctx(*graph_, opset, diags_);
        DTC_RETURN_IF_ERROR(def->normalize(*n, ctx)); // may replace `n`: do not touch it after
      }
    }
    return Status::ok();
  }

  onnx::ModelProto &model_;
  onnx::GraphProto &graphProto_;
  std::string modelDir_;
  ExternalFileCache externalFiles_;
  std::string display_;
  Diagnostics &diags_;
  std::unique_ptr<ir::Graph> graph_;
  std::map<std::string, int64_t> opsets_;
  std::set<std::pair<std::string, std::string>> functions_;
  std::set<std::string> functionDomains_;
  std::unordered_set<std::string> modelNames_;
  std::unordered_set<std::string> symbols_;
  ImportOptions options_;
  size_t nextSymbol_ = 0;
  std::unordered_set<std::string> initializerNames_;
  std::unordered_set<std::string> seenInitializers_;
  std::unordered_map<std::string, std::string> definedBy_;
  std::vector<std::pair<ir::Node *, int>> created_;
  std::vector<std::pair<ir::Node *, ir::TensorDataPtr>> constants_;
};

} // namespace

Expected<std::unique_ptr<ir::Graph>>
importModelProto(onnx::ModelProto &model, const std::string &modelDir,
                 const std::string &displayName, Diagnostics &diags, const ImportOptions &options) {
  Importer importer(model, modelDir, displayName, diags, options);
  return importer.run();
}

Expected<std::unique_ptr<ir::Graph>> importModelFile(const std::string &path, Diagnostics &diags,
                                                     const ImportOptions &options) {
  onnx::ModelProto model;
  DTC_RETURN_IF_ERROR(readModelFile(path, model));
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  return importModelProto(model, dir.empty() ? std::string(".") : dir.string(), path, diags,
                          options);
}

} // namespace dtc::onnxio
