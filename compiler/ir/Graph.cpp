// Graph, Node and Value mutation: use lists, node order, topological sort.
#include "compiler/ir/Graph.h"

#include <algorithm>
#include <unordered_set>

namespace dtc::ir {

const char *phaseName(Phase p) {
  switch (p) {
  case Phase::kForward: return "forward";
  case Phase::kBackward: return "backward";
  case Phase::kOptimizer: return "optimizer";
  case Phase::kComm: return "comm";
  }
  return "?";
}

void Value::replaceAllUsesWith(Value *other) {
  DTC_CHECK(other != this, "replaceAllUsesWith(self)");
  std::vector<Use> uses = uses_;
  for (const Use &u : uses)
    u.node->setInput(u.inputIndex, other);
  if (isGraphOutput_) {
    for (size_t i = 0; i < graph_->outputs().size(); ++i)
      if (graph_->outputs()[i] == this)
        graph_->setOutput(i, other);
  }
  graph_->training().forEachSlot([&](Value *&slot) {
    if (slot == this)
      slot = other;
  });
}

void Node::setName(std::string n) {
  if (n == name_)
    return;
  DTC_CHECK(!graph_->nodeByName_.count(n), "duplicate node name '" + n + "'");
  graph_->nodeByName_.erase(name_);
  name_ = std::move(n);
  graph_->nodeByName_[name_] = this;
}

std::string Node::where() const { return "node '" + name_ + "' (" + opType_ + ")"; }

void Node::removeUse(size_t inputIndex) {
  Value *v = inputs_[inputIndex];
  if (!v)
    return;
  auto &uses = v->uses_;
  for (auto it = uses.begin(); it != uses.end(); ++it)
    if (it->node == this && it->inputIndex == inputIndex) {
      uses.erase(it);
      return;
    }
  DTC_CHECK(false, "use list out of sync for " + where());
}

void Node::setInput(size_t i, Value *v) {
  DTC_CHECK(i < inputs_.size(), "setInput index out of range on " + where());
  removeUse(i);
  inputs_[i] = v;
  if (v)
    v->uses_.push_back({this, static_cast<unsigned>(i)});
}

void Node::addInput(Value *v) {
  inputs_.push_back(v);
  if (v)
    v->uses_.push_back({this, static_cast<unsigned>(inputs_.size() - 1)});
}

void Node::truncateInputs(size_t count) {
  while (inputs_.size() > count) {
    removeUse(inputs_.size() - 1);
    inputs_.pop_back();
  }
}

void Node::truncateOutputs(size_t count) {
  while (outputs_.size() > count) {
    Value *v = outputs_.back();
    DTC_CHECK(!v->hasUses() && !graph_->isLiveRoot(v), "truncating a used output of " + where());
    outputs_.pop_back();
    graph_->destroyValue(v);
  }
}

const Attribute *Node::attr(const std::string &n) const {
  auto it = attrs_.find(n);
  return it == attrs_.end() ? nullptr : &it->second;
}

int64_t Node::attrInt(const std::string &n, int64_t dflt) const {
  const Attribute *a = attr(n);
  return a && a->kind() == AttrKind::kInt ? a->i() : dflt;
}

float Node::attrFloat(const std::string &n, float dflt) const {
  const Attribute *a = attr(n);
  return a && a->kind() == AttrKind::kFloat ? a->f() : dflt;
}

std::string Node::attrString(const std::string &n, const std::string &dflt) const {
  const Attribute *a = attr(n);
  return a && a->kind() == AttrKind::kString ? a->s() : dflt;
}

std::vector<int64_t> Node::attrInts(const std::string &n, std::vector<int64_t> dflt) const {
  const Attribute *a = attr(n);
  return a && a->kind() == AttrKind::kInts ? a->ints() : dflt;
}

std::vector<float> Node::attrFloats(const std::string &n, std::vector<float> dflt) const {
  const Attribute *a = attr(n);
  return a && a->kind() == AttrKind::kFloats ? a->floats() : dflt;
}

int64_t Graph::onnxOpset() const {
  auto it = opsets_.find("");
  return it == opsets_.end() ? 0 : it->second;
}

Value *Graph::createValue(const std::string &name, TensorType type) {
  DTC_CHECK(!valueByName_.count(name), "duplicate value name '" + name + "'");
  std::unique_ptr<Value> v(new Value(this, name));
  v->type_ = std::move(type);
  Value *raw = v.get();
  values_.push_back(std::move(v));
  raw->self_ = std::prev(values_.end());
  valueByName_[name] = raw;
  return raw;
}

void Graph::destroyValue(Value *v) {
  valueByName_.erase(v->name_);
  values_.erase(v->self_);
}

Value *Graph::findValue(const std::string &name) const {
  auto it = valueByName_.find(name);
  return it == valueByName_.end() ? nullptr : it->second;
}

std::string Graph::uniqueName(const std::string &base) const {
  if (!valueByName_.count(base))
    return base;
  for (size_t i = 1;; ++i) {
    std::string n = base + "_" + std::to_string(i);
    if (!valueByName_.count(n))
      return n;
  }
}

std::string Graph::uniqueNodeName(const std::string &base) const {
  if (!nodeByName_.count(base))
    return base;
  for (size_t i = 1;; ++i) {
    std::string n = base + "_" + std::to_string(i);
    if (!nodeByName_.count(n))
      return n;
  }
}

void Graph::setInitializer(Value *v, TensorDataPtr data, bool isConstant) {
  v->type_ = TensorType{data->dtype(), Shape::ofStatic(data->dims())};
  v->initializer_ = std::move(data);
  v->isConstant_ = isConstant;
}

Value *Graph::addConstant(const std::string &base, TensorDataPtr data) {
  Value *v = createValue(uniqueName(base));
  setInitializer(v, std::move(data), /*isConstant=*/true);
  return v;
}

void Graph::addInput(Value *v) {
  v->isGraphInput_ = true;
  inputs_.push_back(v);
}

void Graph::addOutput(Value *v) {
  v->isGraphOutput_ = true;
  outputs_.push_back(v);
}

void Graph::setOutputs(const std::vector<Value *> &outs) {
  for (Value *v : outputs_)
    v->isGraphOutput_ = false;
  outputs_ = outs;
  for (Value *v : outputs_)
    v->isGraphOutput_ = true;
}

void Graph::setOutput(size_t i, Value *v) {
  Value *old = outputs_[i];
  outputs_[i] = v;
  v->isGraphOutput_ = true;
  old->isGraphOutput_ = std::find(outputs_.begin(), outputs_.end(), old) != outputs_.end();
}

std::vector<Value *> Graph::initializers() const {
  std::vector<Value *> out;
  for (const auto &v : values_)
    if (v->initializer_)
      out.push_back(v.get());
  return out;
}

std::vector<Value *> Graph::values() const {
  std::vector<Value *> out;
  for (const auto &v : values_)
    out.push_back(v.get());
  return out;
}

void Graph::removeDeadValues() {
  for (auto it = values_.begin(); it != values_.end();) {
    Value *v = it->get();
    ++it;
    if (!v->producer_ && v->uses_.empty() && !v->isGraphInput_ && !v->isParameter() &&
        !isLiveRoot(v))
      destroyValue(v);
  }
}

Node *Graph::makeNode(std::list<std::unique_ptr<Node>>::iterator pos, const std::string &opType,
                      const std::vector<Value *> &inputs,
                      const std::vector<std::string> &outputNames, const std::string &domain,
                      const std::string &name) {
  std::string nodeName = uniqueNodeName(name.empty() ? opType : name);
  std::unique_ptr<Node> n(new Node(this, nodeName, opType, domain == "ai.onnx" ? "" : domain));
  Node *raw = n.get();
  raw->self_ = nodes_.insert(pos, std::move(n));
  nodeByName_[nodeName] = raw;
  for (Value *v : inputs)
    raw->addInput(v);
  for (size_t i = 0; i < outputNames.size(); ++i) {
    Value *v = createValue(outputNames[i]);
    v->producer_ = raw;
    v->producerIndex_ = static_cast<unsigned>(i);
    raw->outputs_.push_back(v);
  }
  return raw;
}

Node *Graph::addNode(const std::string &opType, const std::vector<Value *> &inputs,
                     const std::vector<std::string> &outputNames, const std::string &domain,
                     const std::string &name) {
  return makeNode(nodes_.end(), opType, inputs, outputNames, domain, name);
}

Node *Graph::insertNodeBefore(Node *before, const std::string &opType,
                              const std::vector<Value *> &inputs,
                              const std::vector<std::string> &outputNames,
                              const std::string &domain, const std::string &name) {
  return makeNode(before->self_, opType, inputs, outputNames, domain, name);
}

void Graph::transferOutputs(Node *from, Node *to) {
  DTC_CHECK(to->outputs_.empty(), "transferOutputs into a node with outputs");
  to->outputs_ = std::move(from->outputs_);
  from->outputs_.clear();
  for (size_t i = 0; i < to->outputs_.size(); ++i) {
    to->outputs_[i]->producer_ = to;
    to->outputs_[i]->producerIndex_ = static_cast<unsigned>(i);
  }
}

void Graph::foldToConstants(Node *n, const std::vector<TensorDataPtr> &data) {
  DTC_CHECK(data.size() == n->outputs_.size(), "foldToConstants: one tensor per output");
  std::vector<Value *> outs = std::move(n->outputs_);
  n->outputs_.clear();
  for (size_t i = 0; i < outs.size(); ++i) {
    outs[i]->producer_ = nullptr;
    outs[i]->producerIndex_ = 0;
    setInitializer(outs[i], data[i], /*isConstant=*/true);
  }
  eraseNode(n);
}

void Graph::eraseNode(Node *n) {
  DTC_CHECK(training_.optimizerBegin != n,
            "erasing " + n->where() + ", the first node of the optimizer phase");
  for (size_t i = 0; i < n->inputs_.size(); ++i)
    n->removeUse(i);
  n->inputs_.clear();
  for (Value *v : n->outputs_) {
    DTC_CHECK(!v->hasUses() && !isLiveRoot(v),
              "erasing " + n->where() + " whose output '" + v->name() + "' is still used");
    destroyValue(v);
  }
  n->outputs_.clear();
  nodeByName_.erase(n->name_);
  nodes_.erase(n->self_);
}

std::vector<Node *> Graph::nodes() const {
  std::vector<Node *> out;
  out.reserve(nodes_.size());
  for (const auto &n : nodes_)
    out.push_back(n.get());
  return out;
}

Node *Graph::findNode(const std::string &name) const {
  auto it = nodeByName_.find(name);
  return it == nodeByName_.end() ? nullptr : it->second;
}

Status Graph::reorderNodes(const std::vector<Node *> &order) {
  if (order.size() != nodes_.size())
    return Status::error("reorder", "lists " + std::to_string(order.size()) + " of " +
                                        std::to_string(nodes_.size()) + " nodes");
  std::unordered_set<const Node *> placed;
  for (Node *n : order) {
    if (!n || &n->graph() != this || placed.count(n))
      return Status::error("reorder", n ? n->where() + " is listed twice or is not in the graph"
                                        : std::string("lists a null node"));
    for (Value *v : n->inputs())
      if (v && v->producer() && !placed.count(v->producer()))
        return Status::error(n->where(), "comes before the producer of its input '" +
                                             v->name() + "'");
    placed.insert(n);
  }
  std::list<std::unique_ptr<Node>> reordered;
  for (Node *n : order)
    reordered.splice(reordered.end(), nodes_, n->self_);
  nodes_.swap(reordered);
  return Status::ok();
}

Status Graph::topologicalSort() {
  // Kahn's algorithm; among ready nodes the one earliest in the current order goes first, so
  // an already sorted list is unchanged.
  std::vector<Node *> order = nodes();
  std::unordered_map<Node *, size_t> position;
  for (size_t i = 0; i < order.size(); ++i)
    position[order[i]] = i;
  std::unordered_map<Node *, size_t> pending;
  for (Node *n : order) {
    std::unordered_set<Node *> producers;
    for (Value *v : n->inputs())
      if (v && v->producer())
        producers.insert(v->producer());
    pending[n] = producers.size();
  }
  std::vector<size_t> ready; // min-heap of positions
  auto cmp = [](size_t a, size_t b) { return a > b; };
  for (Node *n : order)
    if (pending[n] == 0)
      ready.push_back(position[n]);
  std::make_heap(ready.begin(), ready.end(), cmp);
  std::vector<Node *> sorted;
  while (!ready.empty()) {
    std::pop_heap(ready.begin(), ready.end(), cmp);
    Node *n = order[ready.back()];
    ready.pop_back();
    sorted.push_back(n);
    std::unordered_set<Node *> consumers;
    for (Value *out : n->outputs())
      for (const Use &u : out->uses())
        consumers.insert(u.node);
    for (Node *c : consumers)
      if (--pending[c] == 0) {
        ready.push_back(position[c]);
        std::push_heap(ready.begin(), ready.end(), cmp);
      }
  }
  if (sorted.size() != order.size()) {
    for (Node *n : order)
      if (pending[n] != 0)
        return Status::error(n->where(), "the graph has a cycle through this node");
  }
  std::list<std::unique_ptr<Node>> reordered;
  for (Node *n : sorted)
    reordered.splice(reordered.end(), nodes_, n->self_);
  nodes_.swap(reordered);
  return Status::ok();
}

} // namespace dtc::ir
