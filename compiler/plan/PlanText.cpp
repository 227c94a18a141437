// The plan's canonical text form (golden tests, `dtc-compile --emit plan-text`) and its
// fingerprint. The text is a pure function of the plan's fields: names are quoted and escaped so
// that no name can break a line, floats print with %.9g, maps print sorted, constant bytes print
// as values (8 elements or fewer) or an XXH3-128 prefix. It is total: invalid plans print too.
#include "compiler/ir/Sharding.h"
#include "compiler/ir/Types.h"
#include "compiler/plan/Plan.h"

#include <xxhash.h>

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

namespace dtc::plan {
namespace {

/// Hex digits of a constant's XXH3-128 shown in the text.
constexpr size_t kHashPrefix = 16;
/// Constants with at most this many elements print their values.
constexpr uint64_t kMaxShownElements = 8;

/// True when `s` is well-formed UTF-8 (so bytes >= 0x80 can be printed as they are).
bool isValidUtf8(const std::string &s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size())
      return false;
    for (size_t k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80)
        return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
      return false;
    i += len;
  }
  return true;
}

/// `s` in double quotes; quotes, backslashes and control bytes escaped (\n, \t, \r, \xHH).
/// Bytes >= 0x80 are kept when the string is valid UTF-8 and escaped otherwise.
std::string quote(const std::string &s) {
  const bool keepHigh = isValidUtf8(s);
  std::string out = "\"";
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\r':
      out += "\\r";
      break;
    default:
      if (c < 0x20 || c == 0x7F || (c >= 0x80 && !keepHigh)) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
        out += buf;
      } else {
        out += ch;
      }
    }
  }
  out += '"';
  return out;
}

/// An identifier-like token (op type, attribute name) as is; anything else quoted.
std::string token(const std::string &s) {
  bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '.' || ch == '-';
  });
  return plain ? s : quote(s);
}

/// "xxh3-128:<hex>"; "none" when no checksum is recorded.
std::string checksumText(const std::string &checksum, ChecksumAlgorithm algorithm) {
  if (checksum.empty() && algorithm == CHECKSUM_UNSPECIFIED)
    return "none";
  return checksumAlgorithmName(algorithm) + ":" + token(checksum);
}

std::string formatFloat(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string formatDouble(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string dtypeText(int32_t dtype) {
  if (ir::isKnownDType(dtype))
    return ir::dtypeName(static_cast<ir::DType>(dtype));
  return "dtype(" + std::to_string(dtype) + ")";
}

std::string shapeText(const google::protobuf::RepeatedField<int64_t> &shape) {
  std::string out = "[";
  for (int i = 0; i < shape.size(); ++i) {
    if (i)
      out += ',';
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

std::string modeText(int mode) {
  switch (mode) {
  case MODE_UNSPECIFIED:
    return "unspecified";
  case MODE_INFERENCE:
    return "inference";
  case MODE_TRAINING:
    return "training";
  default:
    return "mode(" + std::to_string(mode) + ")";
  }
}

std::string deviceText(const Device &d) {
  std::string type;
  switch (d.type()) {
  case DEVICE_UNSPECIFIED:
    type = "unspecified";
    break;
  case DEVICE_CPU:
    type = "cpu";
    break;
  case DEVICE_CUDA:
    type = "cuda";
    break;
  default:
    type = "device(" + std::to_string(d.type()) + ")";
    break;
  }
  return type + ":" + std::to_string(d.index());
}

std::string kindText(int kind) {
  switch (kind) {
  case BUFFER_KIND_UNSPECIFIED:
    return "unspecified";
  case BUFFER_PARAMETER:
    return "param";
  case BUFFER_GRADIENT:
    return "grad";
  case BUFFER_ACTIVATION:
    return "activation";
  case BUFFER_OPTIMIZER_STATE:
    return "opt_state";
  case BUFFER_INPUT:
    return "input";
  case BUFFER_OUTPUT:
    return "output";
  case BUFFER_CONSTANT:
    return "constant";
  default:
    return "kind(" + std::to_string(kind) + ")";
  }
}

/// Element count of a shape; nullopt for negative dims or overflow.
std::optional<uint64_t> elementCount(const google::protobuf::RepeatedField<int64_t> &shape) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n))
      return std::nullopt;
  }
  return n;
}

