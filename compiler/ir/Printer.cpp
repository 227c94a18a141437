// IR printer (see Printer.h for the format).
#include "compiler/ir/Printer.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <unordered_map>

namespace dtc::ir {

static bool plainName(const std::string &s) {
  if (s.empty())
    return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == ':' ||
          c == '/' || c == '-'))
      return false;
  return true;
}

/// "text" with quotes, backslashes and control characters escaped (\", \\, \n, \xNN).
static std::string quote(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

static std::string valueRef(const Value *v) {
  if (!v)
    return "_";
  if (plainName(v->name()))
    return "%" + v->name();
  return "%" + quote(v->name());
}

/// Values of a small loaded constant: [1,2,3] (scalars without brackets).
static std::string constantText(const TensorData &t) {
  std::string out;
  if (isInteger(t.dtype()) || t.dtype() == DType::kBool) {
    auto v = t.toInt64s();
    if (!v)
      return "?";
    for (size_t i = 0; i < v->size(); ++i)
      out += (i ? "," : "") + std::to_string((*v)[i]);
  } else if (t.dtype() == DType::kFloat32 || t.dtype() == DType::kFloat64) {
    auto v = t.toDoubles();
    if (!v)
      return "?";
    for (size_t i = 0; i < v->size(); ++i)
      out += (i ? "," : "") + Attribute(static_cast<float>((*v)[i])).str();
  } else {
    return "...";
  }
  return t.dims().empty() ? out : "[" + out + "]";
}

static std::string typed(const Value *v) { return valueRef(v) + " : " + v->type().str(); }

std::string printNode(const Node &n) {
  std::string out;
  for (size_t i = 0; i < n.numOutputs(); ++i)
    out += (i ? ", " : "") + typed(n.output(i));
  out += " = ";
  if (!n.domain().empty())
    out += n.domain() + ".";
  out += n.opType() + " " + quote(n.name()) + " (";
  for (size_t i = 0; i < n.numInputs(); ++i)
    out += (i ? ", " : "") + valueRef(n.input(i));
  out += ")";
  if (!n.attributes().empty()) {
    out += " {";
    bool first = true;
    for (const auto &[name, a] : n.attributes()) {
      out += (first ? "" : ", ") + name + "=" + a.str();
      first = false;
    }
    out += "}";
  }
  std::string ann;
  if (n.phase() != Phase::kForward)
    ann += std::string(" phase=") + phaseName(n.phase());
  if (n.stage() >= 0)
    ann += " stage=" + std::to_string(n.stage());
  if (n.microBatch() >= 0)
    ann += " microbatch=" + std::to_string(n.microBatch());
  if (n.isWeightGradient())
    ann += " weight-gradient";
  if (n.placement() >= 0)
    ann += " placement=" + std::to_string(n.placement());
  if (!n.sharding().empty()) {
    ann += " sharding=(";
    for (size_t i = 0; i < n.sharding().size(); ++i) {
      const Sharding &s = n.sharding()[i];
      ann += (i ? "," : "") + s.text();
    }
    ann += ")";
  }
  if (!ann.empty())
    out += " [" + ann.substr(1) + "]";
  return out;
}

void printGraph(const Graph &g, std::ostream &os) {
  os << "graph " << g.name() << " opset(";
  bool first = true;
  for (const auto &[domain, version] : g.opsets()) {
    os << (first ? "" : ", ") << (domain.empty() ? "ai.onnx" : domain) << "=" << version;
    first = false;
  }
  os << ")\n";
  for (const Value *v : g.inputs())
    os << "  input " << typed(v) << (v->isInitializer() ? " = default" : "") << "\n";
  for (const Value *v : g.initializers()) {
    if (v->isGraphInput())
      continue;
    os << (v->isConstant() ? "  const " : "  param ") << typed(v);
    const TensorData &t = *v->initializer();
    if (!v->shard().isReplicated())
      os << " shard=" << v->shard().text();
    if (t.isExternal())
      os << " external";
    else if (t.numElements() <= 16 && v->shard().isReplicated())
      os << " = " << constantText(t);
    os << "\n";
  }
  for (const Node *n : g.nodes())
    os << "  " << printNode(*n) << "\n";
  for (const Value *v : g.outputs())
    os << "  output " << valueRef(v) << "\n";
  printTraining(g.training(), os);
}

void printTraining(const TrainingRoles &t, std::ostream &os) {
  if (t.empty())
    return;
  os << "  training {\n";
  auto line = [&](const char *role, const Value *v) {
    if (v)
      os << "    " << role << " " << valueRef(v) << "\n";
  };
  line("loss", t.loss);
  line("prediction", t.prediction);
  line("label", t.label);
  line("lr", t.lr);
  line("step", t.step);
  line("rng", t.rng);
  line("tp-rank", t.tpRank);
  line("dp-rank", t.dpRank);
  for (const ir::GradientShard &b : t.gradientShards) {
    os << "    gradient-shard " << valueRef(b.shard) << " of (";
    for (size_t k = 0; k < b.members.size(); ++k)
      os << (k ? ", " : "")
         << (b.members[k] < t.parameters.size() ? valueRef(t.parameters[b.members[k]])
                                                : std::string("?"));
    os << ")\n";
  }
  for (size_t i = 0; i < t.parameters.size(); ++i) {
    os << "    parameter " << valueRef(t.parameters[i]);
    if (i < t.gradients.size())
      os << " gradient " << valueRef(t.gradients[i]);
    if (i < t.optimizerState.size() && !t.optimizerState[i].empty()) {
      os << " state (";
      for (size_t k = 0; k < t.optimizerState[i].size(); ++k)
        os << (k ? ", " : "") << valueRef(t.optimizerState[i][k]);
      os << ")";
    }
    os << "\n";
  }
  for (const ir::StateUpdate &u : t.updates)
    os << "    update " << valueRef(u.state) << " <- " << valueRef(u.next) << "\n";
  if (t.optimizerBegin)
    os << "    optimizer-begin " << quote(t.optimizerBegin->name()) << "\n";
  os << "  }\n";
}

static std::string dotEscape(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out;
}

void printDot(const Graph &g, std::ostream &os) {
  os << "digraph \"" << dotEscape(g.name()) << "\" {\n  node [shape=box, fontname=\"monospace\"];\n";
  const std::vector<Node *> nodes = g.nodes();
  std::unordered_map<const Node *, size_t> id;
  for (size_t i = 0; i < nodes.size(); ++i) {
    id[nodes[i]] = i;
    os << "  n" << i << " [label=\"" << dotEscape(nodes[i]->opType()) << "\\n" << dotEscape(nodes[i]->name())
       << "\"];\n";
  }
  size_t extra = 0;
  for (const Value *v : g.inputs())
    os << "  in" << extra++ << " [shape=ellipse, label=\"" << dotEscape(v->name()) << "\"];\n";
  extra = 0;
  std::unordered_map<const Value *, size_t> inputId;
  for (const Value *v : g.inputs())
    inputId[v] = extra++;
  for (const Node *n : nodes)
    for (const Value *v : n->inputs()) {
      if (!v)
        continue;
      std::string label = dotEscape(v->name() + " " + v->type().str());
      if (v->producer())
        os << "  n" << id[v->producer()] << " -> n" << id[n] << " [label=\"" << label << "\"];\n";
      else if (inputId.count(v))
        os << "  in" << inputId[v] << " -> n" << id[n] << " [label=\"" << label << "\"];\n";
    }
  size_t k = 0;
  for (const Value *v : g.outputs()) {
    os << "  out" << k << " [shape=ellipse, label=\"" << dotEscape(v->name()) << "\"];\n";
    if (v->producer())
      os << "  n" << id[v->producer()] << " -> out" << k << ";\n";
    ++k;
  }
  os << "}\n";
}

void printSummary(const Graph &g, std::ostream &os) {
  const ModelInfo &info = g.modelInfo();
  os << "model:      " << (info.path.empty() ? g.name() : info.path);
  if (!info.producerName.empty())
    os << " (from " << info.producerName << " " << info.producerVersion << ")";
  os << "\nopsets:    ";
  for (const auto &[domain, version] : g.opsets())
    os << " " << (domain.empty() ? "ai.onnx" : domain) << "=" << version;
  os << "\n";
  for (const Value *v : g.inputs())
    os << "input:      " << v->name() << " " << v->type().str() << "\n";
  for (const Value *v : g.outputs())
    os << "output:     " << v->name() << " " << v->type().str() << "\n";
  int64_t params = 0, paramElems = 0, paramBytes = 0, consts = 0, external = 0;
  for (const Value *v : g.initializers()) {
    if (v->isParameter()) {
      ++params;
      paramElems += v->initializer()->numElements();
      paramBytes += v->initializer()->byteSize();
      external += v->initializer()->isExternal() ? 1 : 0;
    } else if (v->isConstant()) {
      ++consts;
    }
  }
  char line[200];
  std::snprintf(line, sizeof line, "parameters: %lld tensors, %lld values, %.1f KiB%s\n",
                static_cast<long long>(params), static_cast<long long>(paramElems),
                static_cast<double>(paramBytes) / 1024.0, external ? " (external data)" : "");
  os << line;
  os << "constants:  " << consts << "\n";
  std::map<std::string, int> counts;
  for (const Node *n : g.nodes())
    ++counts[(n->domain().empty() ? "" : n->domain() + ".") + n->opType()];
  os << "nodes:      " << g.numNodes() << "\n";
  std::vector<std::pair<int, std::string>> sorted;
  for (const auto &[op, c] : counts)
    sorted.emplace_back(-c, op);
  std::sort(sorted.begin(), sorted.end());
  for (const auto &[c, op] : sorted) {
    std::snprintf(line, sizeof line, "  %-28s %d\n", op.c_str(), -c);
    os << line;
  }
}

std::string printGraph(const Graph &g) {
  std::ostringstream os;
  printGraph(g, os);
  return os.str();
}

} // namespace dtc::ir
