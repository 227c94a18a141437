// libFuzzer target fuzz_plan: arbitrary bytes through parsePlan, planText/fingerprint (of the
// plan and of the split file), validatePlan and each rank's read (planForRank) (first accepting
// every kernel call, then with the CPU kernels' own checks). Beyond "no crash" it checks that a
// validated plan keeps every buffer inside its arena and every operand in range, and it runs small
// validated plans (no weights) on zeroed inputs, so the kernels meet hostile shapes and attributes
// too.
#include "compiler/plan/Plan.h"
#include "runtime/Executor.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace {

using namespace dtc::plan;

/// What validatePlan promises to the executor; traps when a validated plan breaks it.
void checkValidatedInvariants(const Plan &plan) {
  if (plan.ranks_size() != plan.world_size() || plan.programs_size() < 1)
    __builtin_trap();
  for (const RankInfo &ri : plan.ranks())
    if (ri.program() < 0 || ri.program() >= plan.programs_size())
      __builtin_trap();
  for (const RankProgram &r : plan.programs()) {
    const int n = r.buffers_size();
    for (const Buffer &b : r.buffers()) {
      uint64_t end = 0;
      if (__builtin_add_overflow(b.offset(), b.size_bytes(), &end) || end > r.arena_bytes())
        __builtin_trap();
      // A constant holds its bytes inline or names a shared entry of Plan.constants.
      const std::string *bytes = &b.data();
      if (b.kind() == BUFFER_CONSTANT && b.shared_data() > 0) {
        if (b.shared_data() > static_cast<uint32_t>(plan.constants_size()) || !b.data().empty())
          __builtin_trap();
        bytes = &plan.constants(static_cast<int>(b.shared_data() - 1));
      }
      if (b.kind() == BUFFER_CONSTANT && bytes->size() != b.size_bytes())
        __builtin_trap();
    }
    for (const Instruction &inst : r.instructions()) {
      if (inst.has_kernel()) {
        for (int32_t i : inst.kernel().inputs())
          if (i < -1 || i >= n)
            __builtin_trap();
        for (int32_t o : inst.kernel().outputs())
          if (o < 0 || o >= n)
            __builtin_trap();
      } else if (inst.has_copy()) {
        const Copy &c = inst.copy();
        if (c.src() < 0 || c.src() >= n || c.dst() < 0 || c.dst() >= n ||
            r.buffers(c.src()).size_bytes() != r.buffers(c.dst()).size_bytes())
          __builtin_trap();
      } else if (inst.has_collective()) {
        for (int32_t i : inst.collective().inputs())
          if (i < 0 || i >= n)
            __builtin_trap();
        for (int32_t o : inst.collective().outputs())
          if (o < 0 || o >= n)
            __builtin_trap();
      } else if (inst.has_wait()) {
        const int32_t c = inst.wait().collective();
        if (c < 0 || c >= r.instructions_size() || !r.instructions(c).has_collective())
          __builtin_trap();
      } else {
        __builtin_trap();
      }
    }
    for (const Binding &b : r.inputs())
      if (b.buffer() < 0 || b.buffer() >= n)
        __builtin_trap();
    for (const Binding &b : r.outputs())
      if (b.buffer() < 0 || b.buffer() >= n)
        __builtin_trap();
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string bytes(reinterpret_cast<const char *>(data), size);
  dtc::Expected<Plan> plan = parsePlan(bytes, "fuzz");
  if (!plan) {
    if (plan.status().message().rfind("fuzz: ", 0) != 0)
      __builtin_trap();
    return 0;
  }
  // The text form is total and deterministic, also for invalid plans; so is the fingerprint,
  // which leaves the model's path out.
  const std::string text = planText(*plan);
  Plan moved = *plan;
  moved.mutable_model()->set_path(plan->model().path() + "/elsewhere");
  const std::string print = fingerprint(*plan);
  if (planText(*plan) != text || print.size() != 32 || fingerprint(moved) != print)
    __builtin_trap();
  (void)planText(*plan, 0);
  // What parsePlan reads, a rank reads as a split file: the file's fingerprint is total and
  // does not depend on the model's path either.
  dtc::Expected<PlanFile> file = splitPlan(bytes, "fuzz");
  if (!file)
    __builtin_trap();
  const std::string filePrint = fingerprint(*file);
  PlanFile movedFile = *file;
  movedFile.header.mutable_model()->set_path(moved.model().path());
  if (filePrint.size() != 32 || fingerprint(movedFile) != filePrint)
    __builtin_trap();

  KernelCheck acceptAll = [](const RankProgram &, const KernelCall &) { return dtc::Status::ok(); };
  dtc::Status status = validatePlan(*plan, "fuzz", acceptAll);
  if (!status.isOk()) {
    if (status.message().rfind("plan fuzz: ", 0) != 0)
      __builtin_trap();
    return 0;
  }
  checkValidatedInvariants(*plan);
  // Every rank's read of a valid plan (its own program in full, the others as summaries)
  // parses and validates too: what the full plan passes, no rank refuses.
  for (int rank = 0; rank < plan->world_size() && rank < 4; ++rank) {
    dtc::Expected<Plan> mine = planForRank(*file, rank, "fuzz");
    if (!mine || !validatePlan(*mine, "fuzz", acceptAll).isOk())
      __builtin_trap();
    checkValidatedInvariants(*mine);
  }

  // Execute small weightless one-rank CPU plans: Executor::create runs the real kernel checks.
  const RankProgram &program = programOf(*plan, 0);
  if (plan->world_size() != 1 || program.arena_bytes() > (uint64_t{16} << 20) ||
      program.instructions_size() > 64 || plan->ranks(0).device().type() != DEVICE_CPU)
    return 0;
  for (const Buffer &b : program.buffers())
    if (b.kind() == BUFFER_PARAMETER)
      return 0;
  std::vector<dtc::rt::HostArray> inputs;
  for (const Binding &in : program.inputs()) {
    const Buffer &b = program.buffers(in.buffer());
    dtc::rt::HostArray a;
    a.name = in.name();
    a.dtype = static_cast<dtc::ir::DType>(b.dtype());
    a.shape.assign(b.shape().begin(), b.shape().end());
    a.bytes.assign(b.size_bytes(), '\0');
    inputs.push_back(std::move(a));
  }
  dtc::rt::ExecutorOptions opts;
  opts.threads = 1;
  auto ex = dtc::rt::Executor::create(std::move(*plan), opts);
  if (!ex)
    return 0;
  for (const dtc::rt::HostArray &a : inputs)
    if (!(*ex)->setInput(a).isOk())
      return 0;
  (void)(*ex)->run();
  return 0;
}
