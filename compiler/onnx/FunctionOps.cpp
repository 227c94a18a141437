// RMSNormalization, RotaryEmbedding and Attention (opset 23) expanded into primitive operators
// before import (see FunctionOps.h). The expansions follow the operators' ONNX function
// definitions and the reference code in the operator documentation.
#include "compiler/onnx/FunctionOps.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

namespace dtc::onnxio {

namespace {

const std::set<std::string> kFunctionOps = {"RMSNormalization", "RotaryEmbedding", "Attention"};

bool isDefaultDomain(const std::string &d) { return d.empty() || d == "ai.onnx"; }

const char *elemTypeName(int t) {
  switch (t) {
  case onnx::TensorProto::FLOAT:
    return "float";
  case onnx::TensorProto::FLOAT16:
    return "float16";
  case onnx::TensorProto::DOUBLE:
    return "double";
  case onnx::TensorProto::BFLOAT16:
    return "bfloat16";
  case onnx::TensorProto::BOOL:
    return "bool";
  case onnx::TensorProto::INT64:
    return "int64";
  case onnx::TensorProto::INT32:
    return "int32";
  default:
    return "a non-float type";
  }
}

bool isFloatElem(int t) {
  return t == onnx::TensorProto::FLOAT || t == onnx::TensorProto::FLOAT16 ||
         t == onnx::TensorProto::DOUBLE || t == onnx::TensorProto::BFLOAT16;
}

/// The attributes of one node, by name, with their defaults applied by the caller.
class Attrs {
public:
  Attrs(const onnx::NodeProto &n) {
    for (const onnx::AttributeProto &a : n.attribute())
      byName_[a.name()] = &a;
  }
  bool has(const std::string &k) const { return byName_.count(k) != 0; }
  int64_t i(const std::string &k, int64_t dflt) const {
    auto it = byName_.find(k);
    return it == byName_.end() ? dflt : it->second->i();
  }
  float f(const std::string &k, float dflt) const {
    auto it = byName_.find(k);
    return it == byName_.end() ? dflt : it->second->f();
  }
  /// Error naming the first attribute outside `known`, or one of the wrong kind.
  Status check(const std::string &where,
               const std::map<std::string, onnx::AttributeProto::AttributeType> &known) const {
    for (const auto &[name, a] : byName_) {
      auto it = known.find(name);
      if (it == known.end())
        return Status::error(where, "unknown attribute '" + name + "'");
      if (a->type() != onnx::AttributeProto::UNDEFINED && a->type() != it->second)
        return Status::error(
            where, "attribute '" + name + "' has the wrong kind (" +
                       std::string(it->second == onnx::AttributeProto::INT ? "INT" : "FLOAT") +
                       " expected)");
    }
    return Status::ok();
  }

private:
  std::map<std::string, const onnx::AttributeProto *> byName_;
};

class Expander {
public:
  Expander(onnx::GraphProto &g, int64_t opset) : g_(g), opset_(opset) {}