template <typename T> T load(const std::string &data, size_t i) {
  T v;
  std::memcpy(&v, data.data() + i * sizeof(T), sizeof(T));
  return v;
}

/// "[1, 2, 3]" for small tensors of printable element types whose data has the right size,
/// otherwise "xxh3:<prefix>".
std::string dataText(int32_t dtype, const google::protobuf::RepeatedField<int64_t> &shape,
                     const std::string &data) {
  std::optional<uint64_t> count = elementCount(shape);
  const int64_t elemSize =
      ir::isKnownDType(dtype) ? ir::dtypeSize(static_cast<ir::DType>(dtype)) : 0;
  uint64_t bytes = 0;
  bool printable = count && elemSize > 0 && *count <= kMaxShownElements &&
                   !__builtin_mul_overflow(*count, static_cast<uint64_t>(elemSize), &bytes) &&
                   bytes == data.size();
  auto dt = static_cast<ir::DType>(dtype);
  if (dt == ir::DType::kFloat16 || dt == ir::DType::kBFloat16)
    printable = false;
  if (!printable)
    return "xxh3:" + checksumHex(data).substr(0, kHashPrefix);
  std::string out = "[";
  for (uint64_t i = 0; i < *count; ++i) {
    if (i)
      out += ", ";
    switch (dt) {
    case ir::DType::kFloat32:
      out += formatFloat(load<float>(data, i));
      break;
    case ir::DType::kFloat64:
      out += formatDouble(load<double>(data, i));
      break;
    case ir::DType::kUInt8:
      out += std::to_string(load<uint8_t>(data, i));
      break;
    case ir::DType::kInt8:
      out += std::to_string(load<int8_t>(data, i));
      break;
    case ir::DType::kBool:
      out += std::to_string(load<uint8_t>(data, i));
      break;
    case ir::DType::kUInt16:
      out += std::to_string(load<uint16_t>(data, i));
      break;
    case ir::DType::kInt16:
      out += std::to_string(load<int16_t>(data, i));
      break;
    case ir::DType::kUInt32:
      out += std::to_string(load<uint32_t>(data, i));
      break;
    case ir::DType::kInt32:
      out += std::to_string(load<int32_t>(data, i));
      break;
    case ir::DType::kUInt64:
      out += std::to_string(load<uint64_t>(data, i));
      break;
    case ir::DType::kInt64:
      out += std::to_string(load<int64_t>(data, i));
      break;
    default:
      out += "?";
      break;
    }
  }
  return out + "]";
}

std::string attrText(const Attr &a) {
  std::string out = token(a.name()) + "=";
  switch (a.value_case()) {
  case Attr::kI:
    return out + std::to_string(a.i());
  case Attr::kF:
    return out + formatFloat(a.f());
  case Attr::kS:
    return out + quote(a.s());
  case Attr::kInts: {
    out += "[";
    for (int i = 0; i < a.ints().values_size(); ++i)
      out += (i ? ", " : "") + std::to_string(a.ints().values(i));
    return out + "]";
  }
  case Attr::kFloats: {
    out += "[";
    for (int i = 0; i < a.floats().values_size(); ++i)
      out += (i ? ", " : "") + formatFloat(a.floats().values(i));
    return out + "]";
  }
  case Attr::kStrings: {
    out += "[";
    for (int i = 0; i < a.strings().values_size(); ++i)
      out += (i ? ", " : "") + quote(a.strings().values(i));
    return out + "]";
  }
  case Attr::kT: {
    const TensorValue &t = a.t();
    return out + dtypeText(t.dtype()) + shapeText(t.shape()) + " " +
           dataText(t.dtype(), t.shape(), t.data());
  }
  case Attr::VALUE_NOT_SET:
    return out + "?";
  }
  return out + "?";
}

std::string operand(int32_t index) { return index < 0 ? "_" : "%" + std::to_string(index); }

