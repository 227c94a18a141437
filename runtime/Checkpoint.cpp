// Sharded checkpoint files: shards, manifests, finding the newest checkpoint and cleaning up
// after interrupted writes (see Checkpoint.h for the format).
#include "runtime/Checkpoint.h"

#include "compiler/plan/Plan.h"
#include "compiler/support/FileIO.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <unistd.h>

namespace dtc::rt {

namespace {

namespace fs = std::filesystem;

constexpr const char *kMetaName = "__meta__";
constexpr const char *kFormat = "dtc-checkpoint";
constexpr const char *kShardFormat = "dtc-checkpoint-shard";
constexpr int kVersion = 2;
constexpr uint64_t kMaxManifestBytes = uint64_t{16} << 20;

const std::regex &manifestPattern() {
  static const std::regex r("ckpt-([0-9]{1,18})\\.manifest\\.json");
  return r;
}
const std::regex &shardPattern() {
  static const std::regex r("ckpt-[0-9]{1,18}\\.shard-[0-9]{1,9}\\.npz");
  return r;
}

std::string padded(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%08lld", static_cast<long long>(step));
  return buf;
}

/// fsync of a file or a folder (the folder makes a rename in it durable).
Status syncPath(const std::string &path, bool folder) {
  const int fd = ::open(path.c_str(), (folder ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::error(path, std::string("cannot open to sync: ") + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && !(folder && (err == EINVAL || err == EROFS)))
    return Status::error(path, std::string("cannot sync: ") + std::strerror(err));
  return Status::ok();
}

/// The checksum of the arrays (all but the meta) and the meta JSON text without "sha256".
std::string checksumOf(std::vector<const HostArray *> arrays, const std::string &metaText) {
  std::sort(arrays.begin(), arrays.end(),
            [](const HostArray *a, const HostArray *b) { return a->name < b->name; });
  std::string lines;
  for (const HostArray *a : arrays) {
    lines += a->name + "\t" + std::to_string(static_cast<int>(a->dtype)) + "\t";
    for (size_t i = 0; i < a->shape.size(); ++i)
      lines += (i ? "," : "") + std::to_string(a->shape[i]);
    lines += "\t" + plan::sha256Hex(a->bytes) + "\n";
  }
  return plan::sha256Hex(lines + metaText);
}

nlohmann::json shardMetaJson(int64_t step, int program, const std::string &fingerprint) {
  nlohmann::json j;
  j["format"] = kShardFormat;
  j["version"] = kVersion;
  j["step"] = step;
  j["program"] = program;
  j["plan_fingerprint"] = fingerprint;
  return j;
}

/// The manifest's JSON without "sha256".
nlohmann::json manifestJson(const Manifest &mf) {
  const CheckpointMeta &m = mf.meta;
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
  std::vector<ShardRef> shards = mf.shards;
  std::sort(shards.begin(), shards.end(),
            [](const ShardRef &a, const ShardRef &b) { return a.program < b.program; });
  nlohmann::json list = nlohmann::json::array();
  for (const ShardRef &s : shards)
    list.push_back(
        {{"program", s.program}, {"file", s.file}, {"sha256", s.sha256}, {"bytes", s.bytes}});
  j["shards"] = std::move(list);
  return j;
}

bool isSha256Hex(const std::string &s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

/// Typed access to a JSON object's keys: a missing key or one of another type is an error
/// naming the key (thrown as a message, caught by the parser).
struct Field {
  const nlohmann::json &j;
  std::string what; // "" or "shard 2: "

  const nlohmann::json &at(const char *key) const {
    if (!j.contains(key))
      throw std::string(what + "missing key '" + key + "'");
    return j[key];
  }
  int64_t integer(const char *key) const {
    const nlohmann::json &v = at(key);
    if (!v.is_number_integer() ||
        (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)))
      throw std::string(what + "key '" + key + "' is not an integer");
    return v.get<int64_t>();
  }
  uint64_t unsignedInteger(const char *key) const {
    const nlohmann::json &v = at(key);
    if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0))
      throw std::string(what + "key '" + key + "' is not a non-negative integer");
    return v.get<uint64_t>();
  }
  double number(const char *key) const {
    const nlohmann::json &v = at(key);
    if (!v.is_number())
      throw std::string(what + "key '" + key + "' is not a number");
    return v.get<double>();
  }
  bool boolean(const char *key) const {
    const nlohmann::json &v = at(key);
    if (!v.is_boolean())
      throw std::string(what + "key '" + key + "' is not true or false");
    return v.get<bool>();
  }
  std::string string(const char *key) const {
    const nlohmann::json &v = at(key);
    if (!v.is_string())
      throw std::string(what + "key '" + key + "' is not a string");
    return v.get<std::string>();
  }
};

/// Why `file` may not be a shard file of a manifest, or "" when it may.
std::string badShardFile(const std::string &file) {
  if (file.find('/') != std::string::npos || file.find('\\') != std::string::npos)
    return "is a path, not a file name in the checkpoint folder (a manifest names files of its "
           "own folder only)";
  if (file.find("..") != std::string::npos)
    return "contains '..' (a manifest names files of its own folder only)";
  if (!std::regex_match(file, shardPattern()))
    return "is not a shard file name (ckpt-<step>.shard-<program>.npz)";
  return "";
}

} // namespace

const ShardRef *Manifest::shardOf(int program) const {
  for (const ShardRef &s : shards)
    if (s.program == program)
      return &s;
  return nullptr;
}

std::string manifestFileName(int64_t step) { return "ckpt-" + padded(step) + ".manifest.json"; }

std::string shardFileName(int64_t step, int program) {
  return "ckpt-" + padded(step) + ".shard-" + std::to_string(program) + ".npz";
}

Expected<ShardRef> writeShard(const std::string &dir, const CheckpointMeta &meta, int program,
                              std::vector<HostArray> arrays) {
  ShardRef ref;
  ref.program = program;
  ref.file = shardFileName(meta.step, program);
  const std::string path = (fs::path(dir) / ref.file).string();
  std::vector<const HostArray *> ptrs;
  for (const HostArray &a : arrays) {
    if (a.name == kMetaName)
      return Status::error(path, "a buffer is named '" + std::string(kMetaName) + "'");
    ptrs.push_back(&a);
  }
  const nlohmann::json base = shardMetaJson(meta.step, program, meta.planFingerprint);
  ref.sha256 = checksumOf(ptrs, base.dump());
  nlohmann::json j = base;
  j["sha256"] = ref.sha256;
  const std::string text = j.dump(1);
  HostArray m;
  m.name = kMetaName;
  m.dtype = ir::DType::kUInt8;
  m.shape = {static_cast<int64_t>(text.size())};
  m.bytes = text;
  arrays.push_back(std::move(m));
  DTC_RETURN_IF_ERROR(writeNpz(path, arrays));
  // Durable before the manifest names it.
  DTC_RETURN_IF_ERROR(syncPath(path, false));
  DTC_RETURN_IF_ERROR(syncPath(dir, true));
  std::error_code ec;
  ref.bytes = fs::file_size(path, ec);
  if (ec)
    return Status::error(path, "cannot read the size of the shard just written: " + ec.message());
  return ref;
}

Expected<std::vector<HostArray>> readShard(const Manifest &manifest, int program) {
  const ShardRef *ref = manifest.shardOf(program);
  const std::string where = manifest.path.empty() ? "checkpoint manifest" : manifest.path;
  if (!ref)
    return Status::error(where, "names no shard of program " + std::to_string(program) +
                                    " (the plan's program " + std::to_string(program) +
                                    " has no saved state)");
  const std::string path = (fs::path(manifest.path).parent_path() / ref->file).string();
  const std::string of = " (shard of program " + std::to_string(program) + " of checkpoint " +
                         where + ", step " + std::to_string(manifest.meta.step) + ")";
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec)))
    return Status::error(path, "is missing" + of +
                                   "; restore the file, or delete the manifest to resume from "
                                   "an older checkpoint");
  DTC_RETURN_IF_ERROR(checkInputFile(path, "checkpoint shard", kMaxArrayFileBytes));
  const uint64_t size = fs::file_size(path, ec);
  if (ec || size != ref->bytes)
    return Status::error(path, "corrupt checkpoint shard: " + std::to_string(size) +
                                   " bytes, the manifest records " + std::to_string(ref->bytes) +
                                   of);
  Expected<std::vector<HostArray>> read = readArrays(path);
  if (!read) {
    // "<path>: array 'w': cannot read member: CRC error" (bit rot) is a corrupt shard too.
    std::string why = read.status().message();
    if (why.rfind(path + ": ", 0) == 0)
      why.erase(0, path.size() + 2);
    return Status::error(path, "corrupt checkpoint shard: " + why + of);
  }
  std::vector<HostArray> arrays;
  std::string metaText;
  bool hasMeta = false;
  for (HostArray &a : *read) {
    if (a.name == kMetaName) {
      metaText = a.bytes;
      hasMeta = true;
    } else {
      arrays.push_back(std::move(a));
    }
  }
  if (!hasMeta)
    return Status::error(path, "not a dtc checkpoint shard (no '" + std::string(kMetaName) +
                                   "' array)" + of);
  nlohmann::json j = nlohmann::json::parse(metaText, nullptr, /*allow_exceptions=*/false);
  std::string stored;
  try {
    if (!j.is_object() || j.value("format", "") != kShardFormat)
      throw std::string("its meta data is not a checkpoint shard's");
    Field f{j, ""};
    if (f.integer("version") != kVersion)
      throw std::string("format version " + std::to_string(f.integer("version")) +
                        ", this dtc-run reads version " + std::to_string(kVersion));
    if (f.integer("step") != manifest.meta.step || f.integer("program") != program ||
        f.string("plan_fingerprint") != manifest.meta.planFingerprint)
      throw std::string("it holds step " + std::to_string(f.integer("step")) + " of program " +
                        std::to_string(f.integer("program")) + " of plan " +
                        f.string("plan_fingerprint").substr(0, 16) +
                        "..., the manifest wants step " + std::to_string(manifest.meta.step) +
                        " of program " + std::to_string(program) + " of plan " +
                        manifest.meta.planFingerprint.substr(0, 16) + "...");
    stored = f.string("sha256");
  } catch (const std::string &why) {
    return Status::error(path, "corrupt checkpoint shard: " + why + of);
  } catch (const nlohmann::json::exception &e) {
    return Status::error(path, std::string("corrupt checkpoint shard: bad meta data (") + e.what() +
                                   ")" + of);
  }
  std::vector<const HostArray *> ptrs;
  for (const HostArray &a : arrays)
    ptrs.push_back(&a);
  const std::string actual = checksumOf(
      ptrs, shardMetaJson(manifest.meta.step, program, manifest.meta.planFingerprint).dump());
  if (actual != stored || actual != ref->sha256)
    return Status::error(
        path, "corrupt checkpoint shard: its SHA-256 checksum does not match " +
                  std::string(actual != stored ? "its contents" : "the one its manifest records") +
                  of + "; delete the manifest to resume from an older checkpoint");
  return arrays;
}

