// Plan files: binary protobuf reading (with the format-version and checksum-algorithm checks)
// and atomic writing (temporary file + fsync + rename), and constants shared by content. The
// checksum helpers are in Checksum.cpp.
#include "compiler/plan/Plan.h"

#include "compiler/support/FileIO.h"

#include <google/protobuf/stubs/logging.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fcntl.h>
#include <filesystem>
#include <memory>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_map>
#include <vector>

namespace dtc::plan {
namespace {

/// Protobuf cannot parse or serialize messages of 2 GiB or more.
constexpr uint64_t kMaxPlanBytes = static_cast<uint64_t>(INT_MAX);

bool isDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

} // namespace

Expected<Plan> parsePlan(const std::string &bytes, const std::string &where) {
  if (bytes.empty())
    return Status::error(where, "not a dtc plan (empty file)");
  if (bytes.size() > kMaxPlanBytes)
    return Status::error(where, "plan of " + std::to_string(bytes.size()) +
                                    " bytes is above protobuf's limit of " +
                                    std::to_string(kMaxPlanBytes) + " bytes");
  Plan plan;
  bool parsed = false;
  try {
    // Bytes that are not a plan are an ordinary user error, reported by us: keep protobuf's
    // own log lines (invalid UTF-8 in a string field, ...) off stderr.
    google::protobuf::LogSilencer silencer;
    parsed = plan.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  } catch (const std::exception &e) {
    return Status::error(where, std::string("not a dtc plan (cannot parse: ") + e.what() + ")");
  }
  if (!parsed)
    return Status::error(where, "not a dtc plan (cannot parse)");
  if (plan.format_version() == 0)
    return Status::error(where, "not a dtc plan (no format version)");
  // Other protobuf messages (an ONNX model: ir_version in field 1, its graph in field 7) parse
  // as a plan with unknown fields; plans of older formats have them too, and get the version
  // message below.
  if (plan.format_version() > kPlanFormatVersion &&
      !plan.GetReflection()->GetUnknownFields(plan).empty())
    return Status::error(where, "not a dtc plan (fields no plan has)");
  if (plan.format_version() != kPlanFormatVersion &&
      plan.format_version() != kCompactPlanFormatVersion)
    return Status::error(where, "plan format version " + std::to_string(plan.format_version()) +
                                    ", this dtc reads versions " +
                                    std::to_string(kPlanFormatVersion) + " and " +
                                    std::to_string(kCompactPlanFormatVersion));
  for (int i = 0; i < plan.programs_size(); ++i) {
    RankProgram &p = *plan.mutable_programs(i);
    const bool compacted = p.repeated_slots_size() > 0 || p.derived_buffers().index_size() > 0;
    if (compacted && plan.format_version() != kCompactPlanFormatVersion)
      return Status::error(where, "program " + std::to_string(i) +
                                      " is compacted, which plan "
                                      "format version " +
                                      std::to_string(kPlanFormatVersion) + " does not allow");
    DTC_RETURN_IF_ERROR(expandProgram(p, where + ": program " + std::to_string(i)));
  }
  plan.set_format_version(kPlanFormatVersion);
  DTC_RETURN_IF_ERROR(checkModelChecksums(plan.model()).withContext(where));
  return plan;
}

Expected<Plan> readPlanFile(const std::string &path) {
  // A regular file (never a FIFO or device) within protobuf's limit, read with the bound even if
  // it grows meanwhile.
  DTC_ASSIGN_OR_RETURN(std::string bytes,
                       readInputFile(path, "the plan", std::min(kMaxPlanBytes, kMaxPlanFileBytes)));
  return parsePlan(bytes, path);
}

Status writePlanFile(const Plan &plan, const std::string &path) {
  if (path.empty())
    return Status::error("<empty path>", "cannot write a plan to an empty path");
  if (isDirectory(path))
    return Status::error(path, "is a directory");
  // Pipeline programs go out compacted (only programs with a schedule can be).
  std::optional<Plan> compacted;
  if (std::any_of(plan.programs().begin(), plan.programs().end(),
                  [](const RankProgram &p) { return p.schedule_size() > 1; })) {
    compacted.emplace(plan);
    if (!compactPlan(*compacted))
      compacted.reset();
  }
  const Plan &out = compacted ? *compacted : plan;
  size_t size = out.ByteSizeLong();
  if (size > kMaxPlanBytes)
    return Status::error(path, "plan of " + std::to_string(size) +
                                   " bytes is above protobuf's limit of " +
                                   std::to_string(kMaxPlanBytes) + " bytes");
  std::string bytes;
  try {
    if (!out.SerializeToString(&bytes))
      return Status::error(path, "cannot serialize the plan");
  } catch (const std::exception &e) {
    return Status::error(path, std::string("cannot serialize the plan: ") + e.what());
  }

  return writeFileAtomically(path, bytes);
}

void shareConstants(Plan &plan) {
  // XXH3-128 of the contents -> indices into plan.constants with those contents' hash.
  std::unordered_map<std::string, std::vector<int>> byHash;
  for (int k = 0; k < plan.constants_size(); ++k)
    byHash[checksumHex(plan.constants(k))].push_back(k);
  for (RankProgram &r : *plan.mutable_programs())
    for (Buffer &b : *r.mutable_buffers()) {
      if (b.kind() != BUFFER_CONSTANT || b.shared_data() != 0 ||
          b.data().size() < kMinSharedConstantBytes)
        continue;
      std::vector<int> &same = byHash[checksumHex(b.data())];
      int index = -1;
      for (int k : same)
        if (plan.constants(k) == b.data())
          index = k;
      if (index < 0) {
        index = plan.constants_size();
        same.push_back(index);
        *plan.add_constants() = std::move(*b.mutable_data());
      }
      b.clear_data();
      b.set_shared_data(static_cast<uint32_t>(index) + 1);
    }
}

const std::string &bufferData(const Plan &plan, const Buffer &buffer) {
  const uint32_t k = buffer.shared_data();
  if (k != 0 && k <= static_cast<uint32_t>(plan.constants_size()))
    return plan.constants(static_cast<int>(k) - 1);
  return buffer.data();
}

const RankProgram &programOf(const Plan &plan, int rank) {
  return plan.programs(plan.ranks(rank).program());
}

} // namespace dtc::plan