void appendTraining(std::string &out, const Training &t) {
  out += "  training loss=" + quote(t.loss_output()) +
         " prediction=" + quote(t.prediction_output()) + " label=" + quote(t.label_input()) +
         " ignore_index=" + std::to_string(t.ignore_index()) +
         " optimizer_begin=" + std::to_string(t.optimizer_begin()) +
         (t.forward_end() ? " forward_end=" + std::to_string(t.forward_end()) : "") +
         " lr_input=" + quote(t.lr_input()) + " step_input=" + quote(t.step_input()) +
         " rng_input=" + quote(t.rng_input()) +
         (t.tp_rank_input().empty() ? "" : " tp_rank_input=" + quote(t.tp_rank_input())) +
         (t.dp_rank_input().empty() ? "" : " dp_rank_input=" + quote(t.dp_rank_input())) + "\n";
  for (const TrainedParameter &p : t.parameters()) {
    out += "    trains " + quote(p.name()) + " buffer=" + std::to_string(p.buffer()) +
           " gradient=" + std::to_string(p.gradient()) + " state=[";
    for (int i = 0; i < p.state_size(); ++i)
      out += (i ? "," : "") + std::to_string(p.state(i));
    out += "]\n";
  }
  for (int32_t b : t.state_buffers())
    out += "    state buffer=" + std::to_string(b) + "\n";
}

void appendProgram(std::string &out, const Plan &plan, int index, const RankProgram &r) {
  out += "program " + std::to_string(index) + " ranks=[";
  for (int i = 0; i < r.ranks_size(); ++i)
    out += (i ? "," : "") + std::to_string(r.ranks(i));
  out += "] arena=" + std::to_string(r.arena_bytes()) +
         " no_reuse=" + std::to_string(r.no_reuse_bytes()) +
         " alignment=" + std::to_string(r.alignment()) + "\n";
  for (int i = 0; i < r.buffers_size(); ++i) {
    const Buffer &b = r.buffers(i);
    out += "  buffer %" + std::to_string(i) + " " + quote(b.name()) + " " + kindText(b.kind()) +
           " " + dtypeText(b.dtype()) + shapeText(b.shape()) + " @" + std::to_string(b.offset()) +
           "+" + std::to_string(b.size_bytes());
    if (b.layout() == LAYOUT_CHANNELS_LAST)
      out += " channels-last";
    else if (b.layout() != LAYOUT_ROW_MAJOR)
      out += " layout(" + std::to_string(b.layout()) + ")";
    if (!b.source().empty())
      out += " source=" + quote(b.source());
    if (b.has_shard() && b.shard().group() == "ps")
      out += " shard=rows[" + std::to_string(b.shard().begin()) + ",+" +
             std::to_string(b.shape_size() ? b.shape(0) : 1) + ")(ps)";
    else if (b.has_shard())
      out += " shard=" +
             ir::Sharding::split(b.shard().axis(), b.shard().parts(), b.shard().blocks()).text() +
             "(" + b.shard().group() + ")";
    // Shared or not, the same contents print the same: sharing is how the file stores them.
    if (b.kind() == BUFFER_CONSTANT || !b.data().empty() || b.shared_data() != 0)
      out += " data=" + dataText(b.dtype(), b.shape(), bufferData(plan, b));
    if (b.shared_data() > static_cast<uint32_t>(plan.constants_size()))
      out += " shared_data=" + std::to_string(b.shared_data()) + "(missing)";
    out += "\n";
  }
  for (const DataBinding &d : r.data_bindings())
    out += "  data " + quote(d.array()) + " -> input " + quote(d.input()) +
           " shard_axis=" + std::to_string(d.shard_axis()) + "\n";
  if (r.has_training())
    appendTraining(out, r.training());
  for (const Binding &in : r.inputs())
    out += "  input " + quote(in.name()) + " -> " + operand(in.buffer()) + "\n";
  for (const Binding &o : r.outputs())
    out += "  output " + quote(o.name()) + " -> " + operand(o.buffer()) + "\n";
  for (int i = 0; i < r.instructions_size(); ++i) {
    const Instruction &inst = r.instructions(i);
    out += "  " + std::to_string(i) + ": ";
    switch (inst.kind_case()) {
    case Instruction::kKernel: {
      const KernelCall &k = inst.kernel();
      for (int j = 0; j < k.outputs_size(); ++j)
        out += (j ? ", " : "") + operand(k.outputs(j));
      if (k.outputs_size() > 0)
        out += " = ";
      if (!k.domain().empty())
        out += token(k.domain()) + "::";
      out += token(k.op()) + "(";
      for (int j = 0; j < k.inputs_size(); ++j)
        out += (j ? ", " : "") + operand(k.inputs(j));
      out += ")";
      if (k.attributes_size() > 0) {
        out += " {";
        for (int j = 0; j < k.attributes_size(); ++j)
          out += (j ? ", " : "") + attrText(k.attributes(j));
        out += "}";
      }
      if (!k.node().empty())
        out += " node=" + quote(k.node());
      break;
    }
    case Instruction::kCopy:
      out += "copy " + operand(inst.copy().src()) + " -> " + operand(inst.copy().dst());
      break;
    case Instruction::kCollective: {
      const Collective &c = inst.collective();
      for (int j = 0; j < c.outputs_size(); ++j)
        out += (j ? ", " : "") + operand(c.outputs(j));
      static const char *const kKinds[] = {
          "collective(0)", "all-reduce", "all-gather", "reduce-scatter",
          "broadcast",     "send",       "recv"};
      const bool known = c.kind() >= 0 && c.kind() <= COLLECTIVE_RECV;
      const bool reduces =
          c.kind() == COLLECTIVE_ALL_REDUCE || c.kind() == COLLECTIVE_REDUCE_SCATTER;
      out += std::string(c.outputs_size() > 0 ? " = " : "") +
             (known ? kKinds[c.kind()] : "collective(" + std::to_string(c.kind()) + ")") +
             (!reduces                ? ""
              : c.op() == REDUCE_SUM  ? "-sum"
              : c.op() == REDUCE_MEAN ? "-mean"
              : c.op() == REDUCE_MAX  ? "-max"
                                      : "-op(" + std::to_string(c.op()) + ")") +
             "(";
      for (int j = 0; j < c.inputs_size(); ++j)
        out += (j ? ", " : "") + operand(c.inputs(j));
      out += ") group=" + quote(c.group());
      if (c.kind() == COLLECTIVE_SEND || c.kind() == COLLECTIVE_RECV ||
          c.kind() == COLLECTIVE_BROADCAST)
        out += " peer=" + std::to_string(c.peer());
      if (c.kind() == COLLECTIVE_SEND || c.kind() == COLLECTIVE_RECV)
        out += " tag=" + std::to_string(c.tag());
      out += " name=" + quote(c.name()) + " async";
      break;
    }
    case Instruction::kWait:
      out += "wait " + std::to_string(inst.wait().collective());
      break;
    case Instruction::KIND_NOT_SET:
      out += "<empty>";
      break;
    }
    out += "\n";
  }
}

} // namespace

