// Training checkpoints (DESIGN.md section 8): every persistent buffer of the step (parameters,
// optimizer state, running statistics) plus where the run stands, in one .npz file written
// atomically, with a SHA-256 checksum over its contents that is verified on load.
//
// File format: <dir>/ckpt-<step, 8+ digits>.npz, an uncompressed .npz (numpy.load reads it)
// holding one array per buffer, named after the plan buffer, and "__meta__", a u8 array with
// the UTF-8 JSON object of CheckpointMeta (keys below) plus "sha256": SHA-256 of the lines
// "<name>\t<dtype number>\t<shape>\t<sha256 of the bytes>\n" of every other array sorted by
// name, followed by the meta JSON without "sha256" (nlohmann dump(), keys sorted).
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

struct Checkpoint {
  CheckpointMeta meta;
  /// One array per saved buffer, named after the buffer.
  std::vector<HostArray> arrays;
};

/// "<dir>/ckpt-<step>.npz" with the step zero-padded to 8 digits.
std::string checkpointPath(const std::string &dir, int64_t step);

/// Writes `ckpt` to `path` atomically (a failure leaves no file, an old file stays whole).
/// Errors name the path.
Status writeCheckpoint(const std::string &path, const Checkpoint &ckpt);

/// Reads and verifies a checkpoint. Errors ("<path>: ..."): unreadable or not a checkpoint, a
/// checksum mismatch ("corrupt checkpoint"), or, when `planFingerprint` is given, a checkpoint
/// of another plan.
Expected<Checkpoint> readCheckpoint(const std::string &path,
                                    const std::optional<std::string> &planFingerprint);

/// The checkpoint of `dir` with the highest recorded step (files named ckpt-<digits>.npz, chosen
/// by the step in their meta data, not by the name; on equal steps with equal contents the
/// highest name; temporary files of interrupted writes are ignored). Errors: `dir` missing or
/// not a folder, no checkpoint in it, a file named like one that is not a regular file (a
/// FIFO) or whose meta data cannot be read, two checkpoints recording the same step with
/// different contents.
Expected<std::string> newestCheckpoint(const std::string &dir);

/// Removes the temporary files an interrupted checkpoint write leaves in `dir` (kill -9 during
/// writeCheckpoint): regular files named "ckpt-<digits>.npz.tmp" (writeNpz's) or
/// "ckpt-<digits>.npz.tmp.XXXXXX" (libzip's, inside it) only; nothing else is touched. Called
/// on start, before anything reads the folder. A missing `dir` is not an error.
Status removeStaleCheckpointTemporaries(const std::string &dir);

} // namespace dtc::rt
