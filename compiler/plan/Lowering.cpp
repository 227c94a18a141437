// IR -> plan: dim binding, kernel checks, storage groups (views, in-place), live ranges, the
// memory plan and the emitted rank program (see Lowering.h).
#include "compiler/plan/Lowering.h"

#include "compiler/plan/MemoryPlanner.h"
#include "ops/cpu/Kernel.h"
#include "passes/Passes.h"

#include <algorithm>
#include <filesystem>
#include <unordered_map>

namespace dtc::plan {

namespace {

/// The size of `d` with every symbol replaced; nullopt when a symbol is unbound or on overflow.
std::optional<int64_t> evaluateDim(const ir::Dim &d, const std::map<std::string, int64_t> &dims) {
  if (d.isUnknown())
    return std::nullopt;
  int64_t v = d.coefficient();
  for (const std::string &s : d.symbols()) {
    auto it = dims.find(s);
    if (it == dims.end() || __builtin_mul_overflow(v, it->second, &v))
      return std::nullopt;
  }
  return v;
}

void substituteType(ir::TensorType &t, const std::map<std::string, int64_t> &dims) {
  if (!t.shape.hasRank())
    return;
  for (ir::Dim &d : t.shape.dims())
    if (d.isSymbolic())
      if (std::optional<int64_t> v = evaluateDim(d, dims))
        d = ir::Dim::fixed(*v);
}

} // namespace

Status bindDims(ir::Graph &graph, LowerOptions &opts, Diagnostics &diags) {
  std::map<std::string, int64_t> &dims = opts.dims;
  for (const auto &[name, size] : dims)
    if (size < 1)
      return Status::error("--dim " + name, "size must be at least 1, got " + std::to_string(size));
  if (opts.batchSize && *opts.batchSize < 1)
    return Status::error("--batch-size", "must be at least 1, got " + std::to_string(*opts.batchSize));
  for (ir::Value *in : graph.inputs()) {
    const ir::Shape &s = in->shape();
    if (!s.hasRank() || s.rank() == 0 || !opts.batchSize)
      continue;
    const ir::Dim &lead = s[0];
    if (lead.isSymbolic() && lead.coefficient() == 1 && lead.symbols().size() == 1 &&
        !dims.count(lead.symbols()[0]))
      dims[lead.symbols()[0]] = *opts.batchSize;
  }
  for (ir::Value *in : graph.inputs()) {
    const ir::Shape &s = in->shape();
    if (!s.hasRank())
      return Status::error("input '" + in->name() + "'",
                           "rank unknown; the plan needs static shapes (declare the input's shape "
                           "in the model)");
    for (const ir::Dim &d : s.dims()) {
      if (d.isUnknown())
        return Status::error("input '" + in->name() + "'",
                             "shape " + s.str() + " has an unknown dim; the plan needs static shapes");
      for (const std::string &sym : d.symbols())
        if (!dims.count(sym))
          return Status::error("input '" + in->name() + "'",
                               "shape " + s.str() + " has the symbolic dim '" + sym +
                                   "'; bind it with --batch-size B or --dim " + sym + "=SIZE");
      if (!evaluateDim(d, dims))
        return Status::error("input '" + in->name() + "'",
                             "dim " + d.str() + " overflows int64 with the bound sizes");
    }
  }
  for (ir::Value *v : graph.values())
    substituteType(v->type(), dims);
  passes::PassContext ctx;
  Status s = passes::createCanonicalizePass()->run(graph, ctx);
  for (const Diagnostic &d : ctx.diags.items())
    if (d.severity == Severity::kWarning)
      diags.warning("", d.message);
  return s;
}

namespace {

Expected<Attr> toPlanAttr(const std::string &name, const ir::Attribute &a) {
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

ops::cpu::TensorDesc descOf(const ir::Value *v) {
  ops::cpu::TensorDesc d;
  if (!v)
    return d;
  d.dtype = v->dtype();
  d.shape = v->shape().staticSizes();
  return d;
}

/// Storage: bytes shared by one or more values (a value, its views, in-place results).
struct Storage {
  uint64_t size = 0;
  int64_t first = -1;
  int64_t last = -1;
  bool persistent = false; ///< parameter or constant: never written, live for the whole run
  bool external = false;   ///< graph input or output: the caller reads or writes it
};

} // namespace

Expected<Plan> lowerInference(const ir::Graph &graph, const LowerOptions &opts) {
  // Every value the program touches must have a known dtype and a static shape.
  auto checkStatic = [](const ir::Value *v, const std::string &where) -> Status {
    if (v->dtype() == ir::DType::kUndefined || !v->shape().isStatic())
      return Status::error(where, "value '" + v->name() + "' has type " + v->type().str() +
                                      "; the plan needs a known dtype and static shape (bind "
                                      "symbolic dims with --batch-size or --dim)");
    if (!v->shape().numElements())
      return Status::error(where, "value '" + v->name() + "' has too many elements");
    return Status::ok();
  };

  std::vector<ir::Node *> order = graph.nodes(); // already topologically sorted
  const int64_t numInstr = static_cast<int64_t>(order.size());

  // Buffers: one per value, in a deterministic order (inputs, parameters, constants, then node
  // outputs in schedule order).
  std::vector<const ir::Value *> bufferValues;
  std::unordered_map<const ir::Value *, int> bufferOf;
  auto addBuffer = [&](const ir::Value *v) {
    if (bufferOf.count(v))
      return;
    bufferOf[v] = static_cast<int>(bufferValues.size());
    bufferValues.push_back(v);
  };
  for (const ir::Value *v : graph.inputs())
    if (!v->isInitializer())
      addBuffer(v);
  for (const ir::Value *v : graph.initializers())
    if (v->isParameter() && (v->hasUses() || v->isGraphOutput()))
      addBuffer(v);
  for (const ir::Value *v : graph.initializers())
    if (v->isConstant() && (v->hasUses() || v->isGraphOutput()))
      addBuffer(v);
  for (const ir::Node *n : order)
    for (const ir::Value *v : n->outputs())
      if (v)
        addBuffer(v);
  for (const ir::Value *v : bufferValues)
    DTC_RETURN_IF_ERROR(checkStatic(v, v->producer() ? v->producer()->where()
                                                     : "value '" + v->name() + "'"));

  // Live ranges of each value: defined at its producer's index (-1 for inputs and weights),
  // last read by its last consumer; graph outputs live to the end.
  std::vector<int64_t> lastUse(bufferValues.size(), -1);
  std::unordered_map<const ir::Node *, int64_t> indexOf;
  for (int64_t i = 0; i < numInstr; ++i)
    indexOf[order[i]] = i;
  for (size_t b = 0; b < bufferValues.size(); ++b) {
    const ir::Value *v = bufferValues[b];
    for (const ir::Use &u : v->uses())
      lastUse[b] = std::max(lastUse[b], indexOf.at(u.node));
    if (v->isGraphOutput())
      lastUse[b] = MemoryRequest::kForever;
  }

  // Storage groups. Views alias their input; an in-place result reuses a dead input's bytes.
  std::vector<int> storageOf(bufferValues.size(), -1);
  std::vector<Storage> storages;
  auto newStorage = [&](size_t b, int64_t first) {
    const ir::Value *v = bufferValues[b];
    Storage s;
    s.size = static_cast<uint64_t>(*v->shape().numElements() * ir::dtypeSize(v->dtype()));
    s.first = first;
    s.last = std::max(first, lastUse[b]);
    s.persistent = v->isInitializer();
    s.external = v->isGraphInput() || v->isGraphOutput();
    // Weights are never written; graph inputs stay intact so that a plan can run again on the
    // same inputs (benchmarks, --repeat).
    if (s.persistent || v->isGraphInput())
      s.last = MemoryRequest::kForever;
    storageOf[b] = static_cast<int>(storages.size());
    storages.push_back(s);
  };
  for (size_t b = 0; b < bufferValues.size(); ++b)
    if (!bufferValues[b]->producer())
      newStorage(b, -1);

  Plan plan;
  plan.set_format_version(kPlanFormatVersion);
  plan.set_producer(opts.producer);
  plan.set_mode(MODE_INFERENCE);
  plan.set_world_size(1);
  for (const auto &[sym, size] : opts.dims)
    (*plan.mutable_bound_dims())[sym] = size;
  RankProgram *rp = plan.add_ranks();
  rp->set_rank(0);
  rp->mutable_device()->set_type(DEVICE_CPU);
  rp->set_alignment(kCpuAlignment);

  for (int64_t i = 0; i < numInstr; ++i) {
    const ir::Node *n = order[i];
    ops::cpu::KernelSpec spec;
    spec.op = n->opType();
    spec.domain = n->domain();
    spec.node = n->name();
    for (const ir::Value *v : n->inputs())
      spec.inputs.push_back(descOf(v));
    for (const ir::Value *v : n->outputs())
      spec.outputs.push_back(descOf(v));
    spec.attrs = n->attributes();
    DTC_RETURN_IF_ERROR(ops::cpu::checkKernel(spec));

    KernelCall *call = rp->add_instructions()->mutable_kernel();
    call->set_op(n->opType());
    call->set_domain(n->domain());
    call->set_node(n->name());
    for (const ir::Value *v : n->inputs())
      call->add_inputs(v ? bufferOf.at(v) : -1);
    for (const ir::Value *v : n->outputs())
      call->add_outputs(v ? bufferOf.at(v) : -1);
    for (const auto &[name, a] : n->attributes()) {
      DTC_ASSIGN_OR_RETURN(Attr pa, toPlanAttr(name, a));
      *call->add_attributes() = std::move(pa);
    }

    // Output 0 joins input 0's storage for a view, or input k's for an in-place result when
    // that storage is an activation nobody reads after this instruction.
    const ir::Value *out0 = n->numOutputs() > 0 ? n->output(0) : nullptr;
    int share = -1;
    if (opts.reuseMemory && out0) {
      if (ops::cpu::isViewOp(n->domain(), n->opType()) && n->input(0)) {
        share = storageOf[bufferOf.at(n->input(0))];
      } else if (int k = ops::cpu::inPlaceInput(spec); k >= 0 && n->input(k)) {
        const ir::Value *in = n->input(k);
        int s = storageOf[bufferOf.at(in)];
        const Storage &st = storages[s];
        if (!st.persistent && !st.external && st.last == i && in->dtype() == out0->dtype() &&
            st.size == static_cast<uint64_t>(*out0->shape().numElements() *
                                              ir::dtypeSize(out0->dtype())))
          share = s;
      }
    }
    for (size_t o = 0; o < n->numOutputs(); ++o) {
      const ir::Value *v = n->output(o);
      if (!v)
        continue;
      size_t b = bufferOf.at(v);
      if (o == 0 && share >= 0) {
        storageOf[b] = share;
        Storage &st = storages[share];
        st.last = std::max(st.last, lastUse[b]);
        st.external = st.external || v->isGraphOutput();
      } else {
        newStorage(b, i);
      }
    }
  }

  std::vector<MemoryRequest> requests;
  for (const Storage &s : storages)
    requests.push_back(opts.reuseMemory ? MemoryRequest{s.size, s.first, s.last}
                                        : MemoryRequest{s.size, -1, MemoryRequest::kForever});
  MemoryPlan mp = planMemory(requests, kCpuAlignment);
  rp->set_arena_bytes(mp.arenaBytes);
  // Without reuse every value (views and in-place results included) has its own bytes.
  uint64_t noReuse = 0;
  for (const ir::Value *v : bufferValues)
    noReuse += (static_cast<uint64_t>(*v->shape().numElements() * ir::dtypeSize(v->dtype())) +
                kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
  rp->set_no_reuse_bytes(noReuse);

  for (size_t b = 0; b < bufferValues.size(); ++b) {
    const ir::Value *v = bufferValues[b];
    Buffer *buf = rp->add_buffers();
    buf->set_name(v->name());
    buf->set_dtype(static_cast<int32_t>(v->dtype()));
    for (int64_t d : v->shape().staticSizes())
      buf->add_shape(d);
    buf->set_offset(mp.offsets[storageOf[b]]);
    buf->set_size_bytes(static_cast<uint64_t>(*v->shape().numElements() *
                                              ir::dtypeSize(v->dtype())));
    if (v->isParameter()) {
      buf->set_kind(BUFFER_PARAMETER);
      buf->set_source(v->name());
    } else if (v->isConstant()) {
      buf->set_kind(BUFFER_CONSTANT);
      DTC_ASSIGN_OR_RETURN(const std::string *bytes, v->initializer()->bytes());
      buf->set_data(*bytes);
    } else if (v->isGraphInput()) {
      buf->set_kind(BUFFER_INPUT);
    } else if (v->isGraphOutput()) {
      buf->set_kind(BUFFER_OUTPUT);
    } else {
      buf->set_kind(BUFFER_ACTIVATION);
    }
  }
  for (const ir::Value *v : graph.inputs())
    if (!v->isInitializer()) {
      Binding *bd = rp->add_inputs();
      bd->set_name(v->name());
      bd->set_buffer(bufferOf.at(v));
    }
  std::vector<std::string> seenOutputs;
  for (const ir::Value *v : graph.outputs()) {
    if (std::find(seenOutputs.begin(), seenOutputs.end(), v->name()) != seenOutputs.end())
      continue;
    seenOutputs.push_back(v->name());
    if (!bufferOf.count(v))
      return Status::error("output '" + v->name() + "'", "is not computed by the graph");
    Binding *bd = rp->add_outputs();
    bd->set_name(v->name());
    bd->set_buffer(bufferOf.at(v));
  }

  ModelRef *model = plan.mutable_model();
  model->set_path(opts.modelPath);
  if (!opts.modelFile.empty()) {
    DTC_ASSIGN_OR_RETURN(std::string sha, sha256File(opts.modelFile));
    model->set_sha256(sha);
    std::error_code ec;
    model->set_size_bytes(std::filesystem::file_size(opts.modelFile, ec));
  }
  return plan;
}

} // namespace dtc::plan