  Status run() {
    bool any = false;
    for (const onnx::NodeProto &n : g_.node())
      any = any || (isDefaultDomain(n.domain()) && kFunctionOps.count(n.op_type()));
    if (!any || opset_ < 23)
      return Status::ok(); // before opset 23 these ops do not exist: the importer says so
    collect();
    std::deque<onnx::NodeProto> out; // stable references while nodes are appended
    for (int i = 0; i < g_.node_size(); ++i) {
      const onnx::NodeProto &n = g_.node(i);
      if (!isDefaultDomain(n.domain()) || !kFunctionOps.count(n.op_type())) {
        out.push_back(n);
        // The name the importer would give it at its original position (messages stay the
        // same whether or not an earlier node was expanded into several).
        if (n.name().empty())
          out.back().set_name(n.op_type() + "_" + std::to_string(i));
        continue;
      }
      const std::string name = n.name().empty() ? n.op_type() + "_" + std::to_string(i) : n.name();
      where_ = "node '" + name + "' (" + n.op_type() + ")";
      base_ = name;
      out_ = &out;
      if (n.op_type() == "RMSNormalization")
        DTC_RETURN_IF_ERROR(rmsNormalization(n));
      else if (n.op_type() == "RotaryEmbedding")
        DTC_RETURN_IF_ERROR(rotaryEmbedding(n));
      else
        DTC_RETURN_IF_ERROR(attention(n));
    }
    g_.clear_node();
    for (onnx::NodeProto &n : out)
      *g_.add_node() = std::move(n);
    return Status::ok();
  }

private:
  // --- what is known at import: declared types and constants -------------------------------
  void collect() {
    for (const onnx::TensorProto &t : g_.initializer()) {
      names_.insert(t.name());
      dims_[t.name()] = std::vector<int64_t>(t.dims().begin(), t.dims().end());
      elem_[t.name()] = t.data_type();
    }
    auto fromInfo = [&](const onnx::ValueInfoProto &v) {
      names_.insert(v.name());
      if (!v.type().has_tensor_type())
        return;
      const auto &tt = v.type().tensor_type();
      if (tt.elem_type() != 0)
        elem_.emplace(v.name(), tt.elem_type());
      if (!tt.has_shape())
        return;
      std::vector<int64_t> dims;
      for (const auto &d : tt.shape().dim())
        dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
      dims_.emplace(v.name(), std::move(dims));
    };
    for (const onnx::ValueInfoProto &v : g_.input())
      fromInfo(v);
    for (const onnx::ValueInfoProto &v : g_.value_info())
      fromInfo(v);
    for (const onnx::ValueInfoProto &v : g_.output())
      fromInfo(v);
    for (const onnx::NodeProto &n : g_.node()) {
      names_.insert(n.name());
      for (const std::string &o : n.output())
        names_.insert(o);
      for (const std::string &in : n.input())
        names_.insert(in);
      if (isDefaultDomain(n.domain()) && n.op_type() == "Constant" && n.output_size() == 1)
        for (const onnx::AttributeProto &a : n.attribute())
          if (a.name() == "value" && a.has_t()) {
            dims_[n.output(0)] = std::vector<int64_t>(a.t().dims().begin(), a.t().dims().end());
            elem_[n.output(0)] = a.t().data_type();
          }
    }
  }

  std::optional<size_t> rank(const std::string &v) const {
    auto it = dims_.find(v);
    if (it == dims_.end())
      return std::nullopt;
    return it->second.size();
  }
  /// A static dim of `v`, or -1.
  int64_t dim(const std::string &v, size_t i) const {
    auto it = dims_.find(v);
    if (it == dims_.end() || i >= it->second.size())
      return -1;
    return it->second[i];
  }
  int elem(const std::string &v) const {
    auto it = elem_.find(v);
    return it == elem_.end() ? 0 : it->second;
  }

  Status error(const std::string &what) const { return Status::error(where_, what); }

  // --- emitting nodes -------------------------------------------------------------------------
  std::string fresh(const std::string &suffix) {
    std::string n = base_ + "/" + suffix;
    for (int k = 1; names_.count(n); ++k)
      n = base_ + "/" + suffix + "_" + std::to_string(k);
    names_.insert(n);
    return n;
  }

  /// Appends a node; its single output gets a fresh name unless `outName` is given.
  onnx::NodeProto &emit(const std::string &op, const std::vector<std::string> &ins,
                        const std::string &outName = "") {
    onnx::NodeProto p;
    p.set_op_type(op);
    p.set_name(fresh(op));
    for (const std::string &i : ins)
      p.add_input(i);
    p.add_output(outName.empty() ? fresh(op + "_out") : outName);
    out_->push_back(std::move(p));
    return out_->back();
  }
  std::string op(const std::string &type, const std::vector<std::string> &ins,
                 const std::string &outName = "") {
    return emit(type, ins, outName).output(0);
  }

  static void setInt(onnx::NodeProto &p, const std::string &k, int64_t v) {
    onnx::AttributeProto *a = p.add_attribute();
    a->set_name(k);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void setInts(onnx::NodeProto &p, const std::string &k, const std::vector<int64_t> &v) {
    onnx::AttributeProto *a = p.add_attribute();
    a->set_name(k);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v)
      a->add_ints(x);
  }

