// The plan (compiler/plan/plan.proto, DESIGN.md section 7): reading and writing plan files, the
// canonical text form used by golden tests and `dtc-compile --emit plan-text`, the fingerprint
// every rank compares at start, and validation before anything runs.
#pragma once

#include "compiler/plan/plan.pb.h"
#include "compiler/support/FileIO.h"
#include "compiler/support/Status.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dtc::plan {

/// Version written into Plan.format_version; readers reject any other value.
/// 2: per-program training sections and data bindings, a rank table and a program list
/// (identical rank programs stored once), group ids, point-to-point transfers.
/// 3: model and external-data checksums are XXH3-128 with their algorithm recorded
/// (ModelRef.checksum, checksum_algorithm), no longer SHA-256; constant contents may be shared
/// (Plan.constants, Buffer.shared_data).
inline constexpr uint32_t kPlanFormatVersion = 3;
/// 4: format 3 with pipeline programs compacted (RankProgram.repeated_slots, derived_buffers):
/// written when a program has slots that repeat an earlier one for another micro-batch, so the
/// plan's size does not grow with the number of micro-batches. Readers expand it to format 3.
inline constexpr uint32_t kCompactPlanFormatVersion = 4;
/// Arena alignment of CPU plans, bytes.
inline constexpr uint64_t kCpuAlignment = 64;

/// Reads a binary plan file. Errors: "<path>: ..." for a missing/unreadable file, bytes that are
/// not a plan, another format version, or a model checksum by an algorithm this dtc does not
/// know. Does not validate otherwise (see validatePlan).
Expected<Plan> readPlanFile(const std::string &path);
/// Parses a plan from bytes (`where` names the source in messages).
Expected<Plan> parsePlan(const std::string &bytes, const std::string &where);
/// A plan file cut at its programs without parsing them. plan.proto's `repeated RankProgram
/// programs = 13` is, on the wire, a list of length-delimited records, so one pass over the
/// top-level fields finds them; everything else (the header) is parsed as a Plan without
/// programs. The checks of parsePlan on the header (format version, checksum algorithms) are done.
struct PlanFile {
  /// The file's bytes; `programs` points into them.
  std::string bytes;
  /// Every field but `programs`; format_version as stored (3, or 4 when compacted).
  Plan header;
  /// Each program's serialized bytes: (offset into `bytes`, length), in file order.
  std::vector<std::pair<size_t, size_t>> programs;
};
/// Splits `bytes` (moved in) into a PlanFile. Errors as parsePlan's ("<where>: not a dtc plan
/// (...)", another format version, ...).
Expected<PlanFile> splitPlan(std::string bytes, const std::string &where);
/// Parses program `index` of `file` and expands it (format 4) to the format-3 program. With
/// `summary`, its instructions (and compaction's repeated slots) are skipped unparsed, its
/// derived buffers are still rebuilt, and RankProgram.summary is set. Errors name
/// "<where>: program <index>".
Expected<RankProgram> parseProgram(const PlanFile &file, int index, const std::string &where,
                                   bool summary = false);
/// The fingerprint of a split plan file: XXH3-128 (32 lowercase hex digits) of a version tag,
/// the header's canonical text (planText of the header with the model's path left out: the same
/// plan has one fingerprint wherever it and its model lie), every shared constant and every
/// program's serialized bytes, each preceded by its length. No program is parsed: hashing the
/// 14 MB of a pp=8 plan takes a few ms. Plans that differ in any program differ (up to XXH3's
/// collisions); it guards against mismatched plans, not against forgery.
std::string fingerprint(const PlanFile &file);
/// What one rank of a training job reads at start: the header, the programs rank `rank` runs in
/// full (parseProgram), every other program as a summary (no instructions: the loop reads other
/// programs' bindings, training sections and buffers, never their instructions), and the
/// fingerprint of the file (`*fingerprint`, when given). Plans with a parameter host (servers
/// and central storage run several programs) and ranks outside the plan's table read every
/// program in full. Errors as readPlanFile's.
Expected<Plan> readPlanForRank(const std::string &path, int rank,
                               std::string *fingerprint = nullptr);
/// readPlanForRank's plan from a split file (`where` names it in errors).
Expected<Plan> planForRank(PlanFile file, int rank, const std::string &where);
/// The bytes writePlanFile writes for `plan`: pipeline programs compacted (compactPlan).
/// Errors: a plan above protobuf's 2 GiB, or one holding a summary program.
Expected<std::string> serializePlan(const Plan &plan, const std::string &where);
/// Writes `plan` atomically (temporary file + rename): a failed write leaves no partial file.
/// Pipeline programs are written compacted (compactPlan).
Status writePlanFile(const Plan &plan, const std::string &path);
/// Compacts every program whose schedule has slots repeating an earlier slot of the same kind
/// and chunk for another micro-batch (same instructions on that micro-batch's buffers): their
/// instructions and buffers are replaced by RepeatedSlot and DerivedBuffers records, and the
/// format version becomes kCompactPlanFormatVersion. A program is changed only when
/// expandProgram gives it back exactly. Returns whether any program was compacted.
bool compactPlan(Plan &plan);
/// Rebuilds a compacted program's instructions and buffers (the format-3 program) in place;
/// a program without compaction records is left alone. Errors ("<where>: compacted program:
/// ...") for records that do not fit the program: indices out of range, a slot repeating a
/// later or repeated slot, too few or too many stored instructions, or more than 2^22
/// instructions or buffers after expansion.
Status expandProgram(RankProgram &program, const std::string &where);
/// A summary's half of expandProgram: rebuilds the derived buffers of a program read without its
/// instructions (and clears derived_buffers). Errors as expandProgram's.
Status expandSummaryBuffers(RankProgram &program, const std::string &where);

