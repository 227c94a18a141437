// Sequence operators rewritten into tensor operators before import (see SequenceRewrite.h).
#include "compiler/onnx/SequenceRewrite.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace dtc::onnxio {

namespace {

const std::set<std::string> kSequenceOps = {"SequenceEmpty",  "SequenceConstruct", "SequenceInsert",
                                            "SequenceErase",  "SplitToSequence",   "SequenceAt",
                                            "SequenceLength", "ConcatFromSequence"};

bool isDefaultDomain(const std::string &d) { return d.empty() || d == "ai.onnx"; }

class Rewriter {
public:
  Rewriter(onnx::GraphProto &g, int64_t opset) : g_(g), opset_(opset) {}

  Status run() {
    bool any = false;
    for (const onnx::NodeProto &n : g_.node())
      any = any || (isDefaultDomain(n.domain()) && kSequenceOps.count(n.op_type()));
    if (!any)
      return Status::ok();
    collect();
    std::vector<onnx::NodeProto> out;
    for (int i = 0; i < g_.node_size(); ++i) {
      const onnx::NodeProto &n = g_.node(i);
      const std::string name = n.name().empty() ? n.op_type() + "_" + std::to_string(i) : n.name();
      const std::string where = "node '" + name + "' (" + n.op_type() + ")";
      if (!isDefaultDomain(n.domain()) || !kSequenceOps.count(n.op_type())) {
        for (const std::string &in : n.input())
          if (seqs_.count(in))
            return Status::error(where, "takes the sequence '" + in +
                                            "'; dtc rewrites sequences into tensors at import, "
                                            "so only the sequence operators may use them");
        out.push_back(n);
        continue;
      }
      DTC_RETURN_IF_ERROR(rewrite(n, name, where, out));
    }
    for (const onnx::ValueInfoProto &o : g_.output())
      if (seqs_.count(o.name()))
        return Status::error("output '" + o.name() + "'",
                             "is a sequence; dtc's outputs are tensors (sequence types are not "
                             "supported)");
    g_.clear_node();
    for (onnx::NodeProto &n : out)
      *g_.add_node() = std::move(n);
    // Sequence-typed value_info entries describe values that no longer exist.
    auto *vi = g_.mutable_value_info();
    for (int k = vi->size(); k-- > 0;)
      if (vi->Get(k).type().has_sequence_type())
        vi->DeleteSubrange(k, 1);
    return Status::ok();
  }

private:
  void collect() {
    for (const onnx::TensorProto &t : g_.initializer()) {
      constants_[t.name()] = &t;
      names_.insert(t.name());
    }
    for (const onnx::ValueInfoProto &v : g_.input()) {
      types_[v.name()] = &v.type();
      names_.insert(v.name());
    }
    for (const onnx::ValueInfoProto &v : g_.value_info())
      types_.emplace(v.name(), &v.type());
    for (const onnx::ValueInfoProto &v : g_.output())
      types_.emplace(v.name(), &v.type());
    for (const onnx::NodeProto &n : g_.node()) {
      for (const std::string &o : n.output())
        names_.insert(o);
      names_.insert(n.name());
      if (isDefaultDomain(n.domain()) && n.op_type() == "Constant" && n.output_size() == 1)
        for (const onnx::AttributeProto &a : n.attribute()) {
          if (a.name() == "value" && a.has_t())
            constants_[n.output(0)] = &a.t();
          else if (a.name() == "value_int")
            scalarInts_[n.output(0)] = {a.i()};
          else if (a.name() == "value_ints")
            scalarInts_[n.output(0)] = std::vector<int64_t>(a.ints().begin(), a.ints().end());
        }
    }
  }

  std::string fresh(const std::string &base) {
    std::string n = base;
    for (int k = 1; names_.count(n); ++k)
      n = base + "_" + std::to_string(k);
    names_.insert(n);
    return n;
  }

