// The first half of lowering (used by Lowering.cpp only): the instructions of one rank program
// in schedule order, each checked against the plan's target (ops/kernel/Target.h) — kernel
// calls with Conv+Relu / Conv+Add(+Relu) fused where the target has FusedConv, layouts assigned
// with Reorder instructions at layout boundaries, collectives and their waits — and the buffers
// they read and write. Lowering.cpp then groups the buffers into storages and plans the memory.
#pragma once

#include "compiler/ir/Graph.h"
#include "compiler/plan/Lowering.h"
#include "compiler/plan/LoweringInternal.h"
#include "ops/comm/Collective.h"
#include "ops/kernel/Target.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace dtc::plan::detail::builder {

inline Expected<Attr> toPlanAttr(const std::string &name, const ir::Attribute &a) {
  Attr out;
  out.set_name(name);
  switch (a.kind()) {
  case ir::AttrKind::kInt:
    out.set_i(a.i());
    break;
  case ir::AttrKind::kFloat:
    out.set_f(a.f());
    break;
  case ir::AttrKind::kString:
    out.set_s(a.s());
    break;
  case ir::AttrKind::kInts:
    for (int64_t v : a.ints())
      out.mutable_ints()->add_values(v);
    break;
  case ir::AttrKind::kFloats:
    for (float v : a.floats())
      out.mutable_floats()->add_values(v);
    break;
  case ir::AttrKind::kStrings:
    for (const std::string &v : a.strings())
      out.mutable_strings()->add_values(v);
    break;
  case ir::AttrKind::kTensor: {
    const ir::TensorData &t = *a.t();
    TensorValue *tv = out.mutable_t();
    tv->set_dtype(static_cast<int32_t>(t.dtype()));
    for (int64_t d : t.dims())
      tv->add_shape(d);
    DTC_ASSIGN_OR_RETURN(const std::string *bytes, t.bytes());
    tv->set_data(*bytes);
    break;
  }
  }
  return out;
}

using CpuLayout = ops::Layout;

/// A buffer of the program being built: an IR value, or a value converted to another layout.
struct LBuffer {
  const ir::Value *value = nullptr; ///< the IR value it holds (for a converted copy: its source)
  std::string name;
  ir::DType dtype = ir::DType::kUndefined;
  std::vector<int64_t> shape;
  CpuLayout layout = CpuLayout::kRowMajor;
  uint64_t bytes = 0;
  /// Shares the bytes of buffer `aliasOf` (a layout change that does not move any byte).
  int aliasOf = -1;
};

/// One instruction of the program being built.
struct LInstr {
  ops::KernelSpec spec;
  std::vector<int> inputs;  ///< buffer ids, -1 for an omitted optional input
  std::vector<int> outputs; ///< buffer ids
  /// A Copy instruction (inputs[0] -> outputs[0]) instead of a kernel call: a state update whose
  /// new value could not be computed in the state's own bytes.
  bool isCopy = false;
  /// A Collective instruction (ai.dtc.AllReduce: inputs[i] reduced into outputs[i]), launched
  /// asynchronously; `collective` numbers it. A Wait for collective number `collective` lists
  /// that collective's inputs and outputs as its inputs, so that liveness keeps them intact
  /// until the wait (emitted without operands).
  bool isCollective = false;
  bool isWait = false;
  int collective = -1;
  /// The IR node it comes from (nullptr for Reorder and Copy).
  const ir::Node *node = nullptr;
};

/// True when a channels-last tensor of `shape` has the bytes of the row-major one: every
/// spatial dim is 1, or there is one channel.
inline bool layoutIsTrivial(const std::vector<int64_t> &shape) {
  if (shape.size() < 3 || shape[1] == 1)
    return true;
  for (size_t i = 2; i < shape.size(); ++i)
    if (shape[i] != 1)
      return false;
  return true;
}

/// Builds the program: buffers and instructions in schedule order, with Conv+Relu and
/// Conv+Add(+Relu) fused, layouts assigned and Reorder instructions at layout boundaries.
class ProgramBuilder {
public:
  ProgramBuilder(const ir::Graph &graph, const LowerOptions &opts)
      : graph_(graph), opts_(opts), target_(ops::targetFor(opts.device)) {}

