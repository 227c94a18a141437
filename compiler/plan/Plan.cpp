// Plan files: binary protobuf reading (with the format-version and checksum-algorithm checks)
// and atomic writing (temporary file + fsync + rename), and constants shared by content. The
// checksum helpers are in Checksum.cpp.
#include "compiler/plan/Plan.h"

#include "compiler/support/FileIO.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fcntl.h>
#include <filesystem>
#include <initializer_list>
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

namespace {

/// A length-delimited top-level field's payload: field number, offset, length.
struct Record {
  int field;
  size_t offset, length;
};

/// One pass over the top-level fields of the message in data[0, size): the fields numbered in
/// `cut` (length-delimited: messages, bytes) are recorded in `records` (offsets from `data`),
/// every other field (and a cut one of another wire type) is copied to `kept` as it is. False
/// for bytes that are not a protobuf message.
bool cutFields(const char *data, size_t size, std::initializer_list<int> cut, std::string &kept,
               std::vector<Record> &records) {
  namespace io = google::protobuf::io;
  using google::protobuf::internal::WireFormatLite;
  io::CodedInputStream in(reinterpret_cast<const uint8_t *>(data), static_cast<int>(size));
  size_t keptFrom = 0; // the run of kept fields not yet copied starts here
  for (;;) {
    const size_t at = static_cast<size_t>(in.CurrentPosition());
    const uint32_t tag = in.ReadTag();
    if (tag == 0) { // the end, or bytes that are no tag
      if (at != size)
        return false;
      kept.append(data + keptFrom, at - keptFrom);
      return true;
    }
    const int field = static_cast<int>(WireFormatLite::GetTagFieldNumber(tag));
    // A cut field of another wire type is kept: protobuf's parse makes it an unknown field,
    // as a parse of the whole message would.
    if (std::find(cut.begin(), cut.end(), field) == cut.end() ||
        WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!WireFormatLite::SkipField(&in, tag))
        return false;
      continue;
    }
    uint32_t length = 0;
    if (!in.ReadVarint32(&length))
      return false;
    const size_t payload = static_cast<size_t>(in.CurrentPosition());
    if (length > size - payload || !in.Skip(static_cast<int>(length)))
      return false;
    kept.append(data + keptFrom, at - keptFrom);
    keptFrom = payload + length;
    records.push_back({field, payload, length});
  }
}

/// protobuf's parse of `size` bytes into `m`, with its log lines kept off stderr.
template <typename Message>
Status parseMessage(Message &m, const char *data, size_t size, const std::string &where,
                    const std::string &what) {
  bool parsed = false;
  try {
    // Bytes that are not a plan are an ordinary user error, reported by us: keep protobuf's
    // own log lines (invalid UTF-8 in a string field, ...) off stderr.
    google::protobuf::LogSilencer silencer;
    parsed = m.ParseFromArray(data, static_cast<int>(size));
  } catch (const std::exception &e) {
    return Status::error(where, what + " (cannot parse: " + e.what() + ")");
  }
  if (!parsed)
    return Status::error(where, what + " (cannot parse)");
  return Status::ok();
}

/// The plan's RankProgram fields that readPlanForRank's summaries skip.
constexpr int kInstructionsField = RankProgram::kInstructionsFieldNumber;
constexpr int kRepeatedSlotsField = RankProgram::kRepeatedSlotsFieldNumber;

} // namespace

Expected<PlanFile> splitPlan(std::string bytes, const std::string &where) {
  if (bytes.empty())
    return Status::error(where, "not a dtc plan (empty file)");
  if (bytes.size() > kMaxPlanBytes)
    return Status::error(where, "plan of " + std::to_string(bytes.size()) +
                                    " bytes is above protobuf's limit of " +
                                    std::to_string(kMaxPlanBytes) + " bytes");
  PlanFile file;
  std::string header;
  std::vector<Record> records;
  if (!cutFields(bytes.data(), bytes.size(), {Plan::kProgramsFieldNumber}, header, records))
    return Status::error(where, "not a dtc plan (cannot parse)");
  for (const Record &r : records)
    file.programs.emplace_back(r.offset, r.length);
  DTC_RETURN_IF_ERROR(
      parseMessage(file.header, header.data(), header.size(), where, "not a dtc plan"));
  const Plan &plan = file.header;
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
  DTC_RETURN_IF_ERROR(checkModelChecksums(plan.model()).withContext(where));
  file.bytes = std::move(bytes);
  return file;
}