  /// Integer contents of a constant (initializer or Constant node); nullopt when not constant.
  std::optional<std::vector<int64_t>> constantInts(const std::string &name,
                                                   std::vector<int64_t> *dims = nullptr) {
    if (auto it = scalarInts_.find(name); it != scalarInts_.end())
      return it->second;
    auto it = constants_.find(name);
    if (it == constants_.end())
      return std::nullopt;
    const onnx::TensorProto &t = *it->second;
    if (dims)
      dims->assign(t.dims().begin(), t.dims().end());
    std::vector<int64_t> v;
    if (t.data_type() == onnx::TensorProto::INT64) {
      if (!t.raw_data().empty()) {
        v.resize(t.raw_data().size() / 8);
        std::memcpy(v.data(), t.raw_data().data(), v.size() * 8);
      } else {
        v.assign(t.int64_data().begin(), t.int64_data().end());
      }
    } else if (t.data_type() == onnx::TensorProto::INT32) {
      if (!t.raw_data().empty()) {
        std::vector<int32_t> w(t.raw_data().size() / 4);
        std::memcpy(w.data(), t.raw_data().data(), w.size() * 4);
        v.assign(w.begin(), w.end());
      } else {
        v.assign(t.int32_data().begin(), t.int32_data().end());
      }
    } else {
      return std::nullopt;
    }
    return v;
  }

  /// Static dims of a tensor value known at import, or nullopt.
  std::optional<std::vector<int64_t>> staticDims(const std::string &name) {
    if (auto it = constants_.find(name); it != constants_.end())
      return std::vector<int64_t>(it->second->dims().begin(), it->second->dims().end());
    auto it = types_.find(name);
    if (it == types_.end() || !it->second->has_tensor_type() ||
        !it->second->tensor_type().has_shape())
      return std::nullopt;
    std::vector<int64_t> dims;
    for (const auto &d : it->second->tensor_type().shape().dim()) {
      if (!d.has_dim_value())
        dims.push_back(-1);
      else
        dims.push_back(d.dim_value());
    }
    return dims;
  }

  Expected<int64_t> position(const onnx::NodeProto &n, int input, size_t size, bool insert,
                             const std::string &where) {
    const std::string &name = n.input(input);
    auto v = constantInts(name);
    if (!v || v->size() != 1)
      return Status::error(where, "position '" + name +
                                      "' must be a constant scalar (an initializer or Constant "
                                      "node): dtc rewrites sequences into tensors at import");
    int64_t p = (*v)[0];
    const int64_t s = static_cast<int64_t>(size);
    const int64_t hi = insert ? s : s - 1;
    if (p < -s || p > hi)
      return Status::error(where, "position " + std::to_string(p) +
                                      " is out of range for a "
                                      "sequence of length " +
                                      std::to_string(s));
    return p < 0 ? p + s : p;
  }

  Expected<std::vector<std::string>> sequence(const onnx::NodeProto &n, int input,
                                              const std::string &where) {
    if (n.input_size() <= input || n.input(input).empty())
      return Status::error(where, "input " + std::to_string(input) + " (a sequence) is missing");
    auto it = seqs_.find(n.input(input));
    if (it == seqs_.end())
      return Status::error(where, "input '" + n.input(input) +
                                      "' is not a sequence made earlier in the node list by a "
                                      "sequence operator (sequence graph inputs are not "
                                      "supported)");
    return it->second;
  }

  int64_t attrInt(const onnx::NodeProto &n, const std::string &name, int64_t dflt) {
    for (const onnx::AttributeProto &a : n.attribute())
      if (a.name() == name)
        return a.i();
    return dflt;
  }

  onnx::NodeProto node(const std::string &op, const std::vector<std::string> &ins,
                       const std::vector<std::string> &outs, const std::string &name) {
    onnx::NodeProto p;
    p.set_op_type(op);
    p.set_name(fresh(name));
    for (const std::string &i : ins)
      p.add_input(i);
    for (const std::string &o : outs)
      p.add_output(o);
    return p;
  }

  static void setInt(onnx::NodeProto &p, const std::string &name, int64_t v) {
    onnx::AttributeProto *a = p.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void setInts(onnx::NodeProto &p, const std::string &name, const std::vector<int64_t> &v) {
    onnx::AttributeProto *a = p.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v)
      a->add_ints(x);
  }