  std::string constant(onnx::TensorProto t, const std::string &what) {
    onnx::NodeProto &p = emit("Constant", {}, fresh(what));
    t.set_name(p.output(0));
    onnx::AttributeProto *a = p.add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    *a->mutable_t() = std::move(t);
    return p.output(0);
  }
  std::string ints(const std::vector<int64_t> &v, const std::string &what, bool scalar = false) {
    onnx::TensorProto t;
    t.set_data_type(onnx::TensorProto::INT64);
    if (!scalar)
      t.add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v)
      t.add_int64_data(x);
    return constant(std::move(t), what);
  }
  /// A scalar of `x`'s float type holding `value` (a CastLike of an f32 constant when `x`'s type
  /// is not declared).
  std::string scalarLike(double value, const std::string &x, const std::string &what) {
    onnx::TensorProto t;
    int et = elem(x);
    if (et == onnx::TensorProto::DOUBLE) {
      t.set_data_type(onnx::TensorProto::DOUBLE);
      t.add_double_data(value);
      return constant(std::move(t), what);
    }
    t.set_data_type(onnx::TensorProto::FLOAT);
    t.add_float_data(static_cast<float>(value));
    std::string c = constant(std::move(t), what);
    if (et == onnx::TensorProto::FLOAT)
      return c;
    return op("CastLike", {c, x});
  }
  std::string reshape(const std::string &x, const std::vector<int64_t> &shape) {
    return op("Reshape", {x, ints(shape, "shape")});
  }
  std::string transpose(const std::string &x, const std::vector<int64_t> &perm,
                        const std::string &outName = "") {
    onnx::NodeProto &p = emit("Transpose", {x}, outName);
    setInts(p, "perm", perm);
    return p.output(0);
  }
  std::string slice(const std::string &x, int64_t start, int64_t end, int64_t axis,
                    int64_t step = 1) {
    return op("Slice", {x, ints({start}, "starts"), ints({end}, "ends"), ints({axis}, "axes"),
                        ints({step}, "steps")});
  }
  std::string unsqueeze(const std::string &x, int64_t axis) {
    return op("Unsqueeze", {x, ints({axis}, "axes")});
  }
  std::string concat(const std::vector<std::string> &xs, int64_t axis,
                     const std::string &outName = "") {
    onnx::NodeProto &p = emit("Concat", xs, outName);
    setInt(p, "axis", axis);
    return p.output(0);
  }
  std::string shapeSlice(const std::string &x, int64_t start, int64_t end) {
    onnx::NodeProto &p = emit("Shape", {x});
    setInt(p, "start", start);
    setInt(p, "end", end);
    return p.output(0);
  }

  static std::string input(const onnx::NodeProto &n, int i) {
    return i < n.input_size() ? n.input(i) : std::string();
  }
  static std::string output(const onnx::NodeProto &n, int i) {
    return i < n.output_size() ? n.output(i) : std::string();
  }
  Status needInputs(const onnx::NodeProto &n, int required, int max) {
    if (n.input_size() > max)
      return error("takes at most " + std::to_string(max) + " inputs, got " +
                   std::to_string(n.input_size()));
    for (int i = 0; i < required; ++i)
      if (input(n, i).empty())
        return error("input " + std::to_string(i) + " is required");
    return Status::ok();
  }

  // --- RMSNormalization -----------------------------------------------------------------------
  Status rmsNormalization(const onnx::NodeProto &n) {
    Attrs at(n);
    DTC_RETURN_IF_ERROR(at.check(where_, {{"axis", onnx::AttributeProto::INT},
                                          {"epsilon", onnx::AttributeProto::FLOAT},
                                          {"stash_type", onnx::AttributeProto::INT}}));
    DTC_RETURN_IF_ERROR(needInputs(n, 2, 2));
    if (n.output_size() != 1 || n.output(0).empty())
      return error("needs exactly one output (Y)");
    const std::string x = n.input(0), scale = n.input(1);
    int64_t axis = at.i("axis", -1);
    std::vector<int64_t> axes;
    if (axis < 0) {
      for (int64_t a = axis; a < 0; ++a)
        axes.push_back(a);
      if (auto r = rank(x); r && -axis > static_cast<int64_t>(*r))
        return error("attribute 'axis' = " + std::to_string(axis) + " is out of range for '" + x +
                     "' of rank " + std::to_string(*r));
    } else {
      auto r = rank(x);
      if (!r)
        return error("attribute 'axis' = " + std::to_string(axis) + " needs the rank of '" + x +
                     "', which is not declared (give it a type in value_info, or use a "
                     "negative axis)");
      if (axis >= static_cast<int64_t>(*r))
        return error("attribute 'axis' = " + std::to_string(axis) + " is out of range for '" + x +
                     "' of rank " + std::to_string(*r));
      for (int64_t a = axis; a < static_cast<int64_t>(*r); ++a)
        axes.push_back(a);
    }
    const int64_t stash = at.i("stash_type", onnx::TensorProto::FLOAT);
    if (!isFloatElem(static_cast<int>(stash)))
      return error("attribute 'stash_type' = " + std::to_string(stash) +
                   " is not a floating-point type (1 float, 10 float16, 11 double, 16 bfloat16)");
    const bool cast = elem(x) != stash;
    std::string xs = x;
    if (cast) {
      onnx::NodeProto &c = emit("Cast", {x});
      setInt(c, "to", stash);
      xs = c.output(0);
      elem_[xs] = static_cast<int>(stash);
    }
    std::string sq = op("Mul", {xs, xs});
    onnx::NodeProto &mean = emit("ReduceMean", {sq, ints(axes, "axes")});
    setInt(mean, "keepdims", 1);
    std::string eps = scalarLike(at.f("epsilon", 1e-5f), xs, "epsilon");
    std::string rms = op("Sqrt", {op("Add", {mean.output(0), eps})});
    std::string norm = op("Div", {xs, rms});
    if (cast)
      norm = op("CastLike", {norm, x});
    op("Mul", {norm, scale}, n.output(0));
    return Status::ok();
  }

