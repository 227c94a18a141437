// Training checkpoints (DESIGN.md section 8), sharded the way DeepSpeed and Megatron shard
// theirs: one shard file per distinct program of the plan, holding that program's persistent
// buffers, and one manifest per step naming every shard with its checksum. The manifest is
// written last, atomically: a step's checkpoint exists exactly when its manifest does.
//
// File format (version 2), in the checkpoint folder D, for step S (zero-padded to 8+ digits):
// - D/ckpt-<S>.shard-<P>.npz, one per shard key P: the program index of the plan (Plan.programs;
//   a pipeline has one per stage, data-parallel replicas share one program and so one shard);
//   with tensor parallelism (tp degree T > 1), whose peers run one program on different slices,
//   P = program * T + tp rank. Written by the lowest rank with that key: an uncompressed .npz
//   (numpy.load reads it) holding one array per persistent buffer of shard P (parameters,
//   optimizer state, running statistics), named after the plan buffer, and "__meta__", a u8
//   array with the UTF-8 JSON object {"format": "dtc-checkpoint-shard", "version": 2, "step": S,
//   "program": P, "plan_fingerprint": ..., "sha256": H}. H is the SHA-256 (lowercase hex) of the
//   lines "<name>\t<dtype number>\t<shape, comma-separated>\t<sha256 of the bytes>\n" of every
//   other array sorted by name, followed by the meta JSON without "sha256" (nlohmann dump(),
//   keys sorted, no spaces).
// - D/ckpt-<S>.manifest.json, written by rank 0 after every shard of the step is on disk: a JSON
//   object {"format": "dtc-checkpoint", "version": 2, the CheckpointMeta keys below, "shards":
//   [{"program": P, "file": "ckpt-<S>.shard-<P>.npz", "sha256": H, "bytes": file size}, ...]
//   (sorted by program), "sha256": SHA-256 of the manifest's dump() without "sha256"}. Shard
//   files are plain names in D (no folder, no ".."), of the form above.
// Every file is written to a temporary in D and renamed into place after an fsync, so a
// failure or a kill leaves old files whole; a shard whose step has no manifest (a write cut
// short) is ignored, and removed on start with the temporaries.
#pragma once

#include "compiler/support/Status.h"
#include "runtime/io/Npy.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtc::rt {

/// Where the run stands after `step` optimizer steps.
struct CheckpointMeta {
  /// Optimizer steps done ("step").
  int64_t step = 0;
  /// Epoch the next step belongs to, and steps of it already done ("epoch", "step_in_epoch").
  int64_t epoch = 0;
  int64_t stepInEpoch = 0;
  /// Shuffling seed and whether the run shuffles ("seed", "shuffle").
  uint64_t seed = 0;
  bool shuffle = true;
  /// Samples of the training set ("samples"): a resumed run must read the same data.
  int64_t samples = 0;
  /// plan::fingerprint of the plan ("plan_fingerprint").
  std::string planFingerprint;
  /// Running sums of the current epoch, so that its summary covers the steps before the
  /// checkpoint ("epoch_loss_sum", "epoch_steps", "epoch_correct", "epoch_counted").
  double epochLossSum = 0;
  int64_t epochSteps = 0;
  int64_t epochCorrect = 0;
  int64_t epochCounted = 0;
};

/// One shard of a checkpoint, as its manifest names it.
struct ShardRef {
  /// Index of the plan program whose buffers the shard holds.
  int program = 0;
  /// File name inside the checkpoint folder ("ckpt-00000004.shard-1.npz").
  std::string file;
  /// The shard's content checksum (H in the format above), lowercase hex.
  std::string sha256;
  /// Size of the file in bytes.
  uint64_t bytes = 0;
};

/// The manifest of one checkpoint.
struct Manifest {
  CheckpointMeta meta;
  /// One per program, sorted by program.
  std::vector<ShardRef> shards;
  /// The manifest file it was read from ("" when made in memory); shards live beside it.
  std::string path;

