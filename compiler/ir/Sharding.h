// How a tensor is distributed over the ranks of a tensor-parallel group (DESIGN.md section 6,
// `tp=T`): replicated (every rank holds all of it), split along one axis (rank r holds the r-th
// of `parts` equal slices), or partial (every rank holds a full-shaped addend; the tensor is
// the sum over the group, as a row-parallel MatMul leaves it before its all-reduce). GSPMD
// (Xu et al. 2021) calls these replicated, tiled and partial; Megatron-LM's column- and
// row-parallel linear layers are splits of the weight's output and input axis.
//
// A split may be blocked: the axis is `blocks` equal blocks laid end to end, and each block is
// split into `parts` (a fused Q/K/V projection of width 3d is 3 blocks of d; rank r holds the
// r-th part of each block, so it gets its heads of Q, K and V).
//
// An unblocked split of an axis of size n that does not divide by `parts` is uneven, as
// torch.chunk's and numpy.array_split's: the first n % parts ranks hold one element more
// (10 in 4: 3, 3, 2, 2). Ranks of one tp group then hold tensors of different shapes, so they
// run programs of their own (splitRange gives each its range).
#pragma once

#include "compiler/support/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dtc::ir {

struct Sharding {
  enum class Kind { kReplicated, kSplit, kPartial };
  Kind kind = Kind::kReplicated;
  int64_t axis = -1;  ///< kSplit: the split axis (non-negative)
  int64_t parts = 1;  ///< kSplit, kPartial: the group size
  int64_t blocks = 1; ///< kSplit: equal blocks of the axis, each split into `parts`

  static Sharding replicated() { return {}; }
  static Sharding split(int64_t axis, int64_t parts, int64_t blocks = 1) {
    return {Kind::kSplit, axis, parts, blocks};
  }
  static Sharding partial(int64_t parts) { return {Kind::kPartial, -1, parts, 1}; }

  bool isReplicated() const { return kind == Kind::kReplicated; }
  bool isSplit() const { return kind == Kind::kSplit; }
  bool isPartial() const { return kind == Kind::kPartial; }
  bool operator==(const Sharding &o) const {
    return kind == o.kind && axis == o.axis && parts == o.parts && blocks == o.blocks;
  }
  bool operator!=(const Sharding &o) const { return !(*this == o); }
  /// "R", "S1/2" (axis 1 in 2 parts), "S1/2x3" (3 blocks), "P/2".
  std::string text() const;
};

/// The local (per-rank) dims of a tensor of global dims `whole` under `s`. Errors when the split
/// axis is out of range or its size does not divide by blocks * parts (naming both).
Expected<std::vector<int64_t>> shardDims(const std::vector<int64_t> &whole, const Sharding &s);

/// Rank `index`'s range [first, first + length) of an axis of size `size` split unevenly into
/// `parts` (numpy.array_split: the first size % parts ranks get ceil(size / parts), the others
/// floor; an even split gives size / parts each).
struct SplitRange {
  int64_t first = 0;
  int64_t length = 0;
};
SplitRange splitRange(int64_t size, int64_t parts, int64_t index);

/// Whether a split of `whole` under `s` is uneven: unblocked, its axis not dividing by parts.
bool isUnevenSplit(const std::vector<int64_t> &whole, const Sharding &s);

/// Rank `index`'s local dims under `s`, an uneven split allowed (splitRange) when unblocked and
/// the axis has at least `parts` elements (no rank empty). Errors otherwise as shardDims, naming
/// the size and the divisor.
Expected<std::vector<int64_t>> shardDimsOf(const std::vector<int64_t> &whole, const Sharding &s,
                                           int64_t index);

/// Rank `index`'s shard of a dense row-major tensor of dims `whole` and element size `elemSize`
/// (bytes), under a split `s` (replicated: a copy of everything; uneven: splitRange's rows).
/// Precondition: shardDimsOf succeeded.
std::string sliceShard(const std::string &bytes, const std::vector<int64_t> &whole,
                       size_t elemSize, const Sharding &s, int64_t index);

/// The inverse of sliceShard: writes rank `index`'s shard `local` into `whole` (sized for the
/// global dims) in place.
void placeShard(std::string &wholeBytes, const std::vector<int64_t> &whole, size_t elemSize,
                const Sharding &s, int64_t index, const std::string &local);

} // namespace dtc::ir