  // --- RotaryEmbedding ------------------------------------------------------------------------
  Status rotaryEmbedding(const onnx::NodeProto &n) {
    Attrs at(n);
    DTC_RETURN_IF_ERROR(at.check(where_, {{"interleaved", onnx::AttributeProto::INT},
                                          {"num_heads", onnx::AttributeProto::INT},
                                          {"rotary_embedding_dim", onnx::AttributeProto::INT}}));
    DTC_RETURN_IF_ERROR(needInputs(n, 3, 4));
    if (n.output_size() != 1 || n.output(0).empty())
      return error("needs exactly one output (Y)");
    const std::string x = n.input(0), cosCache = n.input(1), sinCache = n.input(2);
    const std::string positions = input(n, 3);
    const int64_t numHeads = at.i("num_heads", 0);
    // Rank: declared, else 4 when num_heads is absent (a 3-D input needs it).
    auto r = rank(x);
    if (!r && numHeads <= 0)
      r = 4;
    if (!r || (*r != 3 && *r != 4))
      return error(r ? "input 'X' must have rank 3 or 4, got " + std::to_string(*r)
                     : "the rank of input 'X' ('" + x +
                           "') is not declared; dtc expands RotaryEmbedding at import and needs "
                           "it (give it a type in value_info)");
    int64_t headSize = -1; // -1: not declared
    std::string x4;        // (B, S, heads, H)
    if (*r == 3) {
      if (numHeads <= 0)
        return error("attribute 'num_heads' must be given (> 0) for a 3-D input 'X'");
      int64_t hidden = dim(x, 2);
      if (hidden >= 0 && hidden % numHeads)
        return error("the hidden size " + std::to_string(hidden) +
                     " of input 'X' is not a multiple of attribute 'num_heads' = " +
                     std::to_string(numHeads));
      headSize = hidden >= 0 ? hidden / numHeads : -1;
      x4 = reshape(x, {0, 0, numHeads, -1});
    } else {
      headSize = dim(x, 3);
      if (numHeads > 0 && dim(x, 1) >= 0 && dim(x, 1) != numHeads)
        return error("attribute 'num_heads' = " + std::to_string(numHeads) +
                     " differs from dim 1 of input 'X' (" + std::to_string(dim(x, 1)) + ")");
      x4 = transpose(x, {0, 2, 1, 3});
    }
    // rd < 0: every feature of a head whose size is not declared.
    int64_t rd = at.i("rotary_embedding_dim", 0);
    if (rd != 0 && headSize < 0)
      return error("attribute 'rotary_embedding_dim' needs the head size of input 'X' ('" + x +
                   "'), which is not declared (give it a type in value_info)");
    if (rd == 0)
      rd = headSize;
    if ((headSize >= 0 && rd < 0) || rd > headSize || (rd > 0 && rd % 2))
      return error("attribute 'rotary_embedding_dim' = " + std::to_string(rd) +
                   " must be even and at most the head size " + std::to_string(headSize));
    const int64_t half = rd / 2, end = rd < 0 ? std::numeric_limits<int64_t>::max() : rd;
    for (const std::string &c : {cosCache, sinCache})
      if (int64_t last = rank(c) ? dim(c, *rank(c) - 1) : -1; rd >= 0 && last >= 0 && last != half)
        return error("the last dim of cache '" + c + "' is " + std::to_string(last) +
                     ", expected rotary_embedding_dim / 2 = " + std::to_string(half));
    if (int et = positions.empty() ? 0 : elem(positions); et && et != onnx::TensorProto::INT64)
      return error("input 'position_ids' ('" + positions + "') has type " + elemTypeName(et) +
                   "; int64 expected");
    std::string cosv = cosCache, sinv = sinCache;
    if (!positions.empty()) { // (max_pos, half)[position_ids] -> (B, S, half)
      // position_ids must lie in [0, max_pos): a negative one, which Gather would count from the
      // end, is moved below -max_pos, so that Gather refuses it at run time as out of range.
      std::string maxPos = op("CastLike", {shapeSlice(cosCache, 0, 1), positions});
      std::string pos = op(
          "Where", {op("Less", {positions, op("CastLike", {ints({0}, "zero", true), positions})}),
                    op("Sub", {positions, maxPos}), positions});
      cosv = op("Gather", {cosCache, pos});
      sinv = op("Gather", {sinCache, pos});
    }
    cosv = unsqueeze(cosv, 2); // (B, S, 1, half)
    sinv = unsqueeze(sinv, 2);
    const bool interleaved = at.i("interleaved", 0) != 0;
    std::string xr = rd < headSize ? slice(x4, 0, rd, 3) : x4;
    std::string x1, x2;
    if (interleaved) {
      x1 = slice(xr, 0, end, 3, 2);
      x2 = slice(xr, 1, end, 3, 2);
    } else {
      onnx::NodeProto &sp = emit("Split", {xr});
      sp.add_output(fresh("Split_out"));
      setInt(sp, "axis", 3);
      setInt(sp, "num_outputs", 2);
      x1 = sp.output(0);
      x2 = sp.output(1);
    }
    std::string real = op("Sub", {op("Mul", {cosv, x1}), op("Mul", {sinv, x2})});
    std::string imag = op("Add", {op("Mul", {sinv, x1}), op("Mul", {cosv, x2})});
    std::string rotated;
    if (interleaved)
      rotated = reshape(concat({unsqueeze(real, 4), unsqueeze(imag, 4)}, 4), {0, 0, 0, -1});
    else
      rotated = concat({real, imag}, 3);
    if (rd < headSize)
      rotated = concat({rotated, slice(x4, rd, headSize, 3)}, 3);
    if (*r == 3)
      op("Reshape", {rotated, ints({0, 0, -1}, "shape")}, n.output(0));
    else
      transpose(rotated, {0, 2, 1, 3}, n.output(0));
    return Status::ok();
  }