  Status build() {
    for (const ir::Value *v : graph_.inputs())
      if (!v->isInitializer())
        valueBuffer(v);
    for (const ir::Value *v : graph_.initializers())
      if (v->isParameter() && (v->hasUses() || v->isGraphOutput()))
        valueBuffer(v);
    for (const ir::Value *v : graph_.initializers())
      if (v->isConstant() && (v->hasUses() || v->isGraphOutput()))
        valueBuffer(v);

    std::vector<ir::Node *> order = graph_.nodes();
    // Fusion: a Conv whose only consumer is a Relu, or an Add (whose only consumer may be a
    // Relu), runs as one FusedConv at the position of the last node of the group (so that the
    // Add's other operand is computed by then).
    std::unordered_map<const ir::Node *, const ir::Node *> fusedInto; // Conv -> last node
    std::unordered_map<const ir::Node *, const ir::Node *> groupOf;   // last node -> Conv
    if (opts_.fuse && target_.hasKernel("ai.dtc", "FusedConv"))
      for (const ir::Node *n : order)
        if (const ir::Node *last = fusionGroupEnd(n); last && !groupOf.count(last)) {
          // Two Convs may feed one Add (a residual with a projection): the first one fuses.
          fusedInto[n] = last;
          groupOf[last] = n;
        }
    std::unordered_map<const ir::Node *, bool> skipped;
    for (const auto &[conv, last] : fusedInto) {
      skipped[conv] = true;
      const ir::Node *cur = conv->output(0)->uses()[0].node;
      while (cur != last) {
        skipped[cur] = true;
        cur = cur->output(0)->uses()[0].node;
      }
    }
    for (const ir::Node *n : order) {
      if (skipped.count(n))
        continue;
      auto g = groupOf.find(n);
      DTC_RETURN_IF_ERROR(g != groupOf.end() ? emitFused(g->second, n) : emitNode(n));
    }
    return Status::ok();
  }

  std::vector<LBuffer> buffers;
  std::vector<LInstr> instrs;
  std::unordered_map<const ir::Value *, int> bufferOfValue;
  int numCollectives = 0;

private:
  int valueBuffer(const ir::Value *v) {
    auto it = bufferOfValue.find(v);
    if (it != bufferOfValue.end())
      return it->second;
    LBuffer b;
    b.value = v;
    b.name = v->name();
    b.dtype = v->dtype();
    b.shape = v->shape().staticSizes();
    b.bytes = static_cast<uint64_t>(*v->shape().numElements() * ir::dtypeSize(v->dtype()));
    buffers.push_back(b);
    bufferOfValue[v] = static_cast<int>(buffers.size()) - 1;
    return static_cast<int>(buffers.size()) - 1;
  }

  /// The buffer holding buffer `b`'s value in `layout`: `b` itself, a free alias when the two
  /// layouts have the same bytes, or the output of a Reorder instruction (made once).
  int inLayout(int b, CpuLayout layout) {
    if (buffers[b].layout == layout)
      return b;
    auto key = std::make_pair(b, layout);
    auto it = converted_.find(key);
    if (it != converted_.end())
      return it->second;
    LBuffer c = buffers[b];
    c.layout = layout;
    c.name =
        buffers[b].name + (layout == CpuLayout::kChannelsLast ? ".channels_last" : ".row_major");
    c.aliasOf = -1;
    const bool trivial = layoutIsTrivial(c.shape);
    if (trivial)
      c.aliasOf = b;
    buffers.push_back(c);
    int id = static_cast<int>(buffers.size()) - 1;
    converted_[key] = id;
    if (!trivial) {
      LInstr r;
      r.spec.op = "Reorder";
      r.spec.domain = ir::kDtcDomain;
      r.spec.node = c.name;
      r.spec.inputs = {descOf(b)};
      r.spec.outputs = {descOf(id)};
      r.inputs = {b};
      r.outputs = {id};
      instrs.push_back(std::move(r));
    }
    return id;
  }