std::string serializeManifest(const Manifest &manifest) {
  nlohmann::json j = manifestJson(manifest);
  j["sha256"] = plan::sha256Hex(j.dump());
  return j.dump(1) + "\n";
}

Expected<Manifest> parseManifest(const std::string &text, const std::string &where) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return Status::error(where, "corrupt checkpoint manifest: not valid JSON");
  Manifest mf;
  mf.path = where;
  std::string stored;
  try {
    if (!j.is_object() || j.value("format", "") != kFormat)
      return Status::error(where, "not a dtc checkpoint manifest (no \"format\": \"" +
                                      std::string(kFormat) + "\")");
    Field f{j, ""};
    if (f.integer("version") != kVersion)
      return Status::error(where, "checkpoint format version " +
                                      std::to_string(f.integer("version")) +
                                      ", this dtc-run reads version " + std::to_string(kVersion));
    CheckpointMeta &m = mf.meta;
    m.step = f.integer("step");
    m.epoch = f.integer("epoch");
    m.stepInEpoch = f.integer("step_in_epoch");
    m.seed = f.unsignedInteger("seed");
    m.shuffle = f.boolean("shuffle");
    m.samples = f.integer("samples");
    m.planFingerprint = f.string("plan_fingerprint");
    m.epochLossSum = f.number("epoch_loss_sum");
    m.epochSteps = f.integer("epoch_steps");
    m.epochCorrect = f.integer("epoch_correct");
    m.epochCounted = f.integer("epoch_counted");
    stored = f.string("sha256");
    const nlohmann::json &list = f.at("shards");
    if (!list.is_array() || list.empty())
      throw std::string("key 'shards' is not a non-empty list");
    std::set<int64_t> programs;
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string what = "shard " + std::to_string(i) + ": ";
      if (!list[i].is_object())
        throw what + "not an object";
      Field s{list[i], what};
      ShardRef ref;
      const int64_t program = s.integer("program");
      if (program < 0 || program > INT32_MAX)
        throw what + "program " + std::to_string(program) + " out of range";
      if (!programs.insert(program).second)
        throw what + "program " + std::to_string(program) + " is listed twice";
      ref.program = static_cast<int>(program);
      ref.file = s.string("file");
      if (std::string why = badShardFile(ref.file); !why.empty())
        throw what + "file '" + ref.file + "' " + why;
      ref.sha256 = s.string("sha256");
      if (!isSha256Hex(ref.sha256))
        throw what + "key 'sha256' is not 64 lowercase hex digits";
      ref.bytes = s.unsignedInteger("bytes");
      mf.shards.push_back(std::move(ref));
    }
  } catch (const std::string &why) {
    return Status::error(where, "corrupt checkpoint manifest: " + why);
  } catch (const nlohmann::json::exception &e) {
    return Status::error(where, std::string("corrupt checkpoint manifest: ") + e.what());
  }
  std::sort(mf.shards.begin(), mf.shards.end(),
            [](const ShardRef &a, const ShardRef &b) { return a.program < b.program; });
  if (plan::sha256Hex(manifestJson(mf).dump()) != stored)
    return Status::error(where, "corrupt checkpoint manifest: its SHA-256 checksum does not match "
                                "its contents (delete it to resume from an older checkpoint)");
  return mf;
}