  /// The shard of `program`, or null.
  const ShardRef *shardOf(int program) const;
};

/// "ckpt-<step>.manifest.json" and "ckpt-<step>.shard-<program>.npz", step zero-padded to 8.
std::string manifestFileName(int64_t step);
std::string shardFileName(int64_t step, int program);

/// Writes `arrays` (a program's persistent buffers, named after them) as shard `program` of
/// step `meta.step` into folder `dir`: atomically (temporary + rename) and durably (fsync of the
/// file and the folder). Returns the reference the manifest records. Errors name the shard's
/// path: an array named "__meta__", duplicate names, I/O failures (a full disk). Only
/// meta.step and meta.planFingerprint are recorded in the shard (the rest is the manifest's).
Expected<ShardRef> writeShard(const std::string &dir, const CheckpointMeta &meta, int program,
                              std::vector<HostArray> arrays);

/// Reads shard `program` of `manifest` (from the folder of manifest.path) and verifies it:
/// the manifest names one, the file is a regular file of the recorded size, its meta data is a
/// shard's of the manifest's step, program and plan fingerprint, and its checksum matches both
/// its own record and the manifest's. Returns its arrays (without "__meta__"). Errors:
/// "<shard path>: ..." ("is missing", "corrupt checkpoint shard: ...", "not a dtc checkpoint
/// shard").
Expected<std::vector<HostArray>> readShard(const Manifest &manifest, int program);

/// The manifest's JSON text (format above; pretty-printed, one key per line).
std::string serializeManifest(const Manifest &manifest);

/// Parses and verifies a manifest's text; `where` names it in errors ("<where>: ..."): not JSON
/// ("corrupt checkpoint manifest: ..."), another format or version, a missing key or one of the
/// wrong type (named), no shards, a program listed twice or negative, a shard file that is not
/// a plain name of the form ckpt-<digits>.shard-<digits>.npz in the folder (a path, "..", a
/// control character), a malformed checksum, and the manifest's own checksum mismatching its
/// contents. The result's path is `where`.
Expected<Manifest> parseManifest(const std::string &text, const std::string &where);

/// Writes `manifest` as "<dir>/ckpt-<step>.manifest.json" atomically and durably; call it only
/// once every shard it names is written. Errors name the path.
Status writeManifest(const std::string &dir, const Manifest &manifest);

/// Reads (a regular file of at most 16 MiB) and parses a manifest; with `planFingerprint`, a
/// manifest of another plan is an error ("checkpoint of another plan (fingerprint ...)").
Expected<Manifest> readManifest(const std::string &path,
                                const std::optional<std::string> &planFingerprint);

/// The manifest of `dir` with the highest recorded step (files named
/// ckpt-<digits>.manifest.json, chosen by the step they record, not by the name; on equal steps
/// with equal contents the highest name; temporaries and shards without a manifest are
/// ignored). Errors: `dir` missing or not a folder, no manifest in it (naming files of the
/// one-file format of earlier dtc-run versions, ckpt-<step>.npz, when there are some), a file
/// named like a manifest that is not a regular file (a FIFO) or cannot be read or parsed, two
/// manifests recording the same step with different contents.
Expected<std::string> newestCheckpoint(const std::string &dir);

/// Removes what interrupted checkpoint writes leave in `dir` (kill -9 during a write): regular
/// files named like the temporaries of a shard, a manifest or a version-1 checkpoint
/// ("ckpt-<digits>.shard-<digits>.npz.tmp", "ckpt-<digits>.manifest.json.tmp.XXXXXX",
/// "ckpt-<digits>.npz.tmp[.XXXXXX]"; writeNpz's and libzip's), and shard files that no manifest
/// of the folder names (the shards of a step whose manifest was never written). When a file
/// named like a manifest cannot be read, no shard is removed (newestCheckpoint reports it).
/// Nothing else is touched. Called on start, before anything reads the folder. A missing `dir`
/// is not an error.
Status removeStaleCheckpointFiles(const std::string &dir);

} // namespace dtc::rt
