// Operator definitions (DESIGN.md section 4): for each operator, the forms it takes in each
// opset version (inputs, outputs, attributes, type constraints), how the importer rewrites a
// declared-opset form into dtc's one canonical form, shape and type inference, and (optional)
// constant folding. Every operator is listed once in ops/Ops.def.
//
// Canonical form = the newest ONNX form of the operator: for example ReduceMean/ReduceSum/
// Squeeze/Unsqueeze axes, Split sizes, Clip bounds, Pad pads, Slice starts/ends, Dropout ratio
// are inputs (constants made from older opsets' attributes), Upsample becomes Resize, and
// pre-13 Softmax/LogSoftmax "flatten to 2-D" semantics become Flatten + op + Reshape.
#pragma once

#include "compiler/ir/Graph.h"
#include "compiler/support/Diagnostics.h"
#include "compiler/support/Status.h"
#include "ops/Cost.h"
#include "ops/Gradient.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace dtc::ops {

class ShardingContext; // ops/Sharding.h

// ---------------------------------------------------------------------------------------------
// Type sets (bit masks over ir::DType) used by type constraints.
using TypeMask = uint32_t;
constexpr TypeMask bit(ir::DType t) { return TypeMask{1} << static_cast<int>(t); }
constexpr TypeMask kFloatTypes = bit(ir::DType::kFloat32) | bit(ir::DType::kFloat16) |
                                 bit(ir::DType::kFloat64) | bit(ir::DType::kBFloat16);
constexpr TypeMask kSignedIntTypes = bit(ir::DType::kInt8) | bit(ir::DType::kInt16) |
                                     bit(ir::DType::kInt32) | bit(ir::DType::kInt64);
constexpr TypeMask kUnsignedIntTypes = bit(ir::DType::kUInt8) | bit(ir::DType::kUInt16) |
                                       bit(ir::DType::kUInt32) | bit(ir::DType::kUInt64);
constexpr TypeMask kIntTypes = kSignedIntTypes | kUnsignedIntTypes;
constexpr TypeMask kNumericTypes = kFloatTypes | kIntTypes;
constexpr TypeMask kBoolType = bit(ir::DType::kBool);
constexpr TypeMask kInt64Type = bit(ir::DType::kInt64);
constexpr TypeMask kInt32Or64Types = bit(ir::DType::kInt32) | bit(ir::DType::kInt64);
constexpr TypeMask kAllTypes = kNumericTypes | kBoolType | bit(ir::DType::kString);
/// "f32, f64, i64" for messages.
std::string typeMaskText(TypeMask m);

// ---------------------------------------------------------------------------------------------
// The form of an operator from one opset version on.

struct ArgSpec {
  std::string name;
  std::string typeVar; ///< key into OpVersion::typeVars
  bool optional = false;
  bool variadic = false; ///< only the last argument; one or more values
};

struct AttrSpec {
  std::string name;
  ir::AttrKind kind;
  bool required = false;
};

struct OpVersion {
  int since = 1;
  std::vector<ArgSpec> inputs;
  std::vector<ArgSpec> outputs;
  std::vector<AttrSpec> attrs;
  std::map<std::string, TypeMask> typeVars;

  // Chainable builders.
  OpVersion &in(const std::string &name, const std::string &typeVar);
  OpVersion &optIn(const std::string &name, const std::string &typeVar);
  OpVersion &variadicIn(const std::string &name, const std::string &typeVar);
  OpVersion &out(const std::string &name, const std::string &typeVar);
  OpVersion &optOut(const std::string &name, const std::string &typeVar);
  OpVersion &attr(const std::string &name, ir::AttrKind kind, bool required = false);
  OpVersion &type(const std::string &typeVar, TypeMask allowed);

  size_t minInputs() const;
  size_t maxInputs() const; ///< SIZE_MAX when the last input is variadic
  size_t minOutputs() const;
  size_t maxOutputs() const;
  const AttrSpec *findAttr(const std::string &name) const;
};

// ---------------------------------------------------------------------------------------------
// Contexts handed to an operator's functions.

/// Import-time rewriting of a node from its declared-opset form into the canonical form.
class NormalizeContext {
public:
  NormalizeContext(ir::Graph &g, int64_t opset, Diagnostics &diags)
      : graph_(g), opset_(opset), diags_(diags) {}
  ir::Graph &graph() { return graph_; }
  /// The model's declared version of the operator's domain.
  int64_t opset() const { return opset_; }
  Diagnostics &diags() { return diags_; }
  /// A new constant initializer (named after `node` and `what`) holding an int64 tensor.
  ir::Value *int64Constant(const ir::Node &node, const std::string &what,
                           const std::vector<int64_t> &values, bool scalar = false);
  ir::Value *floatConstant(const ir::Node &node, const std::string &what,
                           const std::vector<float> &values, bool scalar = false);
  /// Moves an int-list attribute (if present) into input `index` as an int64 constant,
  /// padding omitted inputs before it with nullptr. No-op when the attribute is absent.
  void attrToInput(ir::Node &node, const std::string &attrName, size_t index);

private:
  ir::Graph &graph_;
  int64_t opset_;
  Diagnostics &diags_;
};

/// Symbolic contents of small 1-D/0-D integer tensors (shape tensors): value -> elements.
/// ONNX calls this data propagation; it lets Reshape targets built from Shape(x) stay exact
/// when the batch is symbolic.
using ShapeValueMap = std::unordered_map<const ir::Value *, std::vector<ir::Dim>>;