/// The canonical text form: deterministic, one buffer or instruction per line, constants shown
/// by size and a prefix of their XXH3-128 (not their bytes). `rank` restricts it to one rank's
/// program.
std::string planText(const Plan &plan, std::optional<int> rank = std::nullopt);
/// A pipeline slot as plan-text shows it: "F3" (micro-batch 3's forward), "B0", "W1", and with a
/// chunk other than 0 "F3.1".
std::string pipelineSlotText(const PipelineSlot &slot);
/// The fingerprint every rank compares at start and checkpoints record: that of the file
/// writePlanFile would write for `plan` (fingerprint(const PlanFile &)), so a plan read back from
/// its file has the fingerprint of the file. Costs what writing costs (compaction of pipeline
/// programs); dtc-run takes the file's instead. Precondition: no program is a summary (a plan
/// from readPlanForRank: use the fingerprint it returns); one is fingerprinted as "".
std::string fingerprint(const Plan &plan);

/// The algorithm dtc-compile records for model and external-data checksums.
inline constexpr ChecksumAlgorithm kChecksumAlgorithm = CHECKSUM_XXH3_128_CHUNKED;
/// The chunk size of CHECKSUM_XXH3_128_CHUNKED: 64 MiB.
inline constexpr uint64_t kChecksumChunkBytes = uint64_t{64} << 20;
/// At most this many threads hash the chunks of one file.
inline constexpr size_t kMaxChecksumThreads = 16;
/// Its name in messages and plan text: "xxh3-128", "xxh3-128-chunked" (or "algorithm(N)" for
/// an unknown number).
std::string checksumAlgorithmName(ChecksumAlgorithm algorithm);
/// Whether checksumFile computes `algorithm` (plans may record either XXH3 form).
bool isKnownChecksumAlgorithm(ChecksumAlgorithm algorithm);
/// A file's checksum, 32 lowercase hex digits, by `algorithm` (plan.proto defines both):
/// - CHECKSUM_XXH3_128: XXH3-128 (xxHash 0.8, seed 0; Collet, xxHash specification,
///   xxhash.com) of the bytes, in xxHash's canonical order (the same text as `xxhsum -H2`),
///   through one streaming state: one core, several GB/s from the page cache.
/// - CHECKSUM_XXH3_128_CHUNKED (the default): the file cut into kChecksumChunkBytes chunks, each
///   hashed with XXH3-128 on up to min(cores, kMaxChecksumThreads) threads, then XXH3-128 of
///   their canonical digests followed by the file size (8 bytes, little-endian). A chunk that
///   is wholly a hole of a sparse file takes the digest of zeros without being read.
/// Memory stays constant (1 MiB per thread); errors name the file. The file must be a regular
/// file (a FIFO or device is refused, never read) of at most `maxBytes`, and must not change
/// size while it is hashed; `what` names it in those errors ("the plan's model"). Holes are
/// hashed as the zeros they read as, without reading them. When `cancel` is given and becomes
/// true, hashing stops at the next 1 MiB with an error.
Expected<std::string> checksumFile(const std::string &path, const std::string &what = "",
                                   uint64_t maxBytes = kMaxExternalDataBytes,
                                   ChecksumAlgorithm algorithm = kChecksumAlgorithm,
                                   const std::atomic<bool> *cancel = nullptr);
/// XXH3-128 of bytes, as checksumFile.
std::string checksumHex(const std::string &bytes);
/// Checks the checksums a plan records of its model: every one by an algorithm this dtc knows
/// (isKnownChecksumAlgorithm) and in its form (32 lowercase hex digits). The model's own may be absent
/// (empty, CHECKSUM_UNSPECIFIED: a plan that reads no parameters); the external files' may not.
/// Errors: "model checksum: ..." or "external data '<location>' checksum ...". readPlanFile and
/// validatePlan both run it.
Status checkModelChecksums(const ModelRef &model);
/// SHA-256 of bytes, lowercase hex (llvm/Support/SHA256.h). Checkpoints use it; plans do not.
std::string sha256Hex(const std::string &bytes);

/// Constants of at least this many bytes are stored once per plan (shareConstants).
inline constexpr uint64_t kMinSharedConstantBytes = 1024;

/// Moves the contents of every CONSTANT buffer of at least kMinSharedConstantBytes, in every
/// program, into Plan.constants, each distinct content once (equal bytes, found through their
/// XXH3-128 and then compared in full), and points the buffers at them (Buffer.shared_data).
/// Constants already shared stay as they are. Cost: one hash of each moved constant, one full
/// comparison per equal hash; the bytes are moved, not copied.
void shareConstants(Plan &plan);

/// The contents of a buffer: Plan.constants[shared_data - 1] when shared_data names an entry,
/// otherwise its own `data` (also when shared_data is out of range: validatePlan reports that).
const std::string &bufferData(const Plan &plan, const Buffer &buffer);

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
/// of data (their own or a shared constant in range, never both), every instruction operand index
/// in range (or -1 for an optional input), Copy sizes equal, bindings in range, every group rank in
/// [0, world size) without repeats, data bindings naming a graph input. `kernelCheck` (optional) is
/// called for every kernel call.
Status validatePlan(const Plan &plan, const std::string &where,
                    const KernelCheck &kernelCheck = {});

} // namespace dtc::plan
