// Checkpoint files (see Checkpoint.h for the format).
#include "runtime/Checkpoint.h"

#include "compiler/plan/Plan.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <regex>

namespace dtc::rt {

namespace {

constexpr const char *kMetaName = "__meta__";
constexpr const char *kFormat = "dtc-checkpoint";
constexpr int kVersion = 1;

nlohmann::json metaJson(const CheckpointMeta &m) {
  nlohmann::json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["step"] = m.step;
  j["epoch"] = m.epoch;
  j["step_in_epoch"] = m.stepInEpoch;
  j["seed"] = m.seed;
  j["shuffle"] = m.shuffle;
  j["samples"] = m.samples;
  j["plan_fingerprint"] = m.planFingerprint;
  j["epoch_loss_sum"] = m.epochLossSum;
  j["epoch_steps"] = m.epochSteps;
  j["epoch_correct"] = m.epochCorrect;
  j["epoch_counted"] = m.epochCounted;
  return j;
}

/// The checksum of the arrays (all but the meta) and the meta JSON text without "sha256".
std::string checksumOf(std::vector<const HostArray *> arrays, const std::string &metaText) {
  std::sort(arrays.begin(), arrays.end(),
            [](const HostArray *a, const HostArray *b) { return a->name < b->name; });
  std::string manifest;
  for (const HostArray *a : arrays) {
    manifest += a->name + "\t" + std::to_string(static_cast<int>(a->dtype)) + "\t";
    for (size_t i = 0; i < a->shape.size(); ++i)
      manifest += (i ? "," : "") + std::to_string(a->shape[i]);
    manifest += "\t" + plan::sha256Hex(a->bytes) + "\n";
  }
  return plan::sha256Hex(manifest + metaText);
}

} // namespace

std::string checkpointPath(const std::string &dir, int64_t step) {
  char name[40];
  std::snprintf(name, sizeof name, "ckpt-%08lld.npz", static_cast<long long>(step));
  return (std::filesystem::path(dir) / name).string();
}

Status writeCheckpoint(const std::string &path, const Checkpoint &ckpt) {
  std::vector<const HostArray *> arrays;
  for (const HostArray &a : ckpt.arrays) {
    if (a.name == kMetaName)
      return Status::error(path, "a buffer is named '" + std::string(kMetaName) + "'");
    arrays.push_back(&a);
  }
  nlohmann::json meta = metaJson(ckpt.meta);
  meta["sha256"] = checksumOf(arrays, metaJson(ckpt.meta).dump());
  const std::string text = meta.dump(1);
  HostArray m;
  m.name = kMetaName;
  m.dtype = ir::DType::kUInt8;
  m.shape = {static_cast<int64_t>(text.size())};
  m.bytes = text;
  std::vector<HostArray> all = ckpt.arrays;
  all.push_back(std::move(m));
  return writeNpz(path, all);
}

Expected<Checkpoint> readCheckpoint(const std::string &path,
                                    const std::optional<std::string> &planFingerprint) {
  DTC_ASSIGN_OR_RETURN(std::vector<HostArray> arrays, readArrays(path));
  Checkpoint ckpt;
  std::string metaText;
  bool hasMeta = false;
  for (HostArray &a : arrays) {
    if (a.name == kMetaName) {
      metaText = a.bytes;
      hasMeta = true;
    } else {
      ckpt.arrays.push_back(std::move(a));
    }
  }
  if (!hasMeta)
    return Status::error(path, "not a dtc checkpoint (no '" + std::string(kMetaName) + "' array)");
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(metaText);
    if (!meta.is_object() || meta.value("format", "") != kFormat)
      return Status::error(path, "not a dtc checkpoint (its meta data is not a checkpoint's)");
    if (meta.value("version", 0) != kVersion)
      return Status::error(path, "checkpoint format version " +
                                     std::to_string(meta.value("version", 0)) +
                                     ", this dtc-run reads version " + std::to_string(kVersion));
    CheckpointMeta &m = ckpt.meta;
    m.step = meta.at("step").get<int64_t>();
    m.epoch = meta.at("epoch").get<int64_t>();
    m.stepInEpoch = meta.at("step_in_epoch").get<int64_t>();
    m.seed = meta.at("seed").get<uint64_t>();
    m.shuffle = meta.at("shuffle").get<bool>();
    m.samples = meta.at("samples").get<int64_t>();
    m.planFingerprint = meta.at("plan_fingerprint").get<std::string>();
    m.epochLossSum = meta.at("epoch_loss_sum").get<double>();
    m.epochSteps = meta.at("epoch_steps").get<int64_t>();
    m.epochCorrect = meta.at("epoch_correct").get<int64_t>();
    m.epochCounted = meta.at("epoch_counted").get<int64_t>();
    const std::string stored = meta.at("sha256").get<std::string>();
    std::vector<const HostArray *> ptrs;
    for (const HostArray &a : ckpt.arrays)
      ptrs.push_back(&a);
    if (checksumOf(ptrs, metaJson(m).dump()) != stored)
      return Status::error(path, "corrupt checkpoint: its SHA-256 checksum does not match its "
                                 "contents (delete it to resume from an older checkpoint)");
  } catch (const nlohmann::json::exception &e) {
    return Status::error(path, std::string("corrupt checkpoint: bad meta data (") + e.what() + ")");
  }
  if (planFingerprint && ckpt.meta.planFingerprint != *planFingerprint)
    return Status::error(
        path, "checkpoint of another plan (fingerprint " + ckpt.meta.planFingerprint.substr(0, 16) +
                  "..., this plan's is " + planFingerprint->substr(0, 16) + "...)");
  return ckpt;
}

