// The device mesh a --strategy describes (DESIGN.md sections 6 and 6a): axis degrees for data
// (dp), pipeline (pp) and tensor (tp) parallelism, the pipeline's micro-batches and schedule,
// and the one place that maps a rank to its mesh coordinates and its communicator groups.
// Ranks are laid out tp fastest, then dp, then pp (Megatron-LM's order), so tensor-parallel peers
// are neighbours (one machine) and a pipeline stage's data-parallel replicas are contiguous.
#pragma once

#include "compiler/support/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dtc {

/// The order in which a pipeline stage runs the forward (F) and backward (B) passes of its
/// micro-batches. GPipe: all F, then all B (Huang et al. 2019). 1F1B: PipeDream-Flush's
/// one-forward-one-backward steady state after a warm-up of (stages - stage - 1) forwards
/// (Narayanan et al. 2021), same bubble as GPipe, fewer activations in flight. ZB-H1 (Qi et al.
/// 2023): backward split into the input-gradient part B and the weight-gradient part W, W
/// deferred into the bubbles, at most `stages` + 1 micro-batches in flight per stage.
/// Interleaved 1F1B (Narayanan et al. 2021, section 2.2.2): each pipeline rank holds V model
/// chunks (virtual stages r, r + S, ..., r + (V-1)S of S*V), so a micro-batch visits every rank
/// V times and the bubble shrinks V-fold, for V times the point-to-point traffic.
enum class PipelineSchedule { kGPipe, k1F1B, kZBH1, kInterleaved };

/// A mesh axis; also names a rank's communicator group along that axis.
enum class MeshAxis { kDp, kPp, kTp };
const char *meshAxisName(MeshAxis a);                 ///< "dp", "pp", "tp"
/// "gpipe", "1f1b", "zb-h1", "interleaved"
const char *pipelineScheduleName(PipelineSchedule s);

/// A rank's place in the mesh: 0 <= dp < Mesh::dp, and so on.
struct MeshCoord {
  int64_t dp = 0, pp = 0, tp = 0;
  bool operator==(const MeshCoord &o) const { return dp == o.dp && pp == o.pp && tp == o.tp; }
};

/// What --strategy describes. `single` is one device without communicators; dp=1 is one rank
/// with its (trivial) collectives, as today's dp plans.
struct Mesh {
  bool single = true;
  int64_t dp = 1, pp = 1, tp = 1;
  /// Micro-batches per optimizer step of a pipeline (pp > 1); 1 otherwise.
  int64_t microbatches = 1;
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  /// Model chunks per pipeline rank: V >= 2 for the interleaved schedule, else 1.
  int64_t virtualStages = 1;
  /// Parameter servers (`ps=S:W`, DESIGN.md section 6): S server tasks own the parameters'
  /// shards, W worker tasks compute gradients on B/W samples each (dp holds W). 0: none.
  int64_t psServers = 0;
  /// Central storage (`cs=N`): one process, N devices compute B/N samples each; parameters,
  /// optimizer state and the update stay on the host (dp holds N). 0: none.
  int64_t csDevices = 0;

  /// True for ps=S:W and cs=N: a role layout (workers and an optimizer host), not a mesh.
  bool hasParameterHost() const { return psServers > 0 || csDevices > 0; }

  /// Pipeline stages of the model: pp * virtualStages; virtual stage v runs on the pipeline rank
  /// v % pp as its chunk v / pp.
  int64_t stages() const { return pp * virtualStages; }

  int64_t worldSize() const { return dp * pp * tp; }
  int64_t degree(MeshAxis a) const;
  /// rank = tp + T * (dp + D * pp). Precondition: 0 <= rank < worldSize().
  MeshCoord coordOf(int64_t rank) const;
  int64_t rankOf(const MeshCoord &c) const;
  /// The world ranks of `rank`'s group along `axis`: every rank whose other coordinates equal
  /// `rank`'s, in order of their coordinate on `axis` (so a rank's index in its pp group is its
  /// stage, in its dp group its data-parallel replica index).
  std::vector<int64_t> groupOf(int64_t rank, MeshAxis axis) const;
  /// Every group along `axis`, each listed once, ordered by its smallest rank.
  std::vector<std::vector<int64_t>> groups(MeshAxis axis) const;
  /// The canonical --strategy text: "single", "dp=4", "dp=2,pp=2,microbatches=4,schedule=1f1b".
  std::string text() const;
};

/// Parses a --strategy value: "single", or comma-separated KEY=VALUE items with keys dp, pp, tp
/// (degrees, each in [1, 65536]; the world size at most 65536), microbatches (pp only, >= 1,
/// default: pp), schedule (gpipe | 1f1b | zb-h1 | interleaved, pp only, default 1f1b) and
/// virtual-stages (interleaved only, V in [2, 64], default 2; the micro-batches must be a
/// multiple of pp, as Megatron-LM requires). "ps=S:W" (S servers in [1, 256], W workers in
/// [1, 4096]) and "cs=N" (N devices in [1, 256]) stand alone. "dp=N" alone is today's
/// data parallelism. Errors name the flag and the item: an unknown key, a repeated key, a value
/// out of range, a pipeline option without pp > 1. tp > 1 is parsed but refused by the caller
/// until tensor parallelism lands.
Expected<Mesh> parseMesh(const std::string &strategy);

} // namespace dtc