Status writeManifest(const std::string &dir, const Manifest &manifest) {
  for (const ShardRef &s : manifest.shards)
    if (std::string why = badShardFile(s.file); !why.empty())
      return Status::error(dir, "internal error: shard file '" + s.file + "' " + why);
  const std::string path = (fs::path(dir) / manifestFileName(manifest.meta.step)).string();
  DTC_RETURN_IF_ERROR(writeFileAtomically(path, serializeManifest(manifest)));
  return syncPath(dir, true);
}

Expected<Manifest> readManifest(const std::string &path,
                                const std::optional<std::string> &planFingerprint) {
  DTC_ASSIGN_OR_RETURN(std::string text,
                       readInputFile(path, "checkpoint manifest", kMaxManifestBytes));
  DTC_ASSIGN_OR_RETURN(Manifest mf, parseManifest(text, path));
  if (planFingerprint && mf.meta.planFingerprint != *planFingerprint)
    return Status::error(path, "checkpoint of another plan (fingerprint " +
                                   mf.meta.planFingerprint.substr(0, 16) + "..., this plan's is " +
                                   planFingerprint->substr(0, 16) + "...)");
  return mf;
}

Expected<std::string> newestCheckpoint(const std::string &dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec))
    return Status::error(dir, "checkpoint folder does not exist (nothing to resume)");
  if (!fs::is_directory(dir, ec))
    return Status::error(dir, "not a folder");
  static const std::regex kLegacy("ckpt-[0-9]{1,18}\\.npz");
  // Chosen by the step each one records (a copy named ckpt-99 may hold step 5); on a tie of the
  // recorded step the contents must agree, and the highest name wins.
  struct Candidate {
    std::string path;
    long long nameStep = -1;
    int64_t step = -1;
    std::string text;
  };
  std::optional<Candidate> best;
  std::string legacy;
  for (const auto &entry : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, kLegacy) && legacy.empty())
      legacy = name;
    if (!std::regex_match(name, m, manifestPattern()))
      continue;
    if (!entry.is_regular_file(ec))
      return Status::error(entry.path().string(),
                           "is named like a checkpoint manifest but is not a regular file (a "
                           "FIFO, device or folder); remove it or use another --checkpoint-dir");
    Candidate c{entry.path().string(), std::stoll(m[1].str()), -1, ""};
    Expected<std::string> text = readInputFile(c.path, "checkpoint manifest", kMaxManifestBytes);
    if (!text)
      return Status::error(text.status().message() +
                           " (remove it or use another --checkpoint-dir)");
    Expected<Manifest> mf = parseManifest(*text, c.path);
    if (!mf)
      return mf.status();
    c.step = mf->meta.step;
    c.text = serializeManifest(*mf);
    if (best && c.step == best->step && c.text != best->text)
      return Status::error(dir, "checkpoints " + best->path + " and " + c.path +
                                    " both record step " + std::to_string(c.step) +
                                    " with different contents; remove the wrong one");
    if (!best || c.step > best->step || (c.step == best->step && c.nameStep > best->nameStep))
      best = std::move(c);
  }
  if (ec)
    return Status::error(dir, "cannot list the folder: " + ec.message());
  if (!best)
    return Status::error(
        dir, "no checkpoint (ckpt-<step>.manifest.json) to resume from" +
                 (legacy.empty() ? std::string()
                                 : " (" + legacy +
                                       " is a one-file checkpoint of an earlier dtc-run, which "
                                       "this one does not read)"));
  return best->path;
}