/// Shape and type inference of one canonical node.
class InferenceContext {
public:
  InferenceContext(ir::Node &node, ShapeValueMap &shapeValues, Diagnostics &diags)
      : node_(node), shapeValues_(shapeValues), diags_(diags) {}
  ir::Node &node() { return node_; }
  Diagnostics &diags() { return diags_; }
  size_t numInputs() const { return node_.numInputs(); }
  bool hasInput(size_t i) const { return node_.input(i) != nullptr; }
  /// Type of input i (must be present).
  const ir::TensorType &inputType(size_t i) const { return node_.input(i)->type(); }
  const ir::Shape &inputShape(size_t i) const { return node_.input(i)->shape(); }
  ir::DType inputDType(size_t i) const { return node_.input(i)->dtype(); }
  /// Contents of input i when it is an initializer (constant, parameter, or parameter with a
  /// default value); nullptr otherwise.
  ir::TensorDataPtr constantInput(size_t i) const;
  /// Integer contents of input i when known: from a constant, or from data propagation
  /// (elements may then be symbolic). nullptr when unknown.
  const std::vector<ir::Dim> *shapeValue(size_t i);
  /// Integer contents of a constant input as int64s; error naming the node when the input is
  /// not constant or not integer.
  Expected<std::vector<int64_t>> constantInts(size_t i, const std::string &what);
  /// Records the symbolic contents of output i (for data propagation).
  void setShapeValue(size_t i, std::vector<ir::Dim> elements);
  /// Sets output i's shape; its dtype comes from the type constraints (or setOutputDType).
  void setOutputShape(size_t i, ir::Shape shape);
  void setOutputDType(size_t i, ir::DType t);
  /// "node 'x' (Op): <what>".
  Status error(const std::string &what) const { return Status::error(node_.where(), what); }

private:
  ir::Node &node_;
  ShapeValueMap &shapeValues_;
  Diagnostics &diags_;
  std::unordered_map<size_t, std::vector<ir::Dim>> constantCache_;
};

/// Constant folding: all inputs are known constants; returns one TensorData per output.
class FoldContext {
public:
  FoldContext(const ir::Node &node, std::vector<ir::TensorDataPtr> inputs)
      : node_(node), inputs_(std::move(inputs)) {}
  const ir::Node &node() const { return node_; }
  size_t numInputs() const { return inputs_.size(); }
  /// nullptr for an omitted optional input.
  const ir::TensorDataPtr &input(size_t i) const { return inputs_[i]; }
  Status error(const std::string &what) const { return Status::error(node_.where(), what); }

private:
  const ir::Node &node_;
  std::vector<ir::TensorDataPtr> inputs_;
};

using NormalizeFn = std::function<Status(ir::Node &, NormalizeContext &)>;
using InferFn = std::function<Status(InferenceContext &)>;
using FoldFn = std::function<Expected<std::vector<ir::TensorDataPtr>>(FoldContext &)>;

// ---------------------------------------------------------------------------------------------

struct OpDef {
  std::string name;
  std::string domain; ///< "" for ai.onnx, "ai.dtc" for dtc's own ops
  /// Forms by opset version, ascending `since`. The last one is the canonical form.
  std::vector<OpVersion> versions;
  /// Rewrites a node checked against versionFor(opset) into the canonical form. Optional:
  /// absent when every accepted form already is canonical.
  NormalizeFn normalize;
  /// Computes output shapes (and dtypes not given by type constraints). Required.
  InferFn infer;
  /// Evaluates the node on constant inputs. Optional (only ops worth folding).
  FoldFn fold;
  /// The gradient rule (ops/Gradient.h). Optional: ops without one are not differentiable.
  GradFn gradient;
  /// FLOPs and bytes of a node with static shapes (ops/Cost.h). Required: the completeness test
  /// (tests/unit/ops/CostTest.cpp) fails for an op without one.
  CostFn cost;
  /// How a node may be split over a tensor-parallel group (ops/Sharding.h). Required for every
  /// op a forward graph may hold (tests/unit/ops/ShardingTest.cpp).
  std::function<Status(ShardingContext &)> sharding;

  /// Starts a new version that copies the previous one (or an empty one).
  OpVersion &version(int since);
  /// The form in force at `opset`; nullptr when the op does not exist yet at that opset.
  const OpVersion *versionFor(int64_t opset) const;
  const OpVersion &canonical() const { return versions.back(); }
};

// ---------------------------------------------------------------------------------------------
// Registry (ops/Ops.def lists every op).

/// The definition of `opType` in `domain` ("" or "ai.onnx" = standard), or nullptr.
const OpDef *lookupOp(const std::string &domain, const std::string &opType);
/// Every registered op, in Ops.def order.
const std::vector<const OpDef *> &allOps();
/// "Abs, Add, ..." (sorted) for "unsupported operator" messages.
std::string supportedOpsText();

/// Checks a node against the form `v` (arity, attribute names and kinds, required attributes).
/// Errors name the node and the opset.
Status checkForm(const ir::Node &node, const OpVersion &v, int64_t opset);
/// Checks input dtypes against the canonical form's type constraints and sets output dtypes
/// that follow from them; errors name the node, the input and the allowed types.
Status checkTypesAndSetOutputDTypes(ir::Node &node, const OpVersion &canonical);

} // namespace dtc::ops
