// IR -> plan: storage groups (views, in-place, gradient buckets), live ranges, the memory plan
// and the emitted rank program, over the instructions ProgramBuilder.h chose (see Lowering.h;
// dims are bound before, by passes/BindDims.cpp; one program per pipeline stage in
// PipelineLowering.cpp).
#include "compiler/plan/Lowering.h"

#include "compiler/plan/LoweringInternal.h"
#include "compiler/plan/ProgramBuilder.h"
#include "compiler/plan/MemoryPlanner.h"
#include "ops/comm/Collective.h"
#include "ops/kernel/Target.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <cstdint>
#include <cstdio>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace dtc::plan {

using namespace detail::builder;

namespace {

/// Storage: bytes shared by one or more buffers (a value, its views, in-place results, free
/// layout aliases).
struct Storage {
  /// Part of another storage (a gradient bucket's outputs lie back to back): `parent`'s index
  /// and the byte offset inside it; -1 for a storage of its own.
  int parent = -1;
  uint64_t subOffset = 0;
  uint64_t size = 0;
  int64_t first = -1;
  int64_t last = -1;
  bool persistent = false; ///< parameter or constant: never written, live for the whole run
  bool external = false;   ///< graph input or output: the caller reads or writes it
};

} // namespace

namespace detail {

Expected<Plan> lowerProgram(const ir::Graph &graph, const LowerOptions &optsIn,
                            const TrainingConfig *cfg, bool finish) {
  const ir::TrainingRoles *st = cfg ? &graph.training() : nullptr;
  LowerOptions opts = optsIn;
  const ops::Target &target = ops::targetFor(opts.device);
  const uint64_t alignment = target.alignment();
  if (st) {
    // Backward kernels take row-major operands, and autodiff reads the intermediate values that
    // fusion would hide.
    opts.fuse = false;
    opts.channelsLast = false;
  }
  for (const ir::Value *v : graph.inputs())
    if (v->dtype() == ir::DType::kUndefined || !v->shape().isStatic())
      return Status::error("input '" + v->name() + "'",
                           "has type " + v->type().str() +
                               "; the plan needs a known dtype and static shape");
  for (const ir::Value *v : graph.initializers())
    if (!v->shape().isStatic())
      return Status::error("initializer '" + v->name() + "'", "shape is not static");

  ProgramBuilder pb(graph, opts);
  DTC_RETURN_IF_ERROR(pb.build());
  std::vector<LBuffer> &buffers = pb.buffers;
  std::vector<LInstr> &instrs = pb.instrs;

  // Training: values that persist across steps, and state updates. A state takes its new value
  // right after the instruction producing it: in the state's own bytes when that instruction is
  // an optimizer update reading the state (its kernels are written for output == input), else
  // through a Copy placed right after it.
  std::unordered_map<const ir::Value *, int> stateKind; // value -> BufferKind
  std::unordered_map<int, int> inPlaceState;            // next buffer -> state buffer
  int optimizerBegin = -1;
  if (st) {
    for (const ir::Value *v : st->parameters)
      stateKind[v] = BUFFER_PARAMETER;
    for (const auto &states : st->optimizerState)
      for (const ir::Value *v : states)
        stateKind[v] = BUFFER_OPTIMIZER_STATE;
    for (const ir::StateUpdate &u : st->updates)
      if (!stateKind.count(u.state))
        stateKind[u.state] = BUFFER_PARAMETER;
    std::unordered_map<int, int64_t> producer;
    for (size_t i = 0; i < instrs.size(); ++i)
      for (int b : instrs[i].outputs)
        if (b >= 0)
          producer[b] = static_cast<int64_t>(i);
    std::vector<std::pair<int64_t, LInstr>> copies;
    for (const ir::StateUpdate &u : st->updates) {
      auto sb = pb.bufferOfValue.find(u.state);
      auto nb = pb.bufferOfValue.find(u.next);
      if (sb == pb.bufferOfValue.end() || nb == pb.bufferOfValue.end() ||
          !producer.count(nb->second))
        return Status::error("state '" + u.state->name() + "'",
                             "its new value '" + u.next->name() + "' is not computed");
      const int64_t at = producer.at(nb->second);
      const LBuffer &sbuf = buffers[sb->second], &nbuf = buffers[nb->second];
      if (sbuf.bytes != nbuf.bytes || sbuf.dtype != nbuf.dtype)
        return Status::error("state '" + u.state->name() + "'",
                             "its new value '" + u.next->name() + "' has another type");
      // Nothing after the producer may read the old value.
      for (size_t i = static_cast<size_t>(at) + 1; i < instrs.size(); ++i)
        for (int b : instrs[i].inputs)
          if (b == sb->second)
            return Status::error("state '" + u.state->name() + "'",
                                 "is read by node '" + instrs[i].spec.node +
                                     "' after its new value is computed");
      const LInstr &pi = instrs[static_cast<size_t>(at)];
      const bool readsState =
          std::find(pi.inputs.begin(), pi.inputs.end(), sb->second) != pi.inputs.end();
      if (opts.reuseMemory && readsState && pi.node && pi.node->phase() == ir::Phase::kOptimizer) {
        inPlaceState[nb->second] = sb->second;
        continue;
      }
      LInstr c;
      c.isCopy = true;
      c.spec.node = u.next->name() + " -> " + u.state->name();
      c.inputs = {nb->second};
      c.outputs = {sb->second};
      copies.emplace_back(at, std::move(c));
    }
    // Insert the copies right after their producers, in update order: sorted by position
    // (stable), then merged in one pass (inserting them one by one would move the instructions
    // after each: quadratic in a pipeline stage's micro-batches).
    std::stable_sort(copies.begin(), copies.end(),
                     [](const auto &a, const auto &b) { return a.first < b.first; });
    if (!copies.empty()) {
      std::vector<LInstr> merged;
      merged.reserve(instrs.size() + copies.size());
      size_t k = 0;
      for (size_t i = 0; i < instrs.size(); ++i) {
        merged.push_back(std::move(instrs[i]));
        for (; k < copies.size() && copies[k].first == static_cast<int64_t>(i); ++k)
          merged.push_back(std::move(copies[k].second));
      }
      instrs = std::move(merged);
    }
    if (st->optimizerBegin)
      for (size_t i = 0; i < instrs.size(); ++i)
        if (instrs[i].node == st->optimizerBegin) {
          optimizerBegin = static_cast<int>(i);
          break;
        }
  }
  // Waits: a collective is waited for right before the first later instruction that reads its
  // outputs or overwrites one of its operands, and at the latest at the end of its phase (the
  // micro-batch part [0, optimizerBegin) must leave no collective in flight: validation runs it
  // alone). Everything between the launch and the wait overlaps with the communication.
  {
    // Where each buffer is read and written, in program order: the first reader or writer after
    // a collective is found by binary search, not by a scan of the instructions after it (which
    // is quadratic in a pipeline stage's micro-batches: a send's buffer is written again only
    // much later).
    std::unordered_map<int, std::vector<size_t>> readers, writers;
    for (size_t i = 0; i < instrs.size(); ++i) {
      for (int b : instrs[i].inputs)
        if (b >= 0 && (readers[b].empty() || readers[b].back() != i))
          readers[b].push_back(i);
      for (int b : instrs[i].outputs)
        if (b >= 0 && (writers[b].empty() || writers[b].back() != i))
          writers[b].push_back(i);
    }
    auto firstAfter = [](const std::unordered_map<int, std::vector<size_t>> &at, int b,
                         size_t c) {
      auto it = at.find(b);
      if (it == at.end())
        return SIZE_MAX;
      auto next = std::upper_bound(it->second.begin(), it->second.end(), c);
      return next == it->second.end() ? SIZE_MAX : *next;
    };
    std::vector<std::pair<size_t, LInstr>> waits;
    for (size_t c = 0; c < instrs.size(); ++c) {
      if (!instrs[c].isCollective)
        continue;
      const LInstr &col = instrs[c];
      const size_t end = optimizerBegin >= 0 && c < static_cast<size_t>(optimizerBegin)
                             ? static_cast<size_t>(optimizerBegin)
                             : instrs.size();
      std::vector<int> operands = col.inputs;
      operands.insert(operands.end(), col.outputs.begin(), col.outputs.end());
      // The first later instruction that reads an output or writes an operand, or `end`.
      size_t w = end;
      for (int b : col.outputs)
        if (b >= 0)
          w = std::min(w, firstAfter(readers, b, c));
      for (int b : operands)
        if (b >= 0)
          w = std::min(w, firstAfter(writers, b, c));
      w = std::max(w, c + 1);
      LInstr wait;
      wait.isWait = true;
      wait.collective = col.collective;
      wait.spec.node = col.spec.node;
      wait.inputs = operands;
      waits.emplace_back(w, std::move(wait));
    }
    std::stable_sort(waits.begin(), waits.end(),
                     [](const auto &a, const auto &b) { return a.first < b.first; });
    int shift = 0;
    for (const auto &[at, wait] : waits)
      shift += optimizerBegin >= 0 && at <= static_cast<size_t>(optimizerBegin);
    // Merged in one pass, each wait before the instruction at its position (stable order).
    if (!waits.empty()) {
      std::vector<LInstr> merged;
      merged.reserve(instrs.size() + waits.size());
      size_t k = 0;
      for (size_t i = 0; i <= instrs.size(); ++i) {
        for (; k < waits.size() && waits[k].first == i; ++k)
          merged.push_back(std::move(waits[k].second));
        if (i < instrs.size())
          merged.push_back(std::move(instrs[i]));
      }
      instrs = std::move(merged);
    }
    if (optimizerBegin >= 0)
      optimizerBegin += shift;
  }
  // The forward part ends at the first instruction of a backward or optimizer node (state
  // copies of BatchNormalization's running statistics come right after their producer, in it).
  int forwardEnd = 0;
  if (st) {
    forwardEnd = static_cast<int>(instrs.size());
    for (size_t i = 0; i < instrs.size(); ++i)
      if (instrs[i].node && instrs[i].node->phase() != ir::Phase::kForward) {
        forwardEnd = static_cast<int>(i);
        break;
      }
  }
  std::unordered_set<const ir::Value *> gradientValues, pinnedGradients;
  if (st)
    for (const ir::Value *g : st->gradients)
      if (g)
        gradientValues.insert(g);
  // Gradients stay readable after the step (--dump-gradients), except under ZeRO stage 2,
  // whose point is that no rank keeps whole gradients past their bucket's reduce-scatter.
  if (st && st->gradientShards.empty())
    pinnedGradients = gradientValues;
  const int64_t numInstr = static_cast<int64_t>(instrs.size());

  // Live ranges over the final instruction list: defined by the producing instruction (-1 for
  // inputs and weights), last read by the last consumer; graph outputs live to the end.
  std::vector<int64_t> def(buffers.size(), -1), lastUse(buffers.size(), -1);
  for (int64_t i = 0; i < numInstr; ++i) {
    for (int b : instrs[i].inputs)
      if (b >= 0)
        lastUse[b] = std::max(lastUse[b], i);
    if (instrs[i].isCopy) // writes a persistent state: not its definition
      continue;
    for (int b : instrs[i].outputs)
      if (b >= 0)
        def[b] = i;
  }
  // A free alias is defined with its source, and keeps the source alive while it is read
  // (aliases come after their sources in `buffers`).
  for (size_t b = 0; b < buffers.size(); ++b)
    if (buffers[b].aliasOf >= 0)
      def[b] = def[buffers[b].aliasOf];
  for (size_t b = buffers.size(); b-- > 0;)
    if (buffers[b].aliasOf >= 0)
      lastUse[buffers[b].aliasOf] = std::max(lastUse[buffers[b].aliasOf], lastUse[b]);
  for (size_t b = 0; b < buffers.size(); ++b)
    if (buffers[b].value && buffers[b].value->isGraphOutput() && buffers[b].aliasOf < 0 &&
        pb.bufferOfValue.at(buffers[b].value) == static_cast<int>(b))
      lastUse[b] = MemoryRequest::kForever;

  // Storage groups, in program order: a view (row-major Reshape & co.) or a free alias shares
  // its source's storage; an in-place result reuses a dead input's storage.
  std::vector<int> storageOf(buffers.size(), -1);
  std::vector<Storage> storages;
  auto newStorage = [&](size_t b) {
    const LBuffer &lb = buffers[b];
    const ir::Value *v = lb.value;
    const bool original = v && pb.bufferOfValue.at(v) == static_cast<int>(b);
    Storage s;
    s.size = lb.bytes;
    s.first = def[b];
    s.last = std::max(def[b], lastUse[b]);
    s.persistent = original && v->isInitializer();
    s.external = original && (v->isGraphInput() || v->isGraphOutput());
    // Gradients stay readable after the step (--dump-gradients).
    if (original && pinnedGradients.count(v))
      s.last = MemoryRequest::kForever;
    // Weights are never written; graph inputs stay intact so that a plan can run again on the
    // same inputs (benchmarks, --repeat).
    if (s.persistent || (original && v->isGraphInput()))
      s.last = MemoryRequest::kForever;
    storageOf[b] = static_cast<int>(storages.size());
    storages.push_back(s);
  };
  auto join = [&](size_t b, int storage) {
    storageOf[b] = storage;
    Storage &st = storages[storage];
    st.last = std::max(st.last, lastUse[b]);
    const ir::Value *v = buffers[b].value;
    const bool original = v && pb.bufferOfValue.at(v) == static_cast<int>(b);
    st.external = st.external || (original && v->isGraphOutput());
    if (original && pinnedGradients.count(v)) // readable after the step (--dump-gradients)
      st.last = MemoryRequest::kForever;
  };
  for (size_t b = 0; b < buffers.size(); ++b)
    if (def[b] < 0 && buffers[b].aliasOf < 0)
      newStorage(b);
  std::vector<std::vector<int>> aliasesOf(buffers.size());
  for (size_t a = 0; a < buffers.size(); ++a)
    if (buffers[a].aliasOf >= 0)
      aliasesOf[buffers[a].aliasOf].push_back(static_cast<int>(a));
  std::function<void(int)> placeAliases = [&](int source) {
    for (int a : aliasesOf[source])
      if (storageOf[a] < 0) {
        join(a, storageOf[source]);
        placeAliases(a);
      }
  };
  for (size_t b = 0; b < buffers.size(); ++b)
    if (storageOf[b] >= 0)
      placeAliases(static_cast<int>(b));
  for (int64_t i = 0; i < numInstr; ++i) {
    const LInstr &in = instrs[i];
    if (in.isCopy)
      continue;
    int share = -1;
    int out0 = in.outputs.empty() ? -1 : in.outputs[0];
    if (opts.reuseMemory && out0 >= 0 && !in.isCollective) {
      if (target.isViewOp(in.spec.domain, in.spec.op) && !in.inputs.empty() &&
          in.inputs[0] >= 0) {
        share = storageOf[in.inputs[0]];
      } else if (int k = target.inPlaceInput(in.spec);
                 k >= 0 && k < static_cast<int>(in.inputs.size()) && in.inputs[k] >= 0) {
        const int src = in.inputs[k];
        const Storage &st = storages[storageOf[src]];
        // Another operand in the same bytes (FusedConv(x, w, b, z=x), Add(x, view of x)) would
        // be read while the result overwrites it.
        bool readElsewhere = false;
        for (size_t j = 0; j < in.inputs.size(); ++j)
          readElsewhere = readElsewhere || (static_cast<int>(j) != k && in.inputs[j] >= 0 &&
                                            storageOf[in.inputs[j]] == storageOf[src]);
        if (!readElsewhere && !st.persistent && !st.external && st.last == i &&
            buffers[src].dtype == buffers[out0].dtype && st.size == buffers[out0].bytes &&
            buffers[src].layout == buffers[out0].layout)
          share = storageOf[src];
      }
    }
    for (size_t o = 0; o < in.outputs.size(); ++o) {
      int b = in.outputs[o];
      if (b < 0)
        continue;
      if (auto it = inPlaceState.find(b); it != inPlaceState.end())
        join(b, storageOf[it->second]);
      else if (o == 0 && share >= 0)
        join(b, share);
      else
        newStorage(b);
      placeAliases(b);
    }
  }

  // A collective's outputs lie back to back in one storage, so that the communicator reduces a
  // whole gradient bucket with one call.
  for (const LInstr &in : instrs) {
    if (!in.isCollective || in.outputs.size() < 2)
      continue;
    Storage bucket;
    bucket.first = MemoryRequest::kForever;
    const int index = static_cast<int>(storages.size());
    for (int b : in.outputs) {
      Storage &member = storages[storageOf[b]];
      if (member.parent >= 0)
        continue;
      member.parent = index;
      member.subOffset = bucket.size;
      bucket.size += (member.size + alignment - 1) / alignment * alignment;
      bucket.first = std::min(bucket.first, member.first);
      bucket.last = std::max(bucket.last, member.last);
      bucket.persistent = bucket.persistent || member.persistent;
      bucket.external = bucket.external || member.external;
    }
    storages.push_back(bucket);
  }
  std::vector<MemoryRequest> requests;
  std::vector<size_t> requestOf(storages.size(), 0);
  for (size_t k = 0; k < storages.size(); ++k) {
    const Storage &s = storages[k];
    if (s.parent >= 0)
      continue;
    requestOf[k] = requests.size();
    requests.push_back(opts.reuseMemory ? MemoryRequest{s.size, s.first, s.last}
                                        : MemoryRequest{s.size, -1, MemoryRequest::kForever});
  }
  MemoryPlan mp = planMemory(requests, alignment);
  auto offsetOf = [&](int storage) {
    const Storage &s = storages[storage];
    return s.parent >= 0 ? mp.offsets[requestOf[s.parent]] + s.subOffset
                         : mp.offsets[requestOf[storage]];
  };

  Plan plan;
  plan.set_format_version(kPlanFormatVersion);
  plan.set_producer(opts.producer);
  plan.set_mode(st ? MODE_TRAINING : MODE_INFERENCE);
  for (const auto &[sym, size] : opts.dims)
    (*plan.mutable_bound_dims())[sym] = size;
  RankProgram *rp = plan.add_programs();
  rp->set_alignment(alignment);
  rp->set_arena_bytes(mp.arenaBytes);
  // Without reuse every buffer (views and in-place results included) has its own bytes.
  uint64_t noReuse = 0;
  for (const LBuffer &b : buffers)
    noReuse += (b.bytes + alignment - 1) / alignment * alignment;
  rp->set_no_reuse_bytes(noReuse);

  for (size_t b = 0; b < buffers.size(); ++b) {
    const LBuffer &lb = buffers[b];
    const ir::Value *v = lb.value;
    const bool original = v && pb.bufferOfValue.at(v) == static_cast<int>(b);
    Buffer *buf = rp->add_buffers();
    buf->set_name(lb.name);
    buf->set_dtype(static_cast<int32_t>(lb.dtype));
    for (int64_t d : lb.shape)
      buf->add_shape(d);
    buf->set_offset(offsetOf(storageOf[b]));
    buf->set_size_bytes(lb.bytes);
    if (lb.layout == CpuLayout::kChannelsLast)
      buf->set_layout(LAYOUT_CHANNELS_LAST);
    auto sk = original ? stateKind.find(v) : stateKind.end();
    if (sk != stateKind.end() && sk->second == BUFFER_OPTIMIZER_STATE) {
      buf->set_kind(BUFFER_OPTIMIZER_STATE);
    } else if (original && v->isParameter()) {
      buf->set_kind(BUFFER_PARAMETER);
      buf->set_source(v->name());
      if (v->shard().isSplit()) {
        ShardSpec *sp = buf->mutable_shard();
        sp->set_group("tp");
        sp->set_axis(v->shard().axis);
        sp->set_parts(v->shard().parts);
        sp->set_blocks(v->shard().blocks);
        for (int64_t d : v->initializer()->dims())
          sp->add_whole_shape(d);
      }
    } else if (original && gradientValues.count(v)) {
      buf->set_kind(BUFFER_GRADIENT);
      for (size_t k = 0; k < st->gradients.size(); ++k)
        if (st->gradients[k] == v)
          buf->set_source(st->parameters[k]->name());
    } else if (original && v->isConstant()) {
      buf->set_kind(BUFFER_CONSTANT);
      DTC_ASSIGN_OR_RETURN(const std::string *bytes, v->initializer()->bytes());
      buf->set_data(*bytes);
    } else if (original && v->isGraphInput()) {
      buf->set_kind(BUFFER_INPUT);
    } else if (original && v->isGraphOutput()) {
      buf->set_kind(BUFFER_OUTPUT);
    } else {
      buf->set_kind(BUFFER_ACTIVATION);
    }
  }
  std::unordered_map<int, int> collectiveAt; // collective number -> instruction index
  std::set<std::tuple<int, int, int>> slotsSeen; // pipeline (kind, micro-batch, chunk) started
  for (const LInstr &in : instrs) {
    if (in.node && in.node->microBatch() >= 0 &&
        (in.node->phase() == ir::Phase::kForward || in.node->phase() == ir::Phase::kBackward) &&
        cfg && cfg->mesh.pp > 1) {
      const int kind = in.node->phase() == ir::Phase::kForward ? PipelineSlot::FORWARD
                       : in.node->isWeightGradient()           ? PipelineSlot::WEIGHT
                                                                 : PipelineSlot::BACKWARD;
      // Interleaved pipelines: virtual stage v is chunk v / pp of rank v % pp.
      const int chunk = in.node->stage() >= 0 ? in.node->stage() / static_cast<int>(cfg->mesh.pp)
                                              : 0;
      if (slotsSeen.insert({kind, in.node->microBatch(), chunk}).second) {
        PipelineSlot *slot = rp->add_schedule();
        slot->set_kind(static_cast<PipelineSlot::Kind>(kind));
        slot->set_micro_batch(in.node->microBatch());
        slot->set_chunk(chunk);
        slot->set_first_instruction(rp->instructions_size());
      }
    }
    if (in.isCopy) {
      Copy *c = rp->add_instructions()->mutable_copy();
      c->set_src(in.inputs[0]);
      c->set_dst(in.outputs[0]);
      continue;
    }
    if (in.isCollective && in.node &&
        (in.node->opType() == "Send" || in.node->opType() == "Recv")) {
      // Pipeline transfers run on the rank's pp group; the peer is a stage (its index there).
      collectiveAt[in.collective] = rp->instructions_size();
      Collective *c = rp->add_instructions()->mutable_collective();
      const bool send = in.node->opType() == "Send";
      c->set_kind(send ? COLLECTIVE_SEND : COLLECTIVE_RECV);
      c->set_group("pp");
      c->set_peer(static_cast<int32_t>(in.node->attrInt("peer", -1)));
      c->set_tag(in.node->attrInt("tag", -1));
      const int b = send ? in.inputs.at(0) : in.outputs.at(0);
      // The kind is shown beside the name (plan-text, traces, messages): "h to stage 1".
      c->set_name(buffers[b].name + (send ? " to stage " : " from stage ") +
                  std::to_string(c->peer()));
      if (send)
        c->add_inputs(b);
      else
        c->add_outputs(b);
      continue;
    }
    if (in.isCollective && in.node && in.node->opType() == "ReduceScatter") {
      // ZeRO stage 2: a flattened gradient bucket, rank r keeps block r of the mean.
      collectiveAt[in.collective] = rp->instructions_size();
      Collective *c = rp->add_instructions()->mutable_collective();
      c->set_kind(COLLECTIVE_REDUCE_SCATTER);
      c->set_op(in.node->attrString("op", "mean") == "sum" ? REDUCE_SUM : REDUCE_MEAN);
      c->set_group(in.node->attrString("group", "dp"));
      // ZeRO's buckets by index; the sequence-parallel reduce-scatters (group tp) by result.
      c->set_name(in.node->hasAttr("bucket")
                      ? "bucket " + std::to_string(in.node->attrInt("bucket", 0)) + " shard"
                      : buffers[in.outputs.at(0)].name);
      c->add_inputs(in.inputs.at(0));
      c->add_outputs(in.outputs.at(0));
      continue;
    }
    if (in.isCollective && in.node && in.node->opType() == "AllGather") {
      collectiveAt[in.collective] = rp->instructions_size();
      Collective *c = rp->add_instructions()->mutable_collective();
      c->set_kind(COLLECTIVE_ALL_GATHER);
      c->set_group(in.node->attrString("group", "tp"));
      c->set_name(buffers[in.outputs.at(0)].name);
      c->add_inputs(in.inputs.at(0));
      c->add_outputs(in.outputs.at(0));
      continue;
    }
    if (in.isCollective) {
      collectiveAt[in.collective] = rp->instructions_size();
      Collective *c = rp->add_instructions()->mutable_collective();
      c->set_kind(COLLECTIVE_ALL_REDUCE);
      const std::string op = in.node ? in.node->attrString("op", "mean") : "mean";
      c->set_op(op == "sum" ? REDUCE_SUM : op == "max" ? REDUCE_MAX : REDUCE_MEAN);
      c->set_group(in.node ? in.node->attrString("group", "dp") : "dp");
      // Gradient buckets are named by index; other all-reduces (tp, the global gradient norm
      // of ZeRO) by their result.
      if (in.node && (in.node->attrString("group", "dp") == "tp" || !in.node->hasAttr("bucket")))
        c->set_name(buffers[in.outputs.at(0)].name);
      else
        c->set_name("bucket " + std::to_string(in.node ? in.node->attrInt("bucket", 0) : 0));
      for (int b : in.inputs)
        c->add_inputs(b);
      for (int b : in.outputs)
        c->add_outputs(b);
      continue;
    }
    if (in.isWait) {
      rp->add_instructions()->mutable_wait()->set_collective(collectiveAt.at(in.collective));
      continue;
    }
    KernelCall *call = rp->add_instructions()->mutable_kernel();
    call->set_op(in.spec.op);
    call->set_domain(in.spec.domain);
    call->set_node(in.spec.node);
    for (int b : in.inputs)
      call->add_inputs(b);
    for (int b : in.outputs)
      call->add_outputs(b);
    for (const auto &[name, a] : in.spec.attrs) {
      DTC_ASSIGN_OR_RETURN(Attr pa, toPlanAttr(name, a));
      *call->add_attributes() = std::move(pa);
    }
  }
  for (const ir::Value *v : graph.inputs())
    if (!v->isInitializer()) {
      Binding *bd = rp->add_inputs();
      bd->set_name(v->name());
      bd->set_buffer(pb.bufferOfValue.at(v));
    }
  std::vector<std::string> seenOutputs;
  for (const ir::Value *v : graph.outputs()) {
    if (std::find(seenOutputs.begin(), seenOutputs.end(), v->name()) != seenOutputs.end())
      continue;
    seenOutputs.push_back(v->name());
    auto it = pb.bufferOfValue.find(v);
    if (it == pb.bufferOfValue.end())
      return Status::error("output '" + v->name() + "'", "is not computed by the graph");
    Binding *bd = rp->add_outputs();
    bd->set_name(v->name());
    bd->set_buffer(it->second);
  }

  if (st) {
    DTC_RETURN_IF_ERROR(
        fillTraining(plan, *rp, graph, *cfg, pb.bufferOfValue, optimizerBegin));
    rp->mutable_training()->set_forward_end(forwardEnd);
  }
  if (!finish)
    return plan;
  // Data parallelism: every rank runs the one program on its shard of the batch.
  DTC_RETURN_IF_ERROR(finishPlan(plan, graph, opts, cfg, pb.numCollectives,
                                 [](const MeshCoord &) { return 0; }));
  return plan;
}

} // namespace detail

