// Copies of merged initializers, one per use (see UntieInitializers.h).
#include "compiler/onnx/UntieInitializers.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <map>
#include <set>

namespace dtc::onnxio {

namespace {

/// Bytes of one element of the floating-point types the rule covers; 0 for the others.
size_t floatElementBytes(int32_t dtype) {
  switch (dtype) {
  case onnx::TensorProto::FLOAT:
    return 4;
  case onnx::TensorProto::DOUBLE:
    return 8;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    return 2;
  default:
    return 0;
  }
}

/// Whether every element of `t` has the same bits (false for an empty tensor, external data,
/// or data of the wrong length, which import reports).
bool isConstantFilled(const onnx::TensorProto &t) {
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    return false;
  const size_t elemBytes = floatElementBytes(t.data_type());
  int64_t count = 1;
  for (int64_t d : t.dims())
    count *= d;
  if (elemBytes == 0 || count <= 0)
    return false;
  if (t.has_raw_data()) {
    const std::string &raw = t.raw_data();
    if (raw.size() != static_cast<size_t>(count) * elemBytes)
      return false;
    for (size_t off = elemBytes; off < raw.size(); off += elemBytes)
      if (std::memcmp(raw.data(), raw.data() + off, elemBytes) != 0)
        return false;
    return true;
  }
  auto allSame = [&](const auto &field) {
    if (field.size() != count)
      return false;
    for (int i = 1; i < field.size(); ++i)
      if (std::memcmp(&field.Get(0), &field.Get(i), sizeof(field.Get(0))) != 0)
        return false;
    return true;
  };
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
    return allSame(t.float_data());
  case onnx::TensorProto::DOUBLE:
    return allSame(t.double_data());
  default: // float16 and bfloat16 are stored in int32_data
    return allSame(t.int32_data());
  }
}

/// Every name a node's subgraphs (If/Loop/Scan bodies, at any depth) read.
void collectSubgraphReads(const onnx::NodeProto &n, std::set<std::string> &out) {
  for (const onnx::AttributeProto &a : n.attribute()) {
    std::vector<const onnx::GraphProto *> graphs;
    if (a.has_g())
      graphs.push_back(&a.g());
    for (const onnx::GraphProto &g : a.graphs())
      graphs.push_back(&g);
    for (const onnx::GraphProto *g : graphs)
      for (const onnx::NodeProto &m : g->node()) {
        for (const std::string &in : m.input())
          out.insert(in);
        collectSubgraphReads(m, out);
      }
  }
}

bool isIdentity(const onnx::NodeProto &n) {
  return n.op_type() == "Identity" && (n.domain().empty() || n.domain() == "ai.onnx");
}

} // namespace

Expected<std::vector<UntiedInitializer>> untieInitializers(onnx::GraphProto &graph) {
  std::set<std::string> excluded; // graph inputs and outputs, names read inside subgraphs
  for (const onnx::ValueInfoProto &v : graph.input())
    excluded.insert(v.name());
  for (const onnx::ValueInfoProto &v : graph.output())
    excluded.insert(v.name());
  for (const onnx::NodeProto &n : graph.node())
    collectSubgraphReads(n, excluded);
  std::set<std::string> taken;           // every name in the graph, for fresh copy names
  std::map<std::string, int> candidates; // name -> index in graph.initializer()
  for (int i = 0; i < graph.initializer_size(); ++i) {
    const onnx::TensorProto &t = graph.initializer(i);
    taken.insert(t.name());
    if (!excluded.count(t.name()) && isConstantFilled(t))
      candidates.emplace(t.name(), i);
  }
  for (const onnx::NodeProto &n : graph.node())
    for (const std::string &o : n.output())
      taken.insert(o);
  if (candidates.empty())
    return std::vector<UntiedInitializer>{};

  // Identity nodes of a candidate are bypassed: their readers read the candidate (chains of
  // them too; an Identity whose output is a graph output stays).
  std::map<std::string, std::string> alias; // Identity output -> the candidate it passes on
  bool changed = true;
  std::set<int> dropped;
  while (changed) {
    changed = false;
    for (int i = 0; i < graph.node_size(); ++i) {
      const onnx::NodeProto &n = graph.node(i);
      if (dropped.count(i) || !isIdentity(n) || n.input_size() != 1 || n.output_size() != 1 ||
          excluded.count(n.output(0)))
        continue;
      std::string src = n.input(0);
      if (auto a = alias.find(src); a != alias.end())
        src = a->second;
      if (!candidates.count(src))
        continue;
      alias[n.output(0)] = src;
      dropped.insert(i);
      changed = true;
    }
  }
  if (!dropped.empty()) {
    auto *nodes = graph.mutable_node();
    for (auto it = dropped.rbegin(); it != dropped.rend(); ++it)
      nodes->DeleteSubrange(*it, 1);
    for (onnx::NodeProto &n : *nodes)
      for (std::string &in : *n.mutable_input())
        if (auto a = alias.find(in); a != alias.end())
          in = a->second;
  }

  // Uses in node order; each after the first gets its own copy.
  std::map<std::string, std::vector<std::string *>> uses;
  for (onnx::NodeProto &n : *graph.mutable_node())
    for (std::string &in : *n.mutable_input())
      if (candidates.count(in))
        uses[in].push_back(&in);
  std::vector<UntiedInitializer> result;
  for (auto &[name, list] : uses) {
    if (list.size() < 2)
      continue;
    UntiedInitializer u{name, {}};
    for (size_t k = 1; k < list.size(); ++k) {
      std::string copy = name + ".untied." + std::to_string(k);
      for (int extra = 1; taken.count(copy); ++extra)
        copy = name + ".untied." + std::to_string(k) + "_" + std::to_string(extra);
      taken.insert(copy);
      onnx::TensorProto t = graph.initializer(candidates.at(name));
      t.set_name(copy);
      *graph.add_initializer() = std::move(t);
      *list[k] = copy;
      u.copies.push_back(copy);
    }
    result.push_back(std::move(u));
  }
  return result;
}

} // namespace dtc::onnxio
