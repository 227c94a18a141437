// Structural validation of a plan before anything runs (DESIGN.md section 7): a corrupt or
// hostile plan gets an error naming the rank, buffer or instruction, never an out-of-bounds
// access later. All size arithmetic is overflow-checked (__builtin_*_overflow).
#include "compiler/ir/Types.h"
#include "compiler/plan/Plan.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <filesystem>
#include <set>
#include <string>
#include <tuple>

namespace dtc::plan {
namespace {

/// Largest world size a plan may declare.
constexpr int32_t kMaxWorldSize = 65536;
constexpr int32_t kMaxParameterServers = 256;
/// The least MPI_TAG_UB the MPI standard guarantees (Open MPI allows 2^31 - 1).
constexpr int64_t kMaxTag = 32767;
/// Sanity cap on one rank's arena: 1 TiB.
constexpr uint64_t kMaxArenaBytes = uint64_t{1} << 40;

std::string str(uint64_t v) { return std::to_string(v); }
std::string str(int64_t v) { return std::to_string(v); }
std::string str(int32_t v) { return std::to_string(v); }

/// 'name' for messages, control bytes escaped so a message stays one line.
std::string q(const std::string &s) {
  std::string out = "'";
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "'";
}

bool isPowerOfTwo(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

bool isLowerHex(const std::string &s, size_t digits) {
  if (s.size() != digits)
    return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return false;
  return true;
}

std::string bufferWhere(int index, const Buffer &b) {
  return "buffer %" + std::to_string(index) + " " + q(b.name());
}

Status checkBuffer(const Plan &plan, const RankProgram &r, int index) {
  const Buffer &b = r.buffers(index);
  const std::string where = bufferWhere(index, b);
  auto fail = [&](const std::string &what) { return Status::error(where, what); };

  if (!ir::isKnownDType(b.dtype()))
    return fail("unknown dtype " + str(b.dtype()));
  const int64_t elemSize = ir::dtypeSize(static_cast<ir::DType>(b.dtype()));
  if (elemSize <= 0)
    return fail("dtype " + std::string(ir::dtypeName(static_cast<ir::DType>(b.dtype()))) +
                " has no fixed element size");
  uint64_t elements = 1;
  for (int d = 0; d < b.shape_size(); ++d) {
    if (b.shape(d) < 0)
      return fail("dim " + std::to_string(d) + " is " + str(b.shape(d)) + ", below 0");
    if (__builtin_mul_overflow(elements, static_cast<uint64_t>(b.shape(d)), &elements))
      return fail("element count overflows (dim " + std::to_string(d) + " is " + str(b.shape(d)) +
                  ")");
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(elements, static_cast<uint64_t>(elemSize), &bytes))
    return fail("size in bytes overflows (" + str(elements) + " elements of " + str(elemSize) +
                " bytes)");
  if (bytes != b.size_bytes())
    return fail("size_bytes is " + str(b.size_bytes()) + ", but " + str(elements) +
                " elements of " + str(elemSize) + " bytes take " + str(bytes));
  if (b.offset() % r.alignment() != 0)
    return fail("offset " + str(b.offset()) + " is not a multiple of the alignment (" +
                str(r.alignment()) + ")");
  uint64_t end = 0;
  if (__builtin_add_overflow(b.offset(), b.size_bytes(), &end))
    return fail("offset " + str(b.offset()) + " + size " + str(b.size_bytes()) + " overflows");
  if (end > r.arena_bytes())
    return fail("ends at byte " + str(end) + ", past the arena (" + str(r.arena_bytes()) +
                " bytes)");

  switch (b.kind()) {
  case BUFFER_PARAMETER:
    if (b.source().empty())
      return fail("parameter without a source (initializer name)");
    break;
  case BUFFER_CONSTANT:
    if (b.shared_data() != 0) {
      if (b.shared_data() > static_cast<uint32_t>(plan.constants_size()))
        return fail("shared constant " + std::to_string(b.shared_data()) + " is not in [1, " +
                    std::to_string(plan.constants_size()) + "]");
      if (!b.data().empty())
        return fail("constant has both its own data and shared constant " +
                    std::to_string(b.shared_data()));
    }
    if (bufferData(plan, b).size() != b.size_bytes())
      return fail("constant carries " + str(uint64_t{bufferData(plan, b).size()}) +
                  " bytes of data, but its size is " + str(b.size_bytes()) + " bytes");
    break;
  case BUFFER_GRADIENT:
  case BUFFER_ACTIVATION:
  case BUFFER_OPTIMIZER_STATE:
  case BUFFER_INPUT:
  case BUFFER_OUTPUT:
    break;
  case BUFFER_KIND_UNSPECIFIED:
    return fail("buffer kind is not set");
  default:
    return fail("unknown buffer kind " + std::to_string(b.kind()));
  }
  if (b.kind() != BUFFER_CONSTANT && (!b.data().empty() || b.shared_data() != 0))
    return fail("data on a buffer that is not a constant");
  if (b.layout() == LAYOUT_CHANNELS_LAST) {
    if (b.shape_size() < 3)
      return fail("channels-last layout needs rank >= 3, the shape has rank " +
                  std::to_string(b.shape_size()));
    if (b.kind() == BUFFER_CONSTANT || b.kind() == BUFFER_INPUT || b.kind() == BUFFER_OUTPUT ||
        b.kind() == BUFFER_PARAMETER)
      return fail("inputs, outputs, parameters and constants are row-major; this one is "
                  "channels-last");
  } else if (b.layout() != LAYOUT_ROW_MAJOR) {
    return fail("unknown layout " + std::to_string(b.layout()));
  }
  if (b.has_shard()) {
    const ShardSpec &sp = b.shard();
    if (b.kind() != BUFFER_PARAMETER && b.kind() != BUFFER_GRADIENT &&
        b.kind() != BUFFER_OPTIMIZER_STATE)
      return fail("only parameters, gradients and optimizer state may be shards");
    if (sp.group() == "ps") {
      // A parameter server's rows [begin, begin + shape[axis]) of the whole tensor.
      bool ok = b.kind() == BUFFER_PARAMETER && sp.axis() == 0 && b.shape_size() >= 1 &&
                sp.whole_shape_size() == b.shape_size() && sp.begin() >= 0 &&
                sp.begin() <= sp.whole_shape(0) && b.shape(0) <= sp.whole_shape(0) - sp.begin();
      for (int d = 1; ok && d < b.shape_size(); ++d)
        ok = sp.whole_shape(d) == b.shape(d);
      if (!ok)
        return fail("malformed parameter-server shard (axis " + std::to_string(sp.axis()) +
                    ", begin " + std::to_string(sp.begin()) + ")");
      return Status::ok();
    }
    if (sp.group() != "tp" || sp.parts() < 1 || sp.parts() > 65536 || sp.blocks() < 1 ||
        sp.blocks() > 65536 || sp.whole_shape_size() != b.shape_size() || sp.axis() < 0 ||
        sp.axis() >= b.shape_size())
      return fail("malformed shard (group '" + sp.group() + "', axis " + std::to_string(sp.axis()) +
                  ", parts " + std::to_string(sp.parts()) + ", blocks " +
                  std::to_string(sp.blocks()) + ")");
    for (int d = 0; d < b.shape_size(); ++d) {
      const int64_t whole = sp.whole_shape(d);
      int64_t want = d == sp.axis()
                         ? (whole % (sp.parts() * sp.blocks()) == 0 ? whole / sp.parts() : -1)
                         : whole;
      // An uneven split (ir::splitRange): floor or ceil of whole / parts, never empty.
      if (d == sp.axis() && want < 0 && sp.blocks() == 1 && whole >= sp.parts() &&
          (b.shape(d) == whole / sp.parts() || b.shape(d) == whole / sp.parts() + 1))
        want = b.shape(d);
      if (want != b.shape(d))
        return fail("shard of a whole tensor of " + std::to_string(sp.whole_shape_size()) +
                    " dims split in " + std::to_string(sp.parts()) + " along axis " +
                    std::to_string(sp.axis()) + " does not have the buffer's shape");
    }
  }
  return Status::ok();
}

Status checkAttr(const Attr &a) {
  const std::string where = "attribute " + q(a.name());
  if (a.name().empty())
    return Status::error("attribute without a name");
  if (a.value_case() == Attr::VALUE_NOT_SET)
    return Status::error(where, "no value");
  if (a.value_case() != Attr::kT)
    return Status::ok();
  const TensorValue &t = a.t();
  if (!ir::isKnownDType(t.dtype()))
    return Status::error(where, "unknown dtype " + str(t.dtype()));
  const int64_t elemSize = ir::dtypeSize(static_cast<ir::DType>(t.dtype()));
  if (elemSize <= 0)
    return Status::error(where, "tensor dtype has no fixed element size");
  uint64_t elements = 1;
  for (int64_t d : t.shape())
    if (d < 0 || __builtin_mul_overflow(elements, static_cast<uint64_t>(d), &elements))
      return Status::error(where, "bad tensor shape (negative dim or overflow)");
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(elements, static_cast<uint64_t>(elemSize), &bytes) ||
      bytes != t.data().size())
    return Status::error(where, "tensor carries " + str(uint64_t{t.data().size()}) +
                                    " bytes of data, but its shape needs " + str(elements) +
                                    " elements of " + str(elemSize) + " bytes");
  return Status::ok();
}

std::string operandRange(const char *what, int j, int32_t index, const RankProgram &r) {
  return std::string(what) + " " + std::to_string(j) + " is buffer " + str(index) +
         ", but the program has " + std::to_string(r.buffers_size()) + " buffers";
}

Status checkInstruction(const RankProgram &r, int index, const KernelCheck &kernelCheck) {
  const Instruction &inst = r.instructions(index);
  const int n = r.buffers_size();
  const std::string at = "instruction " + std::to_string(index);
  switch (inst.kind_case()) {
  case Instruction::kKernel: {
    const KernelCall &k = inst.kernel();
    if (k.op().empty())
      return Status::error(at, "kernel call without an op");
    std::string where = at + " (" + k.op();
    if (!k.node().empty())
      where += ", node " + q(k.node());
    where += ")";
    for (int j = 0; j < k.inputs_size(); ++j)
      if (k.inputs(j) < -1 || k.inputs(j) >= n)
        return Status::error(where, operandRange("input", j, k.inputs(j), r));
    for (int j = 0; j < k.outputs_size(); ++j) {
      if (k.outputs(j) == -1)
        return Status::error(where, "output " + std::to_string(j) +
                                        " is -1 (only optional inputs may be omitted)");
      if (k.outputs(j) < 0 || k.outputs(j) >= n)
        return Status::error(where, operandRange("output", j, k.outputs(j), r));
    }
    std::set<std::string> names;
    for (const Attr &a : k.attributes()) {
      DTC_RETURN_IF_ERROR(checkAttr(a).withContext(where));
      if (!names.insert(a.name()).second)
        return Status::error(where, "attribute " + q(a.name()) + " appears twice");
    }
    if (kernelCheck)
      DTC_RETURN_IF_ERROR(kernelCheck(r, k).withContext(at));
    return Status::ok();
  }
  case Instruction::kCopy: {
    const Copy &c = inst.copy();
    const std::string where = at + " (copy)";
    if (c.src() < 0 || c.src() >= n)
      return Status::error(where, "source is buffer " + str(c.src()) + ", but the program has " +
                                      std::to_string(n) + " buffers");
    if (c.dst() < 0 || c.dst() >= n)
      return Status::error(where, "destination is buffer " + str(c.dst()) +
                                      ", but the program has " + std::to_string(n) + " buffers");
    const uint64_t srcBytes = r.buffers(c.src()).size_bytes();
    const uint64_t dstBytes = r.buffers(c.dst()).size_bytes();
    if (srcBytes != dstBytes)
      return Status::error(where, "copies buffer %" + str(c.src()) + " (" + str(srcBytes) +
                                      " bytes) into buffer %" + str(c.dst()) + " (" +
                                      str(dstBytes) + " bytes): sizes differ");
    return Status::ok();
  }
  case Instruction::kCollective: {
    const Collective &c = inst.collective();
    const std::string where = at + " (collective " + q(c.name()) + ")";
    if (c.kind() < COLLECTIVE_ALL_REDUCE || c.kind() > COLLECTIVE_RECV)
      return Status::error(where, "unknown collective kind " + std::to_string(c.kind()));
    if (c.group() != "dp" && c.group() != "pp" && c.group() != "tp")
      return Status::error(where, "group axis " + q(c.group()) + " is not dp, pp or tp");
    const bool reduces = c.kind() == COLLECTIVE_ALL_REDUCE || c.kind() == COLLECTIVE_REDUCE_SCATTER;
    if (reduces && c.op() != REDUCE_SUM && c.op() != REDUCE_MEAN && c.op() != REDUCE_MAX)
      return Status::error(where, "unknown reduction " + std::to_string(c.op()));
    if (c.kind() == COLLECTIVE_SEND || c.kind() == COLLECTIVE_RECV) {
      const bool send = c.kind() == COLLECTIVE_SEND;
      if (c.inputs_size() != (send ? 1 : 0) || c.outputs_size() != (send ? 0 : 1))
        return Status::error(where, std::string(send ? "a send needs one input and no output"
                                                     : "a receive needs one output and no input"));
      const int32_t b = send ? c.inputs(0) : c.outputs(0);
      if (b < 0 || b >= n)
        return Status::error(where, operandRange(send ? "input" : "output", 0, b, r));
      if (c.tag() < 0 || c.tag() > kMaxTag)
        return Status::error(where, "tag " + str(c.tag()) + " is not in [0, " + str(kMaxTag) + "]");
      return Status::ok();
    }
    if (c.kind() != COLLECTIVE_ALL_REDUCE && (c.inputs_size() != 1 || c.outputs_size() != 1))
      return Status::error(where, "needs one input and one output");
    if (c.inputs_size() == 0 || c.inputs_size() != c.outputs_size())
      return Status::error(where, "needs one output per input, got " +
                                      std::to_string(c.inputs_size()) + " inputs and " +
                                      std::to_string(c.outputs_size()) + " outputs");
    for (int j = 0; j < c.inputs_size(); ++j) {
      if (c.inputs(j) < 0 || c.inputs(j) >= n)
        return Status::error(where, operandRange("input", j, c.inputs(j), r));
      if (c.outputs(j) < 0 || c.outputs(j) >= n)
        return Status::error(where, operandRange("output", j, c.outputs(j), r));
      const Buffer &in = r.buffers(c.inputs(j)), &out = r.buffers(c.outputs(j));
      // Sizes of gathers and scatters depend on the group size: checked per rank.
      const bool sameSize = c.kind() == COLLECTIVE_ALL_REDUCE || c.kind() == COLLECTIVE_BROADCAST;
      if (in.dtype() != out.dtype() || (sameSize && in.size_bytes() != out.size_bytes()))
        return Status::error(where, "input " + std::to_string(j) + " " + q(in.name()) +
                                        " and output " + q(out.name()) +
                                        " differ in dtype or size");
      if (reduces && in.dtype() != static_cast<int32_t>(ir::DType::kFloat32) &&
          in.dtype() != static_cast<int32_t>(ir::DType::kFloat64))
        return Status::error(where, "operand " + q(in.name()) + " is not f32 or f64");
      // One reduction covers every operand: one dtype, and outputs laid out as their inputs.
      if (in.dtype() != r.buffers(c.inputs(0)).dtype())
        return Status::error(where, "operand " + q(in.name()) + " has another dtype than " +
                                        q(r.buffers(c.inputs(0)).name()));
      if (in.layout() != out.layout())
        return Status::error(where, "input " + q(in.name()) + " and output " + q(out.name()) +
                                        " differ in layout");
    }
    return Status::ok();
  }
  case Instruction::kWait: {
    const int32_t c = inst.wait().collective();
    if (c < 0 || c >= index || !r.instructions(c).has_collective())
      return Status::error(at + " (wait)", "instruction " + str(c) +
                                               " is not a collective before it");
    return Status::ok();
  }
  case Instruction::KIND_NOT_SET:
    return Status::error(at, "empty instruction");
  }
  return Status::error(at, "unknown instruction kind");
}

Status checkBindings(const RankProgram &r, bool inputs) {
  const auto &bindings = inputs ? r.inputs() : r.outputs();
  const char *what = inputs ? "input binding" : "output binding";
  std::set<std::string> names;
  for (const Binding &b : bindings) {
    const std::string where = std::string(what) + " " + q(b.name());
    if (b.name().empty())
      return Status::error(std::string(what) + " without a name");
    if (!names.insert(b.name()).second)
      return Status::error(where, "name appears twice");
    if (b.buffer() < 0 || b.buffer() >= r.buffers_size())
      return Status::error(where, "is buffer " + str(b.buffer()) + ", but the program has " +
                                      std::to_string(r.buffers_size()) + " buffers");
    if (inputs && r.buffers(b.buffer()).kind() != BUFFER_INPUT)
      return Status::error(where, "is buffer %" + str(b.buffer()) + " " +
                                      q(r.buffers(b.buffer()).name()) +
                                      ", which is not an input buffer");
  }
  return Status::ok();
}

Status checkProgram(const Plan &plan, const RankProgram &r, const KernelCheck &kernelCheck) {
  if (!isPowerOfTwo(r.alignment()))
    return Status::error("alignment " + str(r.alignment()) + " is not a power of two");
  // Kernels rely on 64-byte aligned operands (ops/cpu/Kernel.h: KernelArgs).
  if (r.alignment() < kCpuAlignment)
    return Status::error("alignment " + str(r.alignment()) + " is below the " + str(kCpuAlignment) +
                         " bytes CPU kernels need");
  if (r.arena_bytes() > kMaxArenaBytes)
    return Status::error("arena of " + str(r.arena_bytes()) + " bytes is above the limit of " +
                         str(kMaxArenaBytes) + " bytes (1 TiB)");
  for (int i = 0; i < r.buffers_size(); ++i)
    DTC_RETURN_IF_ERROR(checkBuffer(plan, r, i));
  // The arena is what the buffers need (the memory planner's arena ends at the last buffer,
  // rounded up to the alignment): a plan cannot make the runtime allocate and zero-fill more.
  uint64_t needed = 0;
  for (const Buffer &b : r.buffers())
    needed = std::max(needed, b.offset() + b.size_bytes()); // checked: no overflow, in the arena
  needed = std::max(r.alignment(), (needed + r.alignment() - 1) / r.alignment() * r.alignment());
  if (r.arena_bytes() > needed)
    return Status::error("arena of " + str(r.arena_bytes()) + " bytes is larger than its buffers " +
                         "need (" + str(needed) + " bytes)");
  // Bindings before instructions: kernel checks may rely on them.
  DTC_RETURN_IF_ERROR(checkBindings(r, /*inputs=*/true));
  DTC_RETURN_IF_ERROR(checkBindings(r, /*inputs=*/false));
  // Another rank's program, read without its instructions (readPlanForRank): what it holds is
  // checked above; its instructions and schedule are checked by the ranks that run it.
  if (r.summary()) {
    if (r.instructions_size() != 0 || r.repeated_slots_size() != 0)
      return Status::error("a summary holds no instructions");
    return Status::ok();
  }
  for (int i = 0; i < r.instructions_size(); ++i)
    DTC_RETURN_IF_ERROR(checkInstruction(r, i, kernelCheck));
  // Every collective is waited for exactly once: an unwaited one would still write its outputs
  // while later instructions run.
  std::map<int32_t, int> waits;
  for (int i = 0; i < r.instructions_size(); ++i)
    if (r.instructions(i).has_wait() && ++waits[r.instructions(i).wait().collective()] > 1)
      return Status::error("instruction " + std::to_string(i) + " (wait)",
                           "waits a second time for instruction " +
                               str(r.instructions(i).wait().collective()));
  for (int i = 0; i < r.instructions_size(); ++i)
    if (r.instructions(i).has_collective() && !waits.count(i))
      return Status::error("instruction " + std::to_string(i) + " (collective " +
                               q(r.instructions(i).collective().name()) + ")",
                           "is never waited for");
  // A pipeline schedule: each slot once, starting inside the program, in program order.
  std::set<std::tuple<int, int32_t, int32_t>> slots;
  int32_t previous = -1;
  for (const PipelineSlot &slot : r.schedule()) {
    const std::string name = pipelineSlotText(slot);
    if (slot.micro_batch() < 0 || slot.chunk() < 0 ||
        !slots.insert({slot.kind(), slot.micro_batch(), slot.chunk()}).second)
      return Status::error("schedule slot " + name,
                           "is listed twice or has no micro-batch or chunk");
    if (slot.first_instruction() < previous || slot.first_instruction() >= r.instructions_size())
      return Status::error("schedule slot " + name,
                           "starts at instruction " + str(slot.first_instruction()) +
                               ", outside the program or before the slot listed before it");
    previous = slot.first_instruction();
  }
  return Status::ok();
}

/// A program's Training message against its buffers and bindings.
Status checkTraining(const Plan &plan, const RankProgram &r, bool server) {
  if (plan.mode() != MODE_TRAINING)
    return Status::error("only training plans carry a training section");
  if (!r.has_training())
    return Status::error("a training plan needs its training section");
  const Training &t = r.training();
  const int32_t numBuffers = r.buffers_size();
  auto bufferOk = [&](int32_t b) { return b >= 0 && b < numBuffers; };
  auto inputNamed = [&](const std::string &name) -> const Buffer * {
    for (const Binding &b : r.inputs())
      if (b.name() == name && bufferOk(b.buffer()))
        return &r.buffers(b.buffer());
    return nullptr;
  };
  bool hasLoss = false;
  for (const Binding &b : r.outputs())
    hasLoss = hasLoss || (b.name() == t.loss_output() && bufferOk(b.buffer()) &&
                          r.buffers(b.buffer()).dtype() == static_cast<int32_t>(ir::DType::kFloat32));
  // A pipeline's loss is computed by its last stage only (checked per rank in checkPlan).
  if (!hasLoss && !(t.loss_output().empty() && (plan.mesh().pp() > 1 || server)))
    return Status::error("loss output " + q(t.loss_output()) + " is not a f32 output binding");
  if (!t.prediction_output().empty()) {
    bool found = false;
    for (const Binding &b : r.outputs())
      found = found || b.name() == t.prediction_output();
    if (!found)
      return Status::error("prediction output " + q(t.prediction_output()) +
                           " is not an output binding");
  }
  if (!t.label_input().empty() && !inputNamed(t.label_input()))
    return Status::error("label input " + q(t.label_input()) + " is not an input binding");
  struct Runtime {
    const std::string &name;
    ir::DType dtype;
    std::vector<int64_t> shape;
  };
  for (const Runtime &rt : {Runtime{t.lr_input(), ir::DType::kFloat32, {}},
                            Runtime{t.step_input(), ir::DType::kInt64, {}},
                            Runtime{t.rng_input(), ir::DType::kInt64, {3}},
                            Runtime{t.tp_rank_input(), ir::DType::kInt64, {}},
                            Runtime{t.dp_rank_input(), ir::DType::kInt64, {}}}) {
    if (rt.name.empty())
      continue;
    const Buffer *b = inputNamed(rt.name);
    if (!b || b->dtype() != static_cast<int32_t>(rt.dtype) ||
        std::vector<int64_t>(b->shape().begin(), b->shape().end()) != rt.shape)
      return Status::error("runtime input " + q(rt.name) + " is not an input binding of type " +
                           ir::TensorType{rt.dtype, ir::Shape::ofStatic(rt.shape)}.str());
  }
  std::set<int32_t> trained;
  for (const TrainedParameter &p : t.parameters()) {
    const std::string where = "parameter " + q(p.name());
    if (!bufferOk(p.buffer()) || !bufferOk(p.gradient()))
      return Status::error(where, "buffer or gradient index out of range");
    if (!trained.insert(p.buffer()).second)
      return Status::error(where, "is listed twice");
    const Buffer &pb = r.buffers(p.buffer());
    if (pb.kind() != BUFFER_PARAMETER)
      return Status::error(where, "buffer " + str(p.buffer()) + " is not a parameter buffer");
    for (int32_t other : p.state()) {
      if (!bufferOk(other))
        return Status::error(where, "state index " + str(other) + " out of range");
      if (r.buffers(other).kind() != BUFFER_OPTIMIZER_STATE)
        return Status::error(where, "state buffer " + str(other) + " is not optimizer state");
    }
    const Buffer &gb = r.buffers(p.gradient());
    if (gb.size_bytes() != pb.size_bytes() || gb.dtype() != pb.dtype())
      return Status::error(where, "gradient buffer " + str(p.gradient()) +
                                      " differs from the parameter in size or dtype");
  }
  for (int32_t b : t.state_buffers())
    if (!bufferOk(b) || r.buffers(b).kind() != BUFFER_PARAMETER)
      return Status::error("state buffer " + str(b) + " is not a parameter buffer");
  // A summary's instructions were not read: the positions are checked where it runs.
  const int32_t instructions = r.summary() ? INT32_MAX : r.instructions_size();
  if (t.forward_end() < 0 || t.forward_end() > instructions ||
      (t.forward_end() > t.optimizer_begin() && t.optimizer_begin() >= 0))
    return Status::error("forward_end " + str(t.forward_end()) + " is not in [0, optimizer_begin " +
                         str(t.optimizer_begin()) + "]");
  if (t.optimizer_begin() < -1 || t.optimizer_begin() > instructions)
    return Status::error("optimizer_begin " + str(t.optimizer_begin()) + " is not in [-1, " +
                         std::to_string(instructions) + "]");
  return Status::ok();
}

/// The training hyperparameters every program shares.
Status checkHyperparameters(const Hyperparameters &h) {
  if (h.grad_accum_steps() < 1 || h.grad_accum_steps() > (int64_t{1} << 20))
    return Status::error("grad_accum_steps " + str(h.grad_accum_steps()) +
                         " is not in [1, 1048576]");
  if (h.batch_size() < 1 || h.batch_size() > (int64_t{1} << 31))
    return Status::error("batch size " + str(h.batch_size()) + " is not in [1, 2^31]");
  if (h.zero() < 0 || h.zero() > 2)
    return Status::error("zero " + str(h.zero()) + " is not 0, 1 or 2");
  return Status::ok();
}

/// ps=S:W and cs=N: the workers run program 0, server s runs servers[s].program (each server
/// its own, none of them 0); the shards tile each trained parameter's axis 0 exactly once, on
/// distinct servers, and each names a server-program parameter of its shape and dtype.
Status checkParameterHost(const Plan &plan) {
  const ParameterHostInfo &host = plan.parameter_host();
  if (plan.mode() != MODE_TRAINING)
    return Status::error("only training plans have one");
  if (host.kind() != ParameterHostInfo::PARAMETER_SERVERS &&
      host.kind() != ParameterHostInfo::CENTRAL_STORAGE)
    return Status::error("unknown kind " + std::to_string(host.kind()));
  if (host.workers() != plan.world_size())
    return Status::error(str(host.workers()) + " workers in a plan of " + str(plan.world_size()) +
                         " ranks");
  if (host.staleness() < -1)
    return Status::error("staleness " + str(host.staleness()) + " is below -1");
  if (host.kind() == ParameterHostInfo::CENTRAL_STORAGE && host.servers_size() != 1)
    return Status::error("central storage has one host program, not " +
                         std::to_string(host.servers_size()));
  const RankProgram &worker = plan.programs(0);
  std::map<std::string, const Buffer *> trained; // the workers' trained parameters
  for (const TrainedParameter &p : worker.training().parameters())
    trained[p.name()] = &worker.buffers(p.buffer()); // indices checked by checkTraining
  std::set<int32_t> programs;
  for (int s = 0; s < host.servers_size(); ++s) {
    const ServerInfo &si = host.servers(s);
    const std::string where = "server " + std::to_string(s);
    if (si.program() < 1 || si.program() >= plan.programs_size() ||
        !programs.insert(si.program()).second)
      return Status::error(where, "program " + str(si.program()) +
                                      " is not a program of its own (1 to " +
                                      std::to_string(plan.programs_size() - 1) + ")");
    if (plan.programs(si.program()).ranks_size() != 0)
      return Status::error(where, "its program is also run by a rank");
    const int32_t count = plan.programs(si.program()).training().parameters_size();
    if (si.shards_size() != count)
      return Status::error(where, "lists " + std::to_string(si.shards_size()) +
                                      " shards for the " + std::to_string(count) +
                                      " parameters of its program");
    for (int k = 0; k < si.shards_size(); ++k) {
      const int32_t id = si.shards(k);
      if (id < 0 || id >= host.shards_size() || host.shards(id).server() != s ||
          host.shards(id).server_parameter() != k)
        return Status::error(where, "shard " + str(id) + " at " + std::to_string(k) +
                                        " is not its parameter " + std::to_string(k));
    }
  }
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> rows; // parameter -> ranges
  std::map<std::string, std::set<int32_t>> serversOf;
  for (int i = 0; i < host.shards_size(); ++i) {
    const ParameterShard &sh = host.shards(i);
    const std::string where = "shard " + std::to_string(i) + " of " + q(sh.parameter());
    auto it = trained.find(sh.parameter());
    if (it == trained.end())
      return Status::error(where, "is not a trained parameter of the workers' program");
    const Buffer &whole = *it->second;
    if (sh.server() < 0 || sh.server() >= host.servers_size())
      return Status::error(where, "server " + str(sh.server()) + " is not in [0, " +
                                      std::to_string(host.servers_size()) + ")");
    if (!serversOf[sh.parameter()].insert(sh.server()).second)
      return Status::error(where, "its server " + str(sh.server()) + " holds another shard of it");
    const RankProgram &sp = plan.programs(host.servers(sh.server()).program());
    if (sh.server_parameter() < 0 || sh.server_parameter() >= sp.training().parameters_size())
      return Status::error(where, "server parameter " + str(sh.server_parameter()) +
                                      " is out of range");
    const Buffer &local = sp.buffers(sp.training().parameters(sh.server_parameter()).buffer());
    const int64_t dim0 = whole.shape_size() ? whole.shape(0) : 1;
    if (sh.begin() < 0 || sh.rows() < 1 || sh.begin() > dim0 || sh.rows() > dim0 - sh.begin())
      return Status::error(where, "rows [" + str(sh.begin()) + ", +" + str(sh.rows()) +
                                      ") are not inside axis 0 of " + str(dim0));
    bool same = local.dtype() == whole.dtype() && local.shape_size() == whole.shape_size() &&
                (whole.shape_size() == 0 ? sh.rows() == 1 : local.shape(0) == sh.rows());
    for (int d = 1; same && d < whole.shape_size(); ++d)
      same = local.shape(d) == whole.shape(d);
    if (!same)
      return Status::error(where, "the server's buffer " + q(local.name()) +
                                      " does not have the shard's dtype and shape");
    rows[sh.parameter()].push_back({sh.begin(), sh.rows()});
  }
  for (const auto &[name, buffer] : trained) {
    auto &ranges = rows[name];
    std::sort(ranges.begin(), ranges.end());
    int64_t next = 0;
    for (const auto &[begin, count] : ranges) {
      if (begin != next)
        return Status::error("parameter " + q(name), "its shards do not tile axis 0 (row " +
                                                         str(next) + ")");
      next = begin + count;
    }
    const int64_t dim0 = buffer->shape_size() ? buffer->shape(0) : 1;
    if (next != dim0)
      return Status::error("parameter " + q(name),
                           "its shards cover " + str(next) + " of " + str(dim0) + " rows");
  }
  return Status::ok();
}

/// "rank 3" or "ranks 0, 1" (RankProgram.ranks).
std::string rankList(const RankProgram &r) {
  std::string text = r.ranks_size() == 1 ? "rank " : "ranks ";
  for (int k = 0; k < r.ranks_size(); ++k)
    text += (k ? ", " : "") + std::to_string(r.ranks(k));
  return text;
}

Status checkPlan(const Plan &plan, const KernelCheck &kernelCheck) {
  if (plan.format_version() != kPlanFormatVersion)
    return Status::error("plan format version " + std::to_string(plan.format_version()) +
                         ", this dtc reads version " + std::to_string(kPlanFormatVersion));
  const int32_t world = plan.world_size();
  if (world < 1 || world > kMaxWorldSize)
    return Status::error("world size " + str(world) + " is not in [1, " + str(kMaxWorldSize) + "]");
  if (plan.ranks_size() != world)
    return Status::error("world size is " + str(world) + ", but the plan has " +
                         std::to_string(plan.ranks_size()) + " ranks");
  const ParameterHostInfo &host = plan.parameter_host();
  const bool hasHost = plan.has_parameter_host();
  if (hasHost && (host.servers_size() < 1 || host.servers_size() > kMaxParameterServers))
    return Status::error("parameter host: " + std::to_string(host.servers_size()) +
                         " servers, expected 1 to " + std::to_string(kMaxParameterServers));
  const int32_t servers = hasHost ? host.servers_size() : 0;
  if (plan.programs_size() < 1 || plan.programs_size() > world + servers)
    return Status::error("the plan has " + std::to_string(plan.programs_size()) + " programs for " +
                         str(world) + " ranks" +
                         (servers ? " and " + std::to_string(servers) + " servers" : ""));
  // Sorted: protobuf map order is unspecified, and the first error must not depend on it.
  std::map<std::string, int64_t> bound(plan.bound_dims().begin(), plan.bound_dims().end());
  for (const auto &[name, value] : bound) {
    if (name.empty())
      return Status::error("bound dim without a name");
    if (value < 0)
      return Status::error("bound dim " + q(name) + " is " + str(value) + ", below 0");
  }
  if (plan.hyperparameters().batch_size() < 0)
    return Status::error("batch size " + str(plan.hyperparameters().batch_size()) + " is below 0");
  for (int g = 0; g < plan.groups_size(); ++g) {
    const CommGroup &group = plan.groups(g);
    const std::string where = "group " + std::to_string(g) + " " + q(group.axis());
    if (group.id() != g)
      return Status::error(where, "has id " + str(group.id()));
    if (group.axis() != "dp" && group.axis() != "pp" && group.axis() != "tp")
      return Status::error(where, "axis is not dp, pp or tp");
    if (group.ranks_size() == 0)
      return Status::error(where, "has no ranks");
    std::set<int32_t> seen;
    for (int32_t rank : group.ranks()) {
      if (rank < 0 || rank >= world)
        return Status::error(where, "rank " + str(rank) + " is not in [0, " + str(world) + ")");
      if (!seen.insert(rank).second)
        return Status::error(where, "rank " + str(rank) + " appears twice");
    }
  }
  if (plan.mode() == MODE_TRAINING)
    DTC_RETURN_IF_ERROR(checkHyperparameters(plan.hyperparameters()).withContext("training"));
  for (int p = 0; p < plan.programs_size(); ++p) {
    const RankProgram &r = plan.programs(p);
    const std::string where = "program " + std::to_string(p);
    DTC_RETURN_IF_ERROR(checkProgram(plan, r, kernelCheck).withContext(where));
    std::set<std::string> inputs, fed;
    for (const Binding &b : r.inputs())
      inputs.insert(b.name());
    for (const DataBinding &d : r.data_bindings()) {
      const std::string at = where + ": data binding " + q(d.array()) + " -> " + q(d.input());
      if (d.array().empty())
        return Status::error(at, "no array name");
      if (!inputs.count(d.input()))
        return Status::error(at, "the program has no graph input named " + q(d.input()));
      if (!fed.insert(d.input()).second)
        return Status::error(at, "input " + q(d.input()) + " is fed twice");
      if (d.shard_axis() < -1)
        return Status::error(at, "shard axis " + str(d.shard_axis()) + " is below -1");
    }
    if (r.has_training() || plan.mode() == MODE_TRAINING)
      DTC_RETURN_IF_ERROR(
          checkTraining(plan, r, /*server=*/hasHost && p > 0).withContext(where + ": training"));
  }
  if (hasHost)
    DTC_RETURN_IF_ERROR(checkParameterHost(plan).withContext("parameter host"));
  const MeshInfo &mesh = plan.mesh();
  const bool meshSet = mesh.dp() > 0 || mesh.pp() > 0 || mesh.tp() > 0;
  if (meshSet && (mesh.dp() < 1 || mesh.pp() < 1 || mesh.tp() < 1 ||
                  mesh.dp() * mesh.pp() * mesh.tp() != world))
    return Status::error("mesh dp=" + str(mesh.dp()) + ",pp=" + str(mesh.pp()) +
                         ",tp=" + str(mesh.tp()) + " does not have the world size " + str(world));
  for (int i = 0; i < world; ++i) {
    const RankInfo &ri = plan.ranks(i);
    const std::string where = "rank " + std::to_string(i);
    if (ri.rank() != i)
      return Status::error(where, "entry is for rank " + str(ri.rank()));
    if (ri.device().type() != DEVICE_CPU && ri.device().type() != DEVICE_CUDA)
      return Status::error(where, "device type " + std::to_string(ri.device().type()) +
                                      " is not cpu or cuda");
    if (ri.device().index() < 0)
      return Status::error(where, "device index " + str(ri.device().index()) + " is below 0");
    // One device kind for the whole plan: the runtime checks every instruction against that
    // kind's kernels, and the collectives run on one kind of communicator (host or NCCL).
    if (i > 0 && ri.device().type() != plan.ranks(0).device().type())
      return Status::error(where, std::string("runs on a ") +
                                      (ri.device().type() == DEVICE_CUDA ? "cuda" : "cpu") +
                                      " device but rank 0 on a " +
                                      (ri.device().type() == DEVICE_CUDA ? "cpu" : "cuda") +
                                      " one: all ranks of a plan use one device type");
    if (ri.program() < 0 || ri.program() >= plan.programs_size())
      return Status::error(where, "program " + str(ri.program()) + " is not in [0, " +
                                      std::to_string(plan.programs_size()) + ")");
    if (meshSet) {
      if (ri.dp() < 0 || ri.dp() >= mesh.dp() || ri.pp() < 0 || ri.pp() >= mesh.pp() ||
          ri.tp() < 0 || ri.tp() >= mesh.tp() ||
          ri.tp() + mesh.tp() * (ri.dp() + mesh.dp() * ri.pp()) != i)
        return Status::error(where, "mesh coordinates (dp " + str(ri.dp()) + ", pp " +
                                        str(ri.pp()) + ", tp " + str(ri.tp()) +
                                        ") are not this rank's");
    }
    // The rank's group along each axis, and its index in it.
    std::map<std::string, std::pair<int, int>> groupOf; // axis -> (group size, index)
    for (int32_t g : ri.groups()) {
      if (g < 0 || g >= plan.groups_size())
        return Status::error(where, "group id " + str(g) + " is not in [0, " +
                                        std::to_string(plan.groups_size()) + ")");
      const CommGroup &group = plan.groups(g);
      int index = -1;
      for (int k = 0; k < group.ranks_size(); ++k)
        if (group.ranks(k) == i)
          index = k;
      if (index < 0)
        return Status::error(where, "is not a member of its group " + str(g));
      if (!groupOf.emplace(group.axis(), std::make_pair(group.ranks_size(), index)).second)
        return Status::error(where, "has two " + group.axis() + " groups");
    }
    if (hasHost && ri.program() != 0)
      return Status::error(where, "runs program " + str(ri.program()) +
                                      "; the workers of a parameter host run program 0");
    const RankProgram &r = plan.programs(ri.program());
    // RankProgram.ranks, written with the program, must name the rank: programs that were
    // swapped, duplicated or dropped in the file leave a rank on another rank's program.
    if (r.ranks_size() > 0 && std::find(r.ranks().begin(), r.ranks().end(), i) == r.ranks().end())
      return Status::error(where, "runs program " + str(ri.program()) +
                                      ", which was compiled for " + rankList(r) +
                                      " (programs swapped, duplicated or missing in the file?)");
    if (plan.mode() == MODE_TRAINING && meshSet &&
        r.training().loss_output().empty() != (ri.pp() + 1 < mesh.pp()))
      return Status::error(where, ri.pp() + 1 < mesh.pp()
                                      ? "computes a loss but is not the pipeline's last stage"
                                      : "is the last pipeline stage but computes no loss");
    for (int k = 0; k < r.instructions_size(); ++k) {
      if (!r.instructions(k).has_collective())
        continue;
      const Collective &c = r.instructions(k).collective();
      const std::string at =
          where + ": instruction " + std::to_string(k) + " (collective " + q(c.name()) + ")";
      auto it = groupOf.find(c.group());
      if (it == groupOf.end())
        return Status::error(at, "the rank has no " + c.group() + " group");
      const auto [size, self] = it->second;
      const bool p2p = c.kind() == COLLECTIVE_SEND || c.kind() == COLLECTIVE_RECV;
      if ((p2p || c.kind() == COLLECTIVE_BROADCAST) &&
          (c.peer() < 0 || c.peer() >= size || (p2p && c.peer() == self)))
        return Status::error(at, "peer " + str(c.peer()) + " is not another rank of its " +
                                     c.group() + " group of " + std::to_string(size));
      if (c.kind() == COLLECTIVE_ALL_GATHER || c.kind() == COLLECTIVE_REDUCE_SCATTER) {
        const uint64_t in = r.buffers(c.inputs(0)).size_bytes();
        const uint64_t out = r.buffers(c.outputs(0)).size_bytes();
        const bool gather = c.kind() == COLLECTIVE_ALL_GATHER;
        if ((gather ? in : out) * static_cast<uint64_t>(size) != (gather ? out : in))
          return Status::error(at, "operand sizes " + str(in) + " -> " + str(out) +
                                       " bytes do not fit a group of " + std::to_string(size));
      }
    }
  }
  for (int p = 0; p < plan.programs_size(); ++p)
    for (int32_t k : plan.programs(p).ranks())
      if (k < 0 || k >= world || plan.ranks(k).program() != p)
        return Status::error(
            "program " + std::to_string(p),
            "was compiled for " + rankList(plan.programs(p)) + ", but rank " + str(k) +
                (k < 0 || k >= world ? " is not in the plan"
                                     : " runs program " + str(plan.ranks(k).program())));
  // Metadata last, so that a fuzzer's mutations reach the structural checks above.
  if (plan.mode() != MODE_INFERENCE && plan.mode() != MODE_TRAINING)
    return Status::error("mode " + std::to_string(plan.mode()) +
                         " is not inference (1) or training (2)");
  for (const ExternalFile &x : plan.model().external_data()) {
    const std::filesystem::path loc(x.location());
    bool up = false;
    for (const auto &part : loc)
      up = up || part == "..";
    if (x.location().empty() || loc.is_absolute() || up)
      return Status::error("external data location " + q(x.location()) +
                           " is not a path inside the model's folder");
  }
  return checkModelChecksums(plan.model());
}

/// One recorded checksum: a known algorithm and its hex form.
Status checkChecksum(const std::string &what, const std::string &checksum,
                     ChecksumAlgorithm algorithm) {
  if (!isKnownChecksumAlgorithm(algorithm))
    return Status::error(what + " checksum: algorithm " + checksumAlgorithmName(algorithm) +
                         " is not one this dtc knows (" +
                         checksumAlgorithmName(CHECKSUM_XXH3_128) + ", " +
                         checksumAlgorithmName(CHECKSUM_XXH3_128_CHUNKED) +
                         "); recompile the plan");
  if (!isLowerHex(checksum, 32))
    return Status::error(what + " checksum " + q(checksum) + " is not 32 lowercase hex digits");
  return Status::ok();
}

} // namespace

Status checkModelChecksums(const ModelRef &model) {
  if (!model.checksum().empty() || model.checksum_algorithm() != CHECKSUM_UNSPECIFIED)
    DTC_RETURN_IF_ERROR(checkChecksum("model", model.checksum(), model.checksum_algorithm()));
  for (const ExternalFile &x : model.external_data())
    DTC_RETURN_IF_ERROR(
        checkChecksum("external data " + q(x.location()), x.checksum(), x.checksum_algorithm()));
  return Status::ok();
}

Status validatePlan(const Plan &plan, const std::string &where, const KernelCheck &kernelCheck) {
  return checkPlan(plan, kernelCheck).withContext(where.empty() ? "plan" : "plan " + where);
}

} // namespace dtc::plan