  ops::TensorDesc descOf(int b) const {
    ops::TensorDesc d;
    if (b < 0)
      return d;
    d.dtype = buffers[b].dtype;
    d.shape = buffers[b].shape;
    d.layout = buffers[b].layout;
    return d;
  }

  /// The last node of a fusable group starting at Conv `n`, or nullptr.
  const ir::Node *fusionGroupEnd(const ir::Node *n) const {
    if (n->opType() != "Conv" || !n->domain().empty() || n->numOutputs() != 1)
      return nullptr;
    auto soleConsumer = [](const ir::Value *v) -> const ir::Node * {
      if (!v || v->isGraphOutput() || v->uses().size() != 1)
        return nullptr;
      return v->uses()[0].node;
    };
    const ir::Node *next = soleConsumer(n->output(0));
    if (!next || !next->domain().empty())
      return nullptr;
    if (next->opType() == "Relu")
      return next;
    if (next->opType() != "Add" || next->numInputs() != 2 || next->input(0) == next->input(1))
      return nullptr;
    const ir::Value *z = next->input(0) == n->output(0) ? next->input(1) : next->input(0);
    if (!z || z->type() != n->output(0)->type() || next->output(0)->type() != z->type())
      return nullptr;
    const ir::Node *relu = soleConsumer(next->output(0));
    return relu && relu->opType() == "Relu" && relu->domain().empty() ? relu : next;
  }

  Status emitFused(const ir::Node *conv, const ir::Node *last) {
    LInstr in;
    in.spec.op = "FusedConv";
    in.spec.domain = ir::kDtcDomain;
    in.spec.node = conv->name();
    in.spec.attrs = conv->attributes();
    std::string activation;
    const ir::Value *z = nullptr;
    const ir::Value *prev = conv->output(0);
    for (const ir::Node *cur = prev->uses()[0].node;; cur = cur->output(0)->uses()[0].node) {
      if (cur->opType() == "Relu")
        activation = "Relu";
      else
        z = cur->input(0) == prev ? cur->input(1) : cur->input(0);
      in.spec.node += "+" + cur->name();
      prev = cur->output(0);
      if (cur == last)
        break;
    }
    in.spec.attrs["activation"] = ir::Attribute(activation);
    std::vector<const ir::Value *> ins = {conv->input(0), conv->input(1), conv->input(2), z};
    std::vector<const ir::Value *> outs = {last->output(0)};
    Status s = emit(in, ins, outs, last);
    if (s.isOk())
      return s;
    // The fused kernel does not take this case: emit the group's nodes one by one.
    DTC_RETURN_IF_ERROR(emitNode(conv));
    for (const ir::Node *cur = conv->output(0)->uses()[0].node;;
         cur = cur->output(0)->uses()[0].node) {
      DTC_RETURN_IF_ERROR(emitNode(cur));
      if (cur == last)
        break;
    }
    return Status::ok();
  }

  Status emitNode(const ir::Node *n) {
    LInstr in;
    in.spec.op = n->opType();
    in.spec.domain = n->domain();
    in.spec.node = n->name();
    in.spec.attrs = n->attributes();
    in.node = n;
    if (ops::isCollectiveOp(n->domain(), n->opType())) {
      // No kernel: the runtime's communicator runs it. Operands stay row-major.
      in.isCollective = true;
      in.collective = numCollectives++;
      for (const ir::Value *v : n->inputs()) {
        const int b = bufferOfValue.at(v);
        in.inputs.push_back(
            buffers[b].layout == CpuLayout::kRowMajor ? b : inLayout(b, CpuLayout::kRowMajor));
      }
      for (const ir::Value *v : n->outputs()) {
        DTC_RETURN_IF_ERROR(checkStatic(v, n->where()));
        in.outputs.push_back(valueBuffer(v));
      }
      instrs.push_back(std::move(in));
      return Status::ok();
    }
    std::vector<const ir::Value *> ins(n->inputs().begin(), n->inputs().end());
    std::vector<const ir::Value *> outs(n->outputs().begin(), n->outputs().end());
    return emit(in, ins, outs, n);
  }