  /// A new Constant node (appended to `out`) holding a 1-D int64 tensor; returns its output.
  std::string int64Constant(const std::string &base, const std::vector<int64_t> &v,
                            std::vector<onnx::NodeProto> &out) {
    const std::string name = fresh(base);
    onnx::NodeProto c = node("Constant", {}, {name}, name);
    onnx::AttributeProto *a = c.add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::INT64);
    a->mutable_t()->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v)
      a->mutable_t()->add_int64_data(x);
    out.push_back(std::move(c));
    return name;
  }

  /// Squeeze/Unsqueeze of one axis in the model opset's form (axes attribute before 13).
  void axesNode(const std::string &op, const std::string &in, const std::string &result,
                int64_t axis, const std::string &name, std::vector<onnx::NodeProto> &out) {
    if (opset_ >= 13) {
      std::string axes = int64Constant(name + "/axes", {axis}, out);
      out.push_back(node(op, {in, axes}, {result}, name));
      return;
    }
    onnx::NodeProto p = node(op, {in}, {result}, name);
    setInts(p, "axes", {axis});
    out.push_back(std::move(p));
  }

  Status rewrite(const onnx::NodeProto &n, const std::string &name, const std::string &where,
                 std::vector<onnx::NodeProto> &out) {
    const std::string &op = n.op_type();
    auto define = [&](std::vector<std::string> elements) -> Status {
      if (n.output_size() < 1 || n.output(0).empty())
        return Status::error(where, "has no output");
      seqs_[n.output(0)] = std::move(elements);
      return Status::ok();
    };
    if (op == "SequenceEmpty")
      return define({});
    if (op == "SequenceConstruct") {
      std::vector<std::string> els(n.input().begin(), n.input().end());
      for (const std::string &e : els)
        if (e.empty() || seqs_.count(e))
          return Status::error(where, "input '" + e + "' must be a tensor");
      return define(std::move(els));
    }
    if (op == "SequenceInsert") {
      DTC_ASSIGN_OR_RETURN(std::vector<std::string> s, sequence(n, 0, where));
      if (n.input_size() < 2 || n.input(1).empty())
        return Status::error(where, "input 1 (the tensor to insert) is missing");
      int64_t p = static_cast<int64_t>(s.size());
      if (n.input_size() > 2 && !n.input(2).empty()) {
        DTC_ASSIGN_OR_RETURN(p, position(n, 2, s.size(), true, where));
      }
      s.insert(s.begin() + p, n.input(1));
      return define(std::move(s));
    }
    if (op == "SequenceErase") {
      DTC_ASSIGN_OR_RETURN(std::vector<std::string> s, sequence(n, 0, where));
      if (s.empty())
        return Status::error(where, "erases from an empty sequence");
      int64_t p = static_cast<int64_t>(s.size()) - 1;
      if (n.input_size() > 1 && !n.input(1).empty()) {
        DTC_ASSIGN_OR_RETURN(p, position(n, 1, s.size(), false, where));
      }
      s.erase(s.begin() + p);
      return define(std::move(s));
    }
    if (op == "SequenceAt") {
      DTC_ASSIGN_OR_RETURN(std::vector<std::string> s, sequence(n, 0, where));
      if (n.input_size() < 2)
        return Status::error(where, "input 1 (position) is missing");
      DTC_ASSIGN_OR_RETURN(int64_t p, position(n, 1, s.size(), false, where));
      out.push_back(node("Identity", {s[static_cast<size_t>(p)]}, {n.output(0)}, name));
      return Status::ok();
    }
    if (op == "SequenceLength") {
      DTC_ASSIGN_OR_RETURN(std::vector<std::string> s, sequence(n, 0, where));
      onnx::NodeProto c = node("Constant", {}, {n.output(0)}, name);
      onnx::AttributeProto *a = c.add_attribute();
      a->set_name("value");
      a->set_type(onnx::AttributeProto::TENSOR);
      a->mutable_t()->set_data_type(onnx::TensorProto::INT64);
      a->mutable_t()->add_int64_data(static_cast<int64_t>(s.size()));
      out.push_back(std::move(c));
      return Status::ok();
    }
    if (op == "ConcatFromSequence") {
      DTC_ASSIGN_OR_RETURN(std::vector<std::string> s, sequence(n, 0, where));
      if (s.empty())
        return Status::error(where, "concatenates an empty sequence");
      const int64_t axis = attrInt(n, "axis", 0);
      if (attrInt(n, "new_axis", 0) != 0) {
        for (std::string &e : s) {
          std::string u = fresh(n.output(0) + "/unsqueezed");
          axesNode("Unsqueeze", e, u, axis, name + "/unsqueeze", out);
          e = u;
        }
      }
      onnx::NodeProto c = node("Concat", s, {n.output(0)}, name);
      setInt(c, "axis", axis);
      out.push_back(std::move(c));
      return Status::ok();
    }
    // SplitToSequence
    if (n.input_size() < 1 || n.input(0).empty())
      return Status::error(where, "input 0 is missing");
    const std::string &x = n.input(0);
    const int64_t axisAttr = attrInt(n, "axis", 0);
    const bool keepdims = attrInt(n, "keepdims", 1) != 0;
    std::vector<int64_t> sizes;
    bool squeeze = false;
    const bool hasSplit = n.input_size() > 1 && !n.input(1).empty();
    std::vector<int64_t> splitDims;
    std::optional<std::vector<int64_t>> split;
    if (hasSplit) {
      split = constantInts(n.input(1), &splitDims);
      if (!split)
        return Status::error(where, "input 'split' ('" + n.input(1) +
                                        "') must be a constant (an initializer or Constant "
                                        "node): dtc rewrites sequences into tensors at import");
    }
    if (hasSplit && !splitDims.empty()) {
      sizes = *split; // a list of sizes: keepdims is ignored (ONNX SplitToSequence)
    } else {
      auto dims = staticDims(x);
      int64_t axis = axisAttr;
      if (dims && axis < 0)
        axis += static_cast<int64_t>(dims->size());
      if (!dims || axis < 0 || axis >= static_cast<int64_t>(dims->size()) ||
          (*dims)[static_cast<size_t>(axis)] < 0)
        return Status::error(where, "the length of axis " + std::to_string(axisAttr) + " of '" + x +
                                        "' is not known at import; dtc rewrites sequences into "
                                        "tensors and needs it static (declare the shape in "
                                        "value_info or give 'split' as a constant list of sizes)");
      const int64_t d = (*dims)[static_cast<size_t>(axis)];
      const int64_t chunk = hasSplit ? (*split)[0] : 1;
      if (chunk <= 0)
        return Status::error(where, "split " + std::to_string(chunk) + " must be positive");
      for (int64_t done = 0; done < d; done += chunk)
        sizes.push_back(std::min(chunk, d - done));
      squeeze = !hasSplit && !keepdims;
    }
    if (sizes.empty())
      return define({});
    std::vector<std::string> parts;
    for (size_t k = 0; k < sizes.size(); ++k)
      parts.push_back(fresh(n.output(0) + "/" + std::to_string(k)));
    std::string sizesName = opset_ >= 13 ? int64Constant(name + "/split", sizes, out) : "";
    onnx::NodeProto sp = node("Split", {x}, parts, name);
    setInt(sp, "axis", axisAttr);
    if (opset_ >= 13)
      sp.add_input(sizesName);
    else
      setInts(sp, "split", sizes);
    out.push_back(std::move(sp));
    if (squeeze)
      for (std::string &p : parts) {
        std::string q = fresh(p + "/squeezed");
        axesNode("Squeeze", p, q, axisAttr, name + "/squeeze", out);
        p = q;
      }
    return define(std::move(parts));
  }

  onnx::GraphProto &g_;
  int64_t opset_;
  std::map<std::string, std::vector<std::string>> seqs_;
  std::map<std::string, const onnx::TensorProto *> constants_;
  std::map<std::string, std::vector<int64_t>> scalarInts_;
  std::map<std::string, const onnx::TypeProto *> types_;
  std::set<std::string> names_;
};

} // namespace

Status rewriteSequences(onnx::GraphProto &graph, int64_t opset) {
  return Rewriter(graph, opset).run();
}

} // namespace dtc::onnxio
