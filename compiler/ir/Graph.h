// The IR: a Graph owns Nodes and Values (DESIGN.md section 3). A Value has a name, a
// TensorType, at most one producer and a list of uses; initializers are Values with attached
// (possibly lazily loaded) data. Nodes keep a topological order that passes must preserve.
#pragma once

#include "compiler/ir/Attribute.h"
#include "compiler/ir/Sharding.h"
#include "compiler/ir/TensorData.h"
#include "compiler/ir/Training.h"
#include "compiler/ir/Types.h"
#include "compiler/support/Status.h"

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace dtc::ir {

class Graph;
class Node;

/// Standard ONNX domain ("" and "ai.onnx" are the same domain) and dtc's own domain.
inline constexpr const char *kOnnxDomain = "";
inline constexpr const char *kDtcDomain = "ai.dtc";

/// Which part of the training step a node belongs to.
enum class Phase { kForward, kBackward, kOptimizer, kComm };
const char *phaseName(Phase p);

struct Use {
  Node *node;
  unsigned inputIndex;
};

class Value {
public:
  const std::string &name() const { return name_; }
  const TensorType &type() const { return type_; }
  TensorType &type() { return type_; }
  void setType(TensorType t) { type_ = std::move(t); }
  DType dtype() const { return type_.dtype; }
  const Shape &shape() const { return type_.shape; }

  /// The node that produces this value, or nullptr (graph input, initializer).
  Node *producer() const { return producer_; }
  unsigned producerIndex() const { return producerIndex_; }
  const std::vector<Use> &uses() const { return uses_; }
  bool hasUses() const { return !uses_.empty(); }

  /// Constant contents for initializers; nullptr otherwise.
  const TensorDataPtr &initializer() const { return initializer_; }
  bool isInitializer() const { return initializer_ != nullptr; }
  bool isGraphInput() const { return isGraphInput_; }
  bool isGraphOutput() const { return isGraphOutput_; }
  /// A model weight (an initializer that is not a folded constant). An initializer also
  /// listed as a graph input is a parameter with a default value: it is trained like any other,
  /// and a caller may feed a value for it instead (ONNX IR spec, "initializer" section).
  bool isParameter() const { return initializer_ && !isConstant_; }
  /// An initializer made from a Constant node or by constant folding: never trained.
  bool isConstant() const { return initializer_ && isConstant_; }

  /// Tensor parallelism: how this weight (or its gradient) is split over the tp group; its type
  /// is then the local shard's, and an initializer keeps the whole tensor (the runtime slices
  /// it). Replicated by default.
  const Sharding &shard() const { return shard_; }
  void setShard(Sharding s) { shard_ = s; }

  /// Points every use of this value (node inputs, graph outputs and training roles) at `other`.
  void replaceAllUsesWith(Value *other);

private:
  friend class Graph;
  friend class Node;
  Value(Graph *g, std::string name) : graph_(g), name_(std::move(name)) {}
  Graph *graph_;
  std::string name_;
  TensorType type_;
  Node *producer_ = nullptr;
  unsigned producerIndex_ = 0;
  std::vector<Use> uses_;
  TensorDataPtr initializer_;
  bool isGraphInput_ = false;
  bool isGraphOutput_ = false;
  bool isConstant_ = false;
  Sharding shard_;
  std::list<std::unique_ptr<Value>>::iterator self_;
};

class Node {
public:
  const std::string &name() const { return name_; }
  /// Renames the node; `n` must not name another node of the graph.
  void setName(std::string n);
  const std::string &opType() const { return opType_; }
  const std::string &domain() const { return domain_; }
  /// "node 'conv1' (Conv)": the `where` part of error messages.
  std::string where() const;

  size_t numInputs() const { return inputs_.size(); }
  size_t numOutputs() const { return outputs_.size(); }
  /// Input `i`, or nullptr when an optional input is omitted (ONNX empty name) or i is out of
  /// range.
  Value *input(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  Value *output(size_t i) const { return i < outputs_.size() ? outputs_[i] : nullptr; }
  const std::vector<Value *> &inputs() const { return inputs_; }
  const std::vector<Value *> &outputs() const { return outputs_; }
  void setInput(size_t i, Value *v);
  void addInput(Value *v);
  /// Drops inputs from `count` on (keeps the first `count`).
  void truncateInputs(size_t count);
  /// Drops outputs from `count` on; the dropped values must be unused.
  void truncateOutputs(size_t count);

  // Attributes, sorted by name (deterministic printing).
  const std::map<std::string, Attribute> &attributes() const { return attrs_; }
  bool hasAttr(const std::string &n) const { return attrs_.count(n) != 0; }
  const Attribute *attr(const std::string &n) const;
  void setAttr(const std::string &n, Attribute a) { attrs_[n] = std::move(a); }
  void removeAttr(const std::string &n) { attrs_.erase(n); }
  int64_t attrInt(const std::string &n, int64_t dflt) const;
  float attrFloat(const std::string &n, float dflt) const;
  std::string attrString(const std::string &n, const std::string &dflt) const;
  std::vector<int64_t> attrInts(const std::string &n, std::vector<int64_t> dflt = {}) const;
  std::vector<float> attrFloats(const std::string &n, std::vector<float> dflt = {}) const;

  // Annotations used by later passes.
  Phase phase() const { return phase_; }
  void setPhase(Phase p) { phase_ = p; }
  int stage() const { return stage_; }
  void setStage(int s) { stage_ = s; }
  /// Pipeline micro-batch whose forward or backward pass this node belongs to; -1 for nodes
  /// that run once per step (or before the pipeline pass).
  int microBatch() const { return microBatch_; }
  void setMicroBatch(int m) { microBatch_ = m; }
  /// Zero-bubble pipelines: a backward node that only weight gradients need (the W part, which
  /// the schedule may defer), not the input gradient another stage waits for (the B part).
  bool isWeightGradient() const { return weightGradient_; }
  void setWeightGradient(bool w) { weightGradient_ = w; }
  int placement() const { return placement_; }
  void setPlacement(int p) { placement_ = p; }
  const std::vector<Sharding> &sharding() const { return sharding_; }
  void setSharding(std::vector<Sharding> s) { sharding_ = std::move(s); }

  Graph &graph() const { return *graph_; }

private:
  friend class Graph;
  Node(Graph *g, std::string name, std::string opType, std::string domain)
      : graph_(g), name_(std::move(name)), opType_(std::move(opType)),
        domain_(std::move(domain)) {}
  void removeUse(size_t inputIndex);
  Graph *graph_;
  std::string name_;
  std::string opType_;
  std::string domain_;
  std::vector<Value *> inputs_;
  std::vector<Value *> outputs_;
  std::map<std::string, Attribute> attrs_;
  Phase phase_ = Phase::kForward;
  int stage_ = -1;
  int microBatch_ = -1;
  bool weightGradient_ = false;
  int placement_ = -1;
  std::vector<Sharding> sharding_;
  std::list<std::unique_ptr<Node>>::iterator self_;
};

/// Where a model came from and what it declares (kept for export and diagnostics).
struct ModelInfo {
  std::string path;       ///< the model file as given on the command line
  std::string directory;  ///< folder external data is resolved against
  int64_t irVersion = 8;
  std::string producerName;
  std::string producerVersion;
  std::string docString;
};

class Graph {
  friend class Node;

public:
  Graph() = default;
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;

  const std::string &name() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }
  ModelInfo &modelInfo() { return info_; }
  const ModelInfo &modelInfo() const { return info_; }

  /// Declared opset per domain ("" = ai.onnx).
  const std::map<std::string, int64_t> &opsets() const { return opsets_; }
  void setOpset(const std::string &domain, int64_t version) { opsets_[domain] = version; }
  /// The ai.onnx opset version (0 when not declared).
  int64_t onnxOpset() const;

  // Values.
  /// Creates a value named `name`; the name must be new (see uniqueName()).
  Value *createValue(const std::string &name, TensorType type = {});
  Value *findValue(const std::string &name) const;
  /// `base` when unused, else `base_1`, `base_2`, ...
  std::string uniqueName(const std::string &base) const;
  /// Turns `v` into an initializer holding `data` (its type becomes the data's type).
  /// `isConstant`: made from a Constant node or by folding (not a trainable parameter).
  void setInitializer(Value *v, TensorDataPtr data, bool isConstant = false);
  /// Creates a new constant initializer named uniqueName(base) holding `data`.
  Value *addConstant(const std::string &base, TensorDataPtr data);
  const std::vector<Value *> &inputs() const { return inputs_; }
  const std::vector<Value *> &outputs() const { return outputs_; }
  void addInput(Value *v);
  void addOutput(Value *v);
  void setOutput(size_t i, Value *v);
  /// Replaces the whole output list; values dropped from it stop being graph outputs.
  void setOutputs(const std::vector<Value *> &outs);
  /// Initializers in creation order.
  std::vector<Value *> initializers() const;
  /// Every value, in creation order.
  std::vector<Value *> values() const;
  /// Deletes values that have no producer, no uses and are not graph inputs/outputs, parameters
  /// (an unused parameter is kept: it is part of the model's state) or holders of a training
  /// role.
  void removeDeadValues();

  // Training roles (compiler/ir/Training.h): empty until the training passes fill them.
  TrainingRoles &training() { return training_; }
  const TrainingRoles &training() const { return training_; }
  /// True when `v` is not dead for being referenced by a training role (or a graph output).
  bool isLiveRoot(const Value *v) const {
    return v->isGraphOutput() || (!training_.empty() && training_.references(v));
  }

  // Nodes.
  /// Appends a node. Output values are created with the given names (must be new).
  Node *addNode(const std::string &opType, const std::vector<Value *> &inputs,
                const std::vector<std::string> &outputNames, const std::string &domain = "",
                const std::string &name = "");
  /// Like addNode but inserted just before `before` in the node order.
  Node *insertNodeBefore(Node *before, const std::string &opType,
                         const std::vector<Value *> &inputs,
                         const std::vector<std::string> &outputNames,
                         const std::string &domain = "", const std::string &name = "");
  /// Moves `from`'s output values (with their names, types and uses) to `to`, which must have
  /// no outputs yet. Used when a node is replaced by a new one that computes the same values.
  void transferOutputs(Node *from, Node *to);
  /// Replaces node `n` by constants: output i keeps its name, type and uses and becomes a
  /// constant initializer holding data[i]; the node is removed. Used by Constant import and
  /// constant folding.
  void foldToConstants(Node *n, const std::vector<TensorDataPtr> &data);
  /// Removes a node; its outputs must have no uses and no training role left (they are removed
  /// too), and it must not be TrainingRoles::optimizerBegin.
  void eraseNode(Node *n);
  /// Nodes in order (a snapshot: safe to erase while iterating over it).
  std::vector<Node *> nodes() const;
  size_t numNodes() const { return nodes_.size(); }
  Node *findNode(const std::string &name) const;
  /// Sorts nodes topologically (stable: keeps the given order where it is already valid).
  /// Errors on a cycle, naming a node on it.
  Status topologicalSort();
  /// Puts the nodes in `order`, which must hold every node once and be topological (each node
  /// after the producers of its inputs); otherwise an error naming the first offending node, and
  /// the graph is unchanged. Pipelines use it to lay out each stage's schedule.
  Status reorderNodes(const std::vector<Node *> &order);
  std::string uniqueNodeName(const std::string &base) const;

private:
  void destroyValue(Value *v);
  Node *makeNode(std::list<std::unique_ptr<Node>>::iterator pos, const std::string &opType,
                 const std::vector<Value *> &inputs, const std::vector<std::string> &outputNames,
                 const std::string &domain, const std::string &name);
  std::string name_ = "main";
  ModelInfo info_;
  std::map<std::string, int64_t> opsets_;
  std::list<std::unique_ptr<Node>> nodes_;
  std::list<std::unique_ptr<Value>> values_;
  std::unordered_map<std::string, Value *> valueByName_;
  std::unordered_map<std::string, Node *> nodeByName_;
  std::vector<Value *> inputs_;
  std::vector<Value *> outputs_;
  TrainingRoles training_;
};

} // namespace dtc::ir