  /// Chooses layouts for one instruction and appends it (after any Reorder it needs). First
  /// choice: inputs as they are, outputs channels-last when the op prefers it or its first
  /// input is channels-last; fallback: everything row-major. The fallback's check error is the
  /// one reported (it names the node and what the kernel does not support).
  Status emit(LInstr in, const std::vector<const ir::Value *> &ins,
              const std::vector<const ir::Value *> &outs, const ir::Node *where) {
    std::vector<int> inBufs;
    for (const ir::Value *v : ins)
      inBufs.push_back(v ? bufferOfValue.at(v) : -1);
    // Drop trailing omitted inputs (the kernel treats them as absent).
    while (!inBufs.empty() && inBufs.back() < 0)
      inBufs.pop_back();
    for (const ir::Value *v : outs)
      if (v) {
        Status s = checkStatic(v, where->where());
        if (!s.isOk())
          return s;
      }

    auto trySpec = [&](const std::vector<CpuLayout> &inLayouts, CpuLayout outLayout) -> Status {
      in.spec.inputs.clear();
      for (size_t i = 0; i < inBufs.size(); ++i) {
        ops::TensorDesc d = descOf(inBufs[i]);
        if (inBufs[i] >= 0)
          d.layout = inLayouts[i];
        in.spec.inputs.push_back(d);
      }
      in.spec.outputs.clear();
      for (const ir::Value *v : outs) {
        ops::TensorDesc d;
        if (v) {
          d.dtype = v->dtype();
          d.shape = v->shape().staticSizes();
          d.layout = v->isGraphOutput() || d.shape.size() < 3 ? CpuLayout::kRowMajor : outLayout;
        }
        in.spec.outputs.push_back(d);
      }
      return target_.checkKernel(in.spec);
    };

    std::vector<CpuLayout> current;
    bool anyChannelsLast = false;
    for (int b : inBufs) {
      current.push_back(b >= 0 ? buffers[b].layout : CpuLayout::kRowMajor);
      anyChannelsLast =
          anyChannelsLast || (b >= 0 && buffers[b].layout == CpuLayout::kChannelsLast);
    }
    const bool firstIsChannelsLast =
        !inBufs.empty() && inBufs[0] >= 0 && buffers[inBufs[0]].layout == CpuLayout::kChannelsLast;
    CpuLayout preferred =
        opts_.channelsLast && (target_.prefersChannelsLast(in.spec.op) || firstIsChannelsLast)
            ? CpuLayout::kChannelsLast
            : CpuLayout::kRowMajor;
    Status s = trySpec(current, preferred);
    if (!s.isOk() && preferred == CpuLayout::kChannelsLast)
      s = trySpec(current, CpuLayout::kRowMajor);
    if (!s.isOk() && anyChannelsLast) {
      s = trySpec(std::vector<CpuLayout>(inBufs.size(), CpuLayout::kRowMajor),
                  CpuLayout::kRowMajor);
      if (s.isOk())
        for (int &b : inBufs)
          if (b >= 0)
            b = inLayout(b, CpuLayout::kRowMajor);
    }
    if (!s.isOk())
      return s;
    in.inputs = inBufs;
    for (size_t o = 0; o < outs.size(); ++o) {
      if (!outs[o]) {
        in.outputs.push_back(-1);
        continue;
      }
      int b = valueBuffer(outs[o]);
      buffers[b].layout = in.spec.outputs[o].layout;
      in.outputs.push_back(b);
    }
    instrs.push_back(std::move(in));
    return Status::ok();
  }

  static Status checkStatic(const ir::Value *v, const std::string &where) {
    if (v->dtype() == ir::DType::kUndefined || !v->shape().isStatic())
      return Status::error(where, "value '" + v->name() + "' has type " + v->type().str() +
                                      "; the plan needs a known dtype and static shape (bind "
                                      "symbolic dims with --batch-size or --dim)");
    if (!v->shape().numElements())
      return Status::error(where, "value '" + v->name() + "' has too many elements");
    return Status::ok();
  }

  const ir::Graph &graph_;
  const LowerOptions &opts_;
  const ops::Target &target_;
  std::map<std::pair<int, CpuLayout>, int> converted_;
};

} // namespace dtc::plan::detail::builder