Expected<Plan> lowerInference(const ir::Graph &graph, const LowerOptions &opts) {
  return detail::lowerProgram(graph, opts, nullptr, /*finish=*/true);
}

Expected<Plan> lowerTraining(const ir::Graph &graph, const TrainingConfig &cfg,
                             const LowerOptions &opts, const ir::ParameterHost *host) {
  if (!graph.training().loss)
    return Status::error("lowering", "the training graph has no loss");
  if (cfg.mesh.hasParameterHost() != (host != nullptr))
    return Status::error("lowering", "--strategy " + cfg.mesh.text() +
                                         (host ? " has no parameter host"
                                               : " needs the parameter host's graphs"));
  DTC_ASSIGN_OR_RETURN(Plan plan,
                       host              ? detail::lowerParameterHost(graph, *host, cfg, opts)
                       : cfg.mesh.pp > 1 ? detail::lowerPipeline(graph, cfg, opts)
                                         : detail::lowerProgram(graph, opts, &cfg, /*finish=*/true));
  // --device-memory: every rank's arena (parameters, gradients, optimizer state, activations
  // and scratch, all of what the rank allocates for the step) must fit one device.
  if (cfg.deviceMemory > 0)
    for (int p = 0; p < plan.programs_size(); ++p) {
      const uint64_t need = plan.programs(p).arena_bytes();
      if (need <= cfg.deviceMemory)
        continue;
      auto text = [](uint64_t b) {
        char human[32];
        const bool big = b >= (1u << 20);
        std::snprintf(human, sizeof human, big ? "%.1f MiB" : "%.1f KiB",
                      static_cast<double>(b) / (big ? 1 << 20 : 1 << 10));
        return std::to_string(b) + " bytes (" + human + ")";
      };
      const std::string who =
          cfg.mesh.pp > 1 ? "pipeline stage " + std::to_string(p) : std::string("each rank");
      return Status::error(
          "--device-memory",
          who + " needs an arena of " + text(need) + " for the step, more than the device's " +
              text(cfg.deviceMemory) +
              (cfg.mesh.pp > 1 ? "; use more stages or micro-batches, or move --pp-cuts"
                               : "; use a smaller --batch-size or a pipeline (pp=S)"));
    }
  return plan;
}

} // namespace dtc::plan
