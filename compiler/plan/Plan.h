// The plan (compiler/plan/plan.proto, DESIGN.md section 7): reading and writing plan files, the
// canonical text form used by golden tests and `dtc-compile --emit plan-text`, the fingerprint
// every rank compares at start, and validation before anything runs.
#pragma once

#include "compiler/plan/plan.pb.h"
#include "compiler/support/Status.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace dtc::plan {

/// Version written into Plan.format_version; readers reject any other value.
/// 2: per-program training sections and data bindings, a rank table and a program list
/// (identical rank programs stored once), group ids, point-to-point transfers.
inline constexpr uint32_t kPlanFormatVersion = 2;
/// Arena alignment of CPU plans, bytes.
inline constexpr uint64_t kCpuAlignment = 64;

/// Reads a binary plan file. Errors: "<path>: ..." for a missing/unreadable file, bytes that are
/// not a plan, or another format version. Does not validate (see validatePlan).
Expected<Plan> readPlanFile(const std::string &path);
/// Parses a plan from bytes (`where` names the source in messages).
Expected<Plan> parsePlan(const std::string &bytes, const std::string &where);
/// Writes `plan` atomically (temporary file + rename): a failed write leaves no partial file.
Status writePlanFile(const Plan &plan, const std::string &path);

/// The canonical text form: deterministic, one buffer or instruction per line, constants shown
/// by size and SHA-256 (not their bytes). `rank` restricts it to one rank's program.
std::string planText(const Plan &plan, std::optional<int> rank = std::nullopt);
/// A pipeline slot as plan-text shows it: "F3" (micro-batch 3's forward), "B0", "W1", and with a
/// chunk other than 0 "F3.1".
std::string pipelineSlotText(const PipelineSlot &slot);
/// SHA-256 (lowercase hex) of planText(plan) over all ranks, with the model's path left out (the
/// model is identified by its checksum, so the same plan has one fingerprint wherever it lies).
std::string fingerprint(const Plan &plan);

/// SHA-256 of a file's bytes, lowercase hex; errors name the file.
Expected<std::string> sha256File(const std::string &path);
/// SHA-256 of bytes, lowercase hex.
std::string sha256Hex(const std::string &bytes);

/// The program rank `rank` runs. Precondition: the plan is valid and 0 <= rank < world size.
const RankProgram &programOf(const Plan &plan, int rank);

/// Checks of an instruction that need the kernel registry (op known, arity, dtypes), supplied by
/// the runtime so that this library does not depend on the kernels.
using KernelCheck = std::function<Status(const RankProgram &, const KernelCall &)>;

/// Validates the structure of `plan` before anything runs; the first problem is returned as
/// "plan <where>: rank R: <what>" (buffer or instruction named). Checks: format version, world
/// size = number of ranks and rank i at index i, every buffer's dtype known, shape non-negative
/// and size_bytes = elements * element size without overflow, every buffer inside the arena and
/// its offset a multiple of the alignment (a power of two), constants carrying exactly size_bytes
/// of data, every instruction operand index in range (or -1 for an optional input), Copy sizes
/// equal, bindings in range, every group rank in [0, world size) without repeats, data bindings
/// naming a graph input. `kernelCheck` (optional) is called for every kernel call.
Status validatePlan(const Plan &plan, const std::string &where,
                    const KernelCheck &kernelCheck = {});

} // namespace dtc::plan