Expected<RankProgram> parseProgram(const PlanFile &file, int index, const std::string &where,
                                   bool summary) {
  const std::string at = where + ": program " + std::to_string(index);
  if (index < 0 || static_cast<size_t>(index) >= file.programs.size())
    return Status::error(at, "is not one of the plan's " + std::to_string(file.programs.size()));
  const auto [offset, length] = file.programs[static_cast<size_t>(index)];
  RankProgram p;
  bool slots = false; // compaction's repeated slots, skipped unparsed in a summary
  if (summary) {
    std::string kept;
    std::vector<Record> skipped;
    if (!cutFields(file.bytes.data() + offset, length, {kInstructionsField, kRepeatedSlotsField},
                   kept, skipped))
      return Status::error(at, "not a dtc plan (cannot parse)");
    for (const Record &r : skipped)
      slots = slots || r.field == kRepeatedSlotsField;
    DTC_RETURN_IF_ERROR(parseMessage(p, kept.data(), kept.size(), at, "not a dtc plan"));
  } else {
    DTC_RETURN_IF_ERROR(parseMessage(p, file.bytes.data() + offset, length, at, "not a dtc plan"));
    slots = p.repeated_slots_size() > 0;
  }
  if (p.summary())
    return Status::error(at, "is marked as a summary, which no plan file holds");
  const bool compacted = slots || p.derived_buffers().index_size() > 0;
  if (compacted && file.header.format_version() != kCompactPlanFormatVersion)
    return Status::error(at, "is compacted, which plan format version " +
                                 std::to_string(kPlanFormatVersion) + " does not allow");
  if (summary) {
    DTC_RETURN_IF_ERROR(expandSummaryBuffers(p, at));
    p.set_summary(true);
  } else {
    DTC_RETURN_IF_ERROR(expandProgram(p, at));
  }
  return p;
}

Expected<Plan> parsePlan(const std::string &bytes, const std::string &where) {
  DTC_ASSIGN_OR_RETURN(PlanFile file, splitPlan(bytes, where));
  google::protobuf::RepeatedPtrField<RankProgram> programs;
  programs.Reserve(static_cast<int>(file.programs.size()));
  for (size_t i = 0; i < file.programs.size(); ++i) {
    DTC_ASSIGN_OR_RETURN(RankProgram p, parseProgram(file, static_cast<int>(i), where));
    *programs.Add() = std::move(p);
  }
  Plan plan = std::move(file.header);
  plan.mutable_programs()->Swap(&programs);
  plan.set_format_version(kPlanFormatVersion);
  return plan;
}

Expected<Plan> readPlanFile(const std::string &path) {
  // A regular file (never a FIFO or device) within protobuf's limit, read with the bound even if
  // it grows meanwhile.
  DTC_ASSIGN_OR_RETURN(std::string bytes,
                       readInputFile(path, "the plan", std::min(kMaxPlanBytes, kMaxPlanFileBytes)));
  return parsePlan(bytes, path);
}

Expected<Plan> planForRank(PlanFile file, int rank, const std::string &where) {
  // Its own program in full; every program in full where one process runs several (a parameter
  // host's servers and central storage) or the rank is not in the table (validation says so).
  const Plan &h = file.header;
  const bool all = h.has_parameter_host() || rank < 0 || rank >= h.ranks_size();
  const int own = all ? -1 : h.ranks(rank).program();
  google::protobuf::RepeatedPtrField<RankProgram> programs;
  programs.Reserve(static_cast<int>(file.programs.size()));
  for (size_t i = 0; i < file.programs.size(); ++i) {
    const bool full = all || static_cast<int>(i) == own;
    DTC_ASSIGN_OR_RETURN(RankProgram p, parseProgram(file, static_cast<int>(i), where, !full));
    *programs.Add() = std::move(p);
  }
  Plan plan = std::move(file.header);
  plan.mutable_programs()->Swap(&programs);
  plan.set_format_version(kPlanFormatVersion);
  return plan;
}

Expected<Plan> readPlanForRank(const std::string &path, int rank, std::string *fingerprintOut) {
  DTC_ASSIGN_OR_RETURN(std::string bytes,
                       readInputFile(path, "the plan", std::min(kMaxPlanBytes, kMaxPlanFileBytes)));
  DTC_ASSIGN_OR_RETURN(PlanFile file, splitPlan(std::move(bytes), path));
  if (fingerprintOut)
    *fingerprintOut = fingerprint(file);
  return planForRank(std::move(file), rank, path);
}

Expected<std::string> serializePlan(const Plan &plan, const std::string &where) {
  for (int i = 0; i < plan.programs_size(); ++i)
    if (plan.programs(i).summary())
      return Status::error(where, "program " + std::to_string(i) +
                                      " is a summary (read without its instructions): only a "
                                      "whole plan can be written");
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
    return Status::error(where, "plan of " + std::to_string(size) +
                                    " bytes is above protobuf's limit of " +
                                    std::to_string(kMaxPlanBytes) + " bytes");
  std::string bytes;
  try {
    if (!out.SerializeToString(&bytes))
      return Status::error(where, "cannot serialize the plan");
  } catch (const std::exception &e) {
    return Status::error(where, std::string("cannot serialize the plan: ") + e.what());
  }
  return bytes;
}

Status writePlanFile(const Plan &plan, const std::string &path) {
  if (path.empty())
    return Status::error("<empty path>", "cannot write a plan to an empty path");
  if (isDirectory(path))
    return Status::error(path, "is a directory");
  DTC_ASSIGN_OR_RETURN(std::string bytes, serializePlan(plan, path));
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