/// The shortest text that reads back as the same float (hyperparameters: 0.8, not 0.800000012).
static std::string floatText(float v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

std::string pipelineSlotText(const PipelineSlot &slot) {
  return std::string(slot.kind() == PipelineSlot::FORWARD    ? "F"
                     : slot.kind() == PipelineSlot::BACKWARD ? "B"
                                                             : "W") +
         std::to_string(slot.micro_batch()) +
         (slot.chunk() ? "." + std::to_string(slot.chunk()) : "");
}

std::string planText(const Plan &plan, std::optional<int> rank) {
  std::string out = "plan v" + std::to_string(plan.format_version()) +
                    " mode=" + modeText(plan.mode()) +
                    " world_size=" + std::to_string(plan.world_size()) + "\n";
  const ModelRef &m = plan.model();
  out += "model " + quote(m.path()) +
         " checksum=" + checksumText(m.checksum(), m.checksum_algorithm()) +
         " size=" + std::to_string(m.size_bytes()) +
         (m.untie_initializers() ? " untie_initializers" : "") + "\n";
  for (const ExternalFile &x : m.external_data())
    out += "  external " + quote(x.location()) +
           " checksum=" + checksumText(x.checksum(), x.checksum_algorithm()) +
           " size=" + std::to_string(x.size_bytes()) + "\n";
  // Protobuf map iteration order is unspecified: print sorted.
  std::vector<std::pair<std::string, int64_t>> bound(plan.bound_dims().begin(),
                                                     plan.bound_dims().end());
  std::sort(bound.begin(), bound.end());
  for (const auto &[name, value] : bound)
    out += "bound " + token(name) + "=" + std::to_string(value) + "\n";
  if (plan.has_mesh())
    out += "mesh " + quote(plan.mesh().strategy()) + " dp=" + std::to_string(plan.mesh().dp()) +
           " pp=" + std::to_string(plan.mesh().pp()) + " tp=" + std::to_string(plan.mesh().tp()) +
           " microbatches=" + std::to_string(plan.mesh().microbatches()) +
           (plan.mesh().schedule().empty() ? "" : " schedule=" + token(plan.mesh().schedule())) +
           (plan.mesh().virtual_stages() > 1
                ? " virtual_stages=" + std::to_string(plan.mesh().virtual_stages())
                : "") +
           "\n";
  for (const CommGroup &g : plan.groups()) {
    out += "group " + std::to_string(g.id()) + " " + token(g.axis()) + " [";
    for (int i = 0; i < g.ranks_size(); ++i)
      out += (i ? ", " : "") + std::to_string(g.ranks(i));
    out += "]\n";
  }
  if (plan.has_hyperparameters()) {
    const Hyperparameters &h = plan.hyperparameters();
    out += "hyperparameters batch_size=" + std::to_string(h.batch_size());
    if (plan.mode() == MODE_TRAINING) {
      out += " loss=" + token(h.loss()) + " optimizer=" + token(h.optimizer()) +
             " lr=" + floatText(h.lr()) + " momentum=" + floatText(h.momentum()) +
             " nesterov=" + (h.nesterov() ? "1" : "0") +
             " weight_decay=" + floatText(h.weight_decay()) + " beta1=" + floatText(h.beta1()) +
             " beta2=" + floatText(h.beta2()) + " eps=" + floatText(h.eps()) +
             " lr_schedule=" + token(h.lr_schedule()) +
             " warmup_steps=" + std::to_string(h.warmup_steps()) +
             " step_size=" + std::to_string(h.step_size()) + " gamma=" + floatText(h.gamma()) +
             " total_steps=" + std::to_string(h.total_steps()) +
             " min_lr=" + floatText(h.min_lr()) +
             " clip_grad_norm=" + floatText(h.clip_grad_norm()) +
             " grad_accum_steps=" + std::to_string(h.grad_accum_steps()) +
             " freeze=" + quote(h.freeze());
      if (plan.world_size() > 1 || h.bucket_mb() != 0 || h.sync_batchnorm())
        out += " bucket_mb=" + floatText(h.bucket_mb()) +
               " sync_batchnorm=" + (h.sync_batchnorm() ? "1" : "0");
      if (h.zero())
        out += " zero=" + std::to_string(h.zero());
    }
    out += "\n";
  }
  // The rank table, then each program once (data-parallel replicas share theirs).
  std::vector<bool> shown(static_cast<size_t>(plan.programs_size()), false);
  for (const RankInfo &ri : plan.ranks()) {
    if (rank && *rank != ri.rank())
      continue;
    out += "rank " + std::to_string(ri.rank()) + " device=" + deviceText(ri.device()) +
           " program=" + std::to_string(ri.program()) + " dp=" + std::to_string(ri.dp()) +
           " pp=" + std::to_string(ri.pp()) + " tp=" + std::to_string(ri.tp()) + " groups=[";
    for (int i = 0; i < ri.groups_size(); ++i)
      out += (i ? "," : "") + std::to_string(ri.groups(i));
    out += "]\n";
    if (ri.program() >= 0 && ri.program() < plan.programs_size())
      shown[static_cast<size_t>(ri.program())] = true;
  }
  // Parameter servers / central storage: the servers' programs and where each shard lives.
  if (plan.has_parameter_host()) {
    const ParameterHostInfo &h = plan.parameter_host();
    out += std::string("parameter_host ") +
           (h.kind() == ParameterHostInfo::PARAMETER_SERVERS  ? "ps"
            : h.kind() == ParameterHostInfo::CENTRAL_STORAGE ? "cs"
                                                              : "kind=" + std::to_string(h.kind())) +
           " workers=" + std::to_string(h.workers()) +
           " staleness=" + std::to_string(h.staleness()) +
           (h.async_rule() == ParameterHostInfo::AGGREGATE      ? " async_rule=aggregate"
            : h.async_rule() == ParameterHostInfo::STALENESS_LR ? " async_rule=staleness-lr"
                                                                : "") +
           "\n";
    for (int s = 0; s < h.servers_size(); ++s) {
      out += "  server " + std::to_string(s) + " program=" + std::to_string(h.servers(s).program()) +
             " shards=[";
      for (int k = 0; k < h.servers(s).shards_size(); ++k)
        out += (k ? "," : "") + std::to_string(h.servers(s).shards(k));
      out += "]\n";
      const int32_t program = h.servers(s).program();
      if (!rank && program >= 0 && program < plan.programs_size())
        shown[static_cast<size_t>(program)] = true;
    }
    for (int k = 0; k < h.shards_size(); ++k) {
      const ParameterShard &sh = h.shards(k);
      out += "  shard " + std::to_string(k) + " " + quote(sh.parameter()) +
             " rows=[" + std::to_string(sh.begin()) + ",+" + std::to_string(sh.rows()) +
             ") server=" + std::to_string(sh.server()) +
             " parameter=" + std::to_string(sh.server_parameter()) + "\n";
    }
  }
  // Pipelines: each stage's schedule as one row of slots (Fk / Bk: micro-batch k's forward or
  // backward pass, Fk.c that of chunk c, @ the instruction where it starts).
  for (int p = 0; p < plan.programs_size(); ++p) {
    const RankProgram &r = plan.programs(p);
    if (r.schedule_size() == 0 || !shown[static_cast<size_t>(p)])
      continue;
    out += "schedule program " + std::to_string(p) + ":";
    for (const PipelineSlot &slot : r.schedule())
      out += " " + pipelineSlotText(slot) + "@" + std::to_string(slot.first_instruction());
    out += "\n";
  }
  for (int p = 0; p < plan.programs_size(); ++p)
    if (shown[static_cast<size_t>(p)] || (!rank && plan.ranks_size() == 0))
      appendProgram(out, plan, p, plan.programs(p));
  return out;
}

std::string fingerprint(const PlanFile &file) {
  // Version tag, then length-prefixed parts: no two different sequences of parts hash alike.
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                 &XXH3_freeState);
  if (!state || XXH3_128bits_reset(state.get()) != XXH_OK)
    return std::string(); // out of memory: never equal to a real fingerprint
  auto part = [&](const char *data, size_t size) {
    uint8_t length[8];
    for (int i = 0; i < 8; ++i)
      length[i] = static_cast<uint8_t>(static_cast<uint64_t>(size) >> (8 * i));
    XXH3_128bits_update(state.get(), length, sizeof length);
    XXH3_128bits_update(state.get(), data, size);
  };
  static constexpr char kTag[] = "dtc plan fingerprint 2";
  part(kTag, sizeof kTag - 1);
  // The model is identified by its checksum; where it lies (a path relative to the plan, or to
  // the directory dtc-compile ran in) does not change what the plan computes. planText of the
  // header prints neither programs nor constants (they are hashed as bytes below).
  std::string header;
  if (file.header.model().path().empty()) {
    header = planText(file.header);
  } else {
    Plan copy = file.header;
    copy.mutable_model()->clear_path();
    header = planText(copy);
  }
  part(header.data(), header.size());
  for (const std::string &c : file.header.constants())
    part(c.data(), c.size());
  for (const auto &[offset, length] : file.programs)
    part(file.bytes.data() + offset, length);
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, XXH3_128bits_digest(state.get()));
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char byte : canonical.digest) {
    out += kHex[byte >> 4];
    out += kHex[byte & 15];
  }
  return out;
}

std::string fingerprint(const Plan &plan) {
  // The file writePlanFile writes, split as a reader splits it.
  Expected<std::string> bytes = serializePlan(plan, "plan");
  if (!bytes)
    return std::string(); // a summary or a plan above 2 GiB: never equal to a real fingerprint
  Expected<PlanFile> file = splitPlan(bytes.takeValue(), "plan");
  if (!file) {
    // A plan that does not read back (no format version, an unknown checksum algorithm):
    // the header is hashed as it is.
    PlanFile whole;
    whole.header = plan;
    whole.header.clear_programs();
    std::string all;
    for (const RankProgram &p : plan.programs()) {
      const size_t at = all.size();
      all += p.SerializeAsString();
      whole.programs.emplace_back(at, all.size() - at);
    }
    whole.bytes = std::move(all);
    return fingerprint(whole);
  }
  return fingerprint(*file);
}

} // namespace dtc::plan