Expected<std::string> newestCheckpoint(const std::string &dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec))
    return Status::error(dir, "checkpoint folder does not exist (nothing to resume)");
  if (!std::filesystem::is_directory(dir, ec))
    return Status::error(dir, "not a folder");
  static const std::regex kName("ckpt-([0-9]{1,18})\\.npz");
  // Chosen by the step each one records (a copy named ckpt-99 may hold step 5), read from its
  // meta data alone (the chosen one is verified in full by readCheckpoint); on a tie of the
  // recorded step the contents must agree, and the highest name wins.
  struct Candidate {
    std::string path;
    long long nameStep = -1;
    int64_t step = -1;
    std::string sha256;
  };
  std::optional<Candidate> best;
  for (const auto &entry : std::filesystem::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, m, kName))
      continue;
    if (!entry.is_regular_file(ec))
      return Status::error(entry.path().string(),
                           "is named like a checkpoint but is not a regular file (a FIFO, "
                           "device or folder); remove it or use another --checkpoint-dir");
    Candidate c{entry.path().string(), std::stoll(m[1].str()), -1, ""};
    auto onlyMeta = [](const std::string &array, ir::DType, const std::vector<int64_t> &) {
      return Expected<bool>(array == kMetaName);
    };
    Expected<std::vector<HostArray>> meta = readArrays(c.path, onlyMeta);
    nlohmann::json j;
    if (meta && meta->size() == 1)
      j = nlohmann::json::parse((*meta)[0].bytes, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer() ||
        !j.contains("sha256") || !j["sha256"].is_string())
      return Status::error(c.path, "is named like a checkpoint but its meta data cannot be read" +
                                       (meta ? std::string() : ": " + meta.status().message()) +
                                       "; remove it or use another --checkpoint-dir");
    c.step = j["step"].get<int64_t>();
    c.sha256 = j["sha256"].get<std::string>();
    if (best && c.step == best->step && c.sha256 != best->sha256)
      return Status::error(dir, "checkpoints " + best->path + " and " + c.path +
                                    " both record step " + std::to_string(c.step) +
                                    " with different contents; remove the wrong one");
    if (!best || c.step > best->step || (c.step == best->step && c.nameStep > best->nameStep))
      best = std::move(c);
  }
  if (ec)
    return Status::error(dir, "cannot list the folder: " + ec.message());
  if (!best)
    return Status::error(dir, "no checkpoint (ckpt-<step>.npz) to resume from");
  return best->path;
}

Status removeStaleCheckpointTemporaries(const std::string &dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return Status::ok();
  // writeNpz's "<checkpoint>.tmp" and libzip's "<that>.XXXXXX" (mkstemp) inside it.
  static const std::regex kTemp("ckpt-[0-9]{1,18}\\.npz\\.tmp(\\.[A-Za-z0-9]{6})?");
  std::vector<std::filesystem::path> stale;
  for (const auto &entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    std::error_code fileEc;
    if (name.size() < 64 && std::regex_match(name, kTemp) &&
        entry.symlink_status(fileEc).type() == std::filesystem::file_type::regular)
      stale.push_back(entry.path());
  }
  if (ec)
    return Status::error(dir, "cannot list the checkpoint folder: " + ec.message());
  for (const std::filesystem::path &p : stale) {
    std::filesystem::remove(p, ec);
    if (ec)
      return Status::error(p.string(), "cannot remove this stale temporary file of an "
                                       "interrupted checkpoint: " +
                                           ec.message());
  }
  return Status::ok();
}

} // namespace dtc::rt