  // --- Attention ------------------------------------------------------------------------------
  Status attention(const onnx::NodeProto &n) {
    Attrs at(n);
    DTC_RETURN_IF_ERROR(at.check(where_, {{"is_causal", onnx::AttributeProto::INT},
                                          {"kv_num_heads", onnx::AttributeProto::INT},
                                          {"q_num_heads", onnx::AttributeProto::INT},
                                          {"qk_matmul_output_mode", onnx::AttributeProto::INT},
                                          {"scale", onnx::AttributeProto::FLOAT},
                                          {"softcap", onnx::AttributeProto::FLOAT},
                                          {"softmax_precision", onnx::AttributeProto::INT}}));
    DTC_RETURN_IF_ERROR(needInputs(n, 3, 6));
    if (n.output_size() < 1 || n.output(0).empty())
      return error("output 'Y' is required");
    if (n.output_size() > 4)
      return error("has at most 4 outputs, got " + std::to_string(n.output_size()));
    const std::string q = n.input(0), k = n.input(1), v = n.input(2);
    const std::string mask = input(n, 3), pastK = input(n, 4), pastV = input(n, 5);
    const std::string presentK = output(n, 1), presentV = output(n, 2), qkOut = output(n, 3);
    if (pastK.empty() != pastV.empty())
      return error("inputs 'past_key' and 'past_value' must be given together");

    // Ranks: declared, else implied by the head-count attributes (3-D inputs need them; the
    // reference implementation rejects them with 4-D inputs).
    auto rq = rank(q), rk = rank(k), rv = rank(v);
    {
      std::optional<size_t> known = rq ? rq : rk ? rk : rv;
      if (!known)
        known = at.has("q_num_heads") || at.has("kv_num_heads") ? 3 : 4;
      for (auto *r : {&rq, &rk, &rv})
        if (!*r)
          *r = known;
    }
    if (*rq != *rk || *rq != *rv || (*rq != 3 && *rq != 4))
      return error("inputs Q, K, V must all be 3-D or all 4-D, got ranks " + std::to_string(*rq) +
                   ", " + std::to_string(*rk) + ", " + std::to_string(*rv));
    const bool threeD = *rq == 3;
    int64_t qHeads = at.i("q_num_heads", 0), kvHeads = at.i("kv_num_heads", 0);
    int64_t headSize = -1, vHeadSize = -1;
    std::string q4 = q, k4 = k, v4 = v;
    if (threeD) {
      if (qHeads <= 0 || kvHeads <= 0)
        return error(std::string("attribute '") + (qHeads <= 0 ? "q_num_heads" : "kv_num_heads") +
                     "' must be given (> 0) for 3-D inputs Q, K, V");
      auto split = [&](const std::string &x, int64_t heads, int64_t &size,
                       const char *what) -> Status {
        if (int64_t hidden = dim(x, 2); hidden >= 0) {
          if (hidden % heads)
            return error(std::string("the hidden size ") + std::to_string(hidden) + " of input '" +
                         what + "' is not a multiple of its head count " + std::to_string(heads));
          size = hidden / heads;
        }
        return Status::ok();
      };
      int64_t kHeadSize = -1;
      DTC_RETURN_IF_ERROR(split(q, qHeads, headSize, "Q"));
      DTC_RETURN_IF_ERROR(split(k, kvHeads, kHeadSize, "K"));
      DTC_RETURN_IF_ERROR(split(v, kvHeads, vHeadSize, "V"));
      if (headSize < 0)
        headSize = kHeadSize;
      q4 = transpose(reshape(q, {0, 0, qHeads, -1}), {0, 2, 1, 3});
      k4 = transpose(reshape(k, {0, 0, kvHeads, -1}), {0, 2, 1, 3});
      v4 = transpose(reshape(v, {0, 0, kvHeads, -1}), {0, 2, 1, 3});
    } else {
      auto heads = [&](const char *attr, int64_t &h, const std::string &x) -> Status {
        int64_t d = dim(x, 1);
        if (h > 0 && d >= 0 && h != d)
          return error(std::string("attribute '") + attr + "' = " + std::to_string(h) +
                       " differs from dim 1 of input '" + x + "' (" + std::to_string(d) + ")");
        if (h <= 0)
          h = d;
        return Status::ok();
      };
      DTC_RETURN_IF_ERROR(heads("q_num_heads", qHeads, q));
      DTC_RETURN_IF_ERROR(heads("kv_num_heads", kvHeads, k));
      headSize = dim(q, 3) >= 0 ? dim(q, 3) : dim(k, 3);
      vHeadSize = dim(v, 3);
    }

    // Past and present keys and values: (B, kv_heads, past + S_kv, H).
    std::string kAll = k4, vAll = v4;
    if (!pastK.empty()) {
      kAll = concat({pastK, k4}, 2, presentK);
      vAll = concat({pastV, v4}, 2, presentV);
    } else {
      if (!presentK.empty())
        op("Identity", {k4}, presentK);
      if (!presentV.empty())
        op("Identity", {v4}, presentV);
    }

    // Grouped-query attention: each K/V head serves qHeads / kvHeads consecutive Q heads. With
    // static head counts and sizes the repeat uses constant shapes; otherwise the shapes are
    // computed from Shape(Q) and Shape(K) (canonicalize folds them once shapes are known).
    std::string kRep = kAll, vRep = vAll;
    if (qHeads > 0 && kvHeads > 0 && qHeads != kvHeads && qHeads % kvHeads)
      return error("q_num_heads = " + std::to_string(qHeads) +
                   " is not a multiple of kv_num_heads = " + std::to_string(kvHeads));
    if (qHeads > 0 && kvHeads > 0 && qHeads != kvHeads && headSize > 0 && vHeadSize > 0) {
      const int64_t group = qHeads / kvHeads;
      auto repeat = [&](const std::string &x, int64_t size) {
        std::string e = op("Expand", {unsqueeze(x, 2), ints({1, 1, group, 1, 1}, "group")});
        return reshape(e, {0, qHeads, -1, size});
      };
      kRep = repeat(kAll, headSize);
      vRep = repeat(vAll, vHeadSize);
    } else if (qHeads <= 0 || kvHeads <= 0 || qHeads != kvHeads) {
      std::string qh = shapeSlice(q4, 1, 2), kvh = shapeSlice(kAll, 1, 2);
      std::string group =
          concat({ints({1, 1}, "ones"), op("Div", {qh, kvh}), ints({1, 1}, "ones")}, 0);
      auto repeat = [&](const std::string &x) {
        std::string e = op("Expand", {unsqueeze(x, 2), group});
        std::string target = concat({ints({0}, "batch"), qh, shapeSlice(x, 2, 4)}, 0);
        return op("Reshape", {e, target});
      };
      kRep = repeat(kAll);
      vRep = repeat(vAll);
    }

    // Scores: (Q sqrt(s)) (K sqrt(s))^T.
    double scale;
    if (at.has("scale")) {
      scale = at.f("scale", 0.f);
      if (!(scale > 0))
        return error("attribute 'scale' = " + std::to_string(scale) + " must be positive");
    } else {
      scale = headSize > 0 ? 1.0 / std::sqrt(static_cast<double>(headSize)) : 0.0;
    }
    elem_[q4] = elem(q);
    std::string root;
    if (scale > 0) {
      root = scalarLike(std::sqrt(scale), q4, "sqrt_scale");
    } else { // head size not declared: sqrt(1/sqrt(H)) = H^-0.25 from Shape(Q)
      onnx::NodeProto &c = emit("Cast", {shapeSlice(q4, 3, 4)});
      setInt(c, "to", onnx::TensorProto::FLOAT);
      std::string h = c.output(0);
      elem_[h] = onnx::TensorProto::FLOAT;
      root = op("Pow", {h, scalarLike(-0.25, h, "minus_quarter")});
      if (elem(q) != onnx::TensorProto::FLOAT)
        root = op("CastLike", {root, q4});
    }
    std::string qs = op("Mul", {q4, root});
    std::string ks = op("Mul", {kRep, root});
    std::string scores = op("MatMul", {qs, transpose(ks, {0, 1, 3, 2})});
    elem_[scores] = elem(q);

    const int64_t mode = at.i("qk_matmul_output_mode", 0);
    if (mode < 0 || mode > 3)
      return error("attribute 'qk_matmul_output_mode' = " + std::to_string(mode) +
                   " is not 0, 1, 2 or 3");
    auto tap = [&](int64_t m, const std::string &x) {
      if (!qkOut.empty() && mode == m)
        op("Identity", {x}, qkOut);
    };
    tap(0, scores);
    const float softcap = at.f("softcap", 0.f);
    if (softcap < 0)
      return error("attribute 'softcap' = " + std::to_string(softcap) + " must be >= 0");
    if (softcap > 0) {
      std::string c = scalarLike(softcap, scores, "softcap");
      scores = op("Mul", {op("Tanh", {op("Div", {scores, c})}), c});
      elem_[scores] = elem(q);
    }
    tap(1, scores);

    // Biases: the mask (bool: 0 / -inf; float: added as is; a mask shorter than the keys is
    // padded with -inf, as the reference implementation does), then the causal frontier.
    const double inf = std::numeric_limits<double>::infinity();
    if (!mask.empty()) {
      int et = elem(mask);
      std::string bias;
      if (et == onnx::TensorProto::BOOL) {
        bias = op("Where",
                  {mask, scalarLike(0.0, scores, "zero"), scalarLike(-inf, scores, "minus_inf")});
      } else if (isFloatElem(et)) {
        bias = mask;
      } else {
        return error(std::string("input 'attn_mask' ('") + mask + "') has type " +
                     (et == 0 ? std::string("that is not declared") : elemTypeName(et)) +
                     "; dtc takes a bool mask or a float mask of Q's type");
      }
      const int64_t kvLen = dim(k, threeD ? 1 : 2);
      const int64_t pastLen = pastK.empty() ? 0 : dim(pastK, 2);
      auto maskRank = rank(mask);
      if (maskRank && *maskRank > 0 && kvLen >= 0 && pastLen >= 0) {
        const int64_t last = dim(mask, *maskRank - 1);
        if (last > 1 && last < kvLen + pastLen) {
          std::vector<int64_t> pads(2 * *maskRank, 0);
          pads.back() = kvLen + pastLen - last;
          bias = op("Pad", {bias, ints(pads, "mask_pads"), scalarLike(-inf, scores, "pad")});
        }
      }
      scores = op("Add", {scores, bias});
      elem_[scores] = elem(q);
    }
    const int64_t causal = at.i("is_causal", 0);
    if (causal != 0 && causal != 1)
      return error("attribute 'is_causal' = " + std::to_string(causal) + " is not 0 or 1");
    if (causal) {
      // -inf where key j > query i + past, i.e. Trilu(upper, k = past + 1) of a -inf matrix.
      std::string size = concat({shapeSlice(q4, 2, 3), shapeSlice(kAll, 2, 3)}, 0);
      onnx::TensorProto fill;
      fill.set_data_type(onnx::TensorProto::FLOAT);
      fill.add_dims(1);
      fill.add_float_data(-std::numeric_limits<float>::infinity());
      onnx::NodeProto &full = emit("ConstantOfShape", {size});
      onnx::AttributeProto *a = full.add_attribute();
      a->set_name("value");
      a->set_type(onnx::AttributeProto::TENSOR);
      *a->mutable_t() = std::move(fill);
      std::string minf = full.output(0);
      if (elem(q) != onnx::TensorProto::FLOAT)
        minf = op("CastLike", {minf, scores});
      std::string diag;
      if (pastK.empty())
        diag = ints({1}, "diagonal", true);
      else if (int64_t past = dim(pastK, 2); past >= 0)
        diag = ints({past + 1}, "diagonal", true);
      else
        diag = op("Squeeze", {op("Add", {shapeSlice(pastK, 2, 3), ints({1}, "one")})});
      onnx::NodeProto &tri = emit("Trilu", {minf, diag});
      setInt(tri, "upper", 1);
      scores = op("Add", {scores, tri.output(0)});
      elem_[scores] = elem(q);
    }
    tap(2, scores);

    // Softmax (in softmax_precision when given), with masked-out rows giving zeros.
    std::string probs = scores;
    const int64_t precision = at.i("softmax_precision", 0);
    const bool castSoftmax = at.has("softmax_precision") && precision != elem(q);
    if (at.has("softmax_precision") && !isFloatElem(static_cast<int>(precision)))
      return error("attribute 'softmax_precision' = " + std::to_string(precision) +
                   " is not a floating-point type (1 float, 10 float16, 11 double, 16 bfloat16)");
    if (castSoftmax) {
      onnx::NodeProto &c = emit("Cast", {probs});
      setInt(c, "to", precision);
      probs = c.output(0);
    }
    onnx::NodeProto &sm = emit("Softmax", {probs});
    setInt(sm, "axis", -1);
    probs = sm.output(0);
    if (castSoftmax)
      probs = op("CastLike", {probs, scores});
    elem_[probs] = elem(q);
    if (!mask.empty()) // only a mask can rule out every key of a query (causal keeps key 0)
      probs = op("Where", {op("IsNaN", {probs}), scalarLike(0.0, probs, "zero"), probs});
    tap(3, probs);

    std::string y = op("MatMul", {probs, vRep}, threeD ? "" : n.output(0));
    if (threeD)
      op("Reshape", {transpose(y, {0, 2, 1, 3}), ints({0, 0, -1}, "shape")}, n.output(0));
    return Status::ok();
  }

  onnx::GraphProto &g_;
  int64_t opset_;
  std::set<std::string> names_;
  std::map<std::string, std::vector<int64_t>> dims_;
  std::map<std::string, int> elem_;
  std::string where_, base_;
  std::deque<onnx::NodeProto> *out_ = nullptr;
};

} // namespace

Status expandFunctionOps(onnx::GraphProto &graph, int64_t opset) {
  return Expander(graph, opset).run();
}

} // namespace dtc::onnxio