Status removeStaleCheckpointFiles(const std::string &dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return Status::ok();
  // AtomicFile's "<shard or manifest>.tmp.XXXXXX" (writeNpz and the manifest writer both use it),
  // and what dtc-run before the AtomicFile writer left: "<shard>.tmp" and libzip's
  // "<that>.XXXXXX" (mkstemp) inside it.
  static const std::regex kTemp("ckpt-[0-9]{1,18}(\\.shard-[0-9]{1,9})?\\.npz\\.tmp(\\.[A-Za-z0-9]{"
                                "6})?|ckpt-[0-9]{1,18}\\.manifest\\.json\\.tmp\\.[A-Za-z0-9]{6}");
  std::vector<fs::path> stale, shards;
  std::set<std::string> named;
  bool manifestsReadable = true;
  for (const auto &entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() >= 80)
      continue;
    std::error_code fileEc;
    const bool regular = entry.symlink_status(fileEc).type() == fs::file_type::regular;
    if (std::regex_match(name, kTemp)) {
      if (regular)
        stale.push_back(entry.path());
    } else if (std::regex_match(name, shardPattern())) {
      if (regular)
        shards.push_back(entry.path());
    } else if (std::regex_match(name, manifestPattern())) {
      Expected<Manifest> mf = entry.is_regular_file(fileEc)
                                  ? readManifest(entry.path().string(), std::nullopt)
                                  : Expected<Manifest>(Status::error("not a regular file"));
      if (!mf) {
        manifestsReadable = false;
        continue;
      }
      for (const ShardRef &s : mf->shards)
        named.insert(s.file);
    }
  }
  if (ec)
    return Status::error(dir, "cannot list the checkpoint folder: " + ec.message());
  if (manifestsReadable)
    for (const fs::path &p : shards)
      if (!named.count(p.filename().string()))
        stale.push_back(p);
  for (const fs::path &p : stale) {
    fs::remove(p, ec);
    if (ec)
      return Status::error(p.string(), "cannot remove this leftover of an interrupted "
                                       "checkpoint write: " +
                                           ec.message());
  }
  return Status::ok();
}

} // namespace dtc::rt
