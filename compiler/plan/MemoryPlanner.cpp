// Greedy-by-size offset assignment over live ranges (see MemoryPlanner.h), with the placed
// blocks in a segment tree over time so that a request meets only the blocks it conflicts with.
#include "compiler/plan/MemoryPlanner.h"

#include "compiler/support/Status.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <map>
#include <numeric>
#include <optional>

namespace dtc::plan {

namespace {

uint64_t alignUp(uint64_t v, uint64_t alignment) { return (v + alignment - 1) & ~(alignment - 1); }

/// A union of byte ranges [begin, end), kept as disjoint intervals that neither overlap nor
/// touch (touching ones are merged), keyed by begin.
class IntervalUnion {
public:
  /// Adds [begin, end). Amortized O(log k) for k intervals: each merge removes one.
  void insert(uint64_t begin, uint64_t end) {
    auto it = runs_.upper_bound(begin);
    if (it != runs_.begin()) {
      auto prev = std::prev(it);
      if (prev->second >= begin) {
        begin = prev->first;
        end = std::max(end, prev->second);
        it = runs_.erase(prev);
      }
    }
    while (it != runs_.end() && it->first <= end) {
      end = std::max(end, it->second);
      it = runs_.erase(it);
    }
    runs_.emplace_hint(it, begin, end);
  }

  /// The end of the run that intersects [x, x + size), if one does; O(log k). Runs are disjoint
  /// and sorted, so the last run starting below x + size is the only candidate.
  std::optional<uint64_t> conflictEnd(uint64_t x, uint64_t size) const {
    auto it = runs_.lower_bound(x + size);
    if (it == runs_.begin())
      return std::nullopt;
    --it;
    if (it->second > x)
      return it->second;
    return std::nullopt;
  }

private:
  std::map<uint64_t, uint64_t> runs_;
};

/// Placed blocks in order of offset, for the plain scan: a list of sorted chunks of at most
/// kChunk entries (a two-level sorted array), so that an insertion moves at most kChunk entries
/// and a scan reads memory in order.
class OffsetOrder {
public:
  struct Placed {
    uint64_t begin, end; ///< bytes [begin, end)
    size_t lo, hi;       ///< live leaves [lo, hi]
  };

  /// O(n / kChunk + kChunk).
  void insert(const Placed &p) {
    auto after = [](const Placed &a, uint64_t begin) { return a.begin <= begin; };
    size_t c = 0;
    while (c + 1 < chunks_.size() && !chunks_[c + 1].empty() &&
           chunks_[c + 1].front().begin <= p.begin)
      ++c;
    if (chunks_.empty())
      chunks_.emplace_back();
    std::vector<Placed> &chunk = chunks_[c];
    chunk.insert(std::lower_bound(chunk.begin(), chunk.end(), p.begin, after), p);
    if (chunk.size() > 2 * kChunk) {
      std::vector<Placed> upper(chunk.begin() + kChunk, chunk.end());
      chunk.resize(kChunk);
      chunks_.insert(chunks_.begin() + static_cast<std::ptrdiff_t>(c) + 1, std::move(upper));
    }
    ++size_;
  }

  size_t size() const { return size_; }

  /// The lowest free offset at or above x, when no lower offset is free: the pairwise planner's
  /// walk over the blocks live at the same time as leaves [lo, hi], in order of offset.
  uint64_t scanFrom(uint64_t x, size_t lo, size_t hi, uint64_t size) const {
    for (const std::vector<Placed> &chunk : chunks_)
      for (const Placed &p : chunk) {
        if (p.lo > hi || lo > p.hi)
          continue;
        if (x + size <= p.begin)
          return x;
        x = std::max(x, p.end);
      }
    return x;
  }

private:
  static constexpr size_t kChunk = 256;
  std::vector<std::vector<Placed>> chunks_;
  size_t size_ = 0;
};

/// Segment tree over leaves 0..leaves-1 (compressed instruction indices). A block with live
/// leaves [lo, hi] has O(log n) canonical nodes (the maximal subtrees inside [lo, hi]). Two
/// blocks' ranges intersect exactly when a canonical node of one is an ancestor-or-self of a
/// canonical node of the other (both lie on the root path of a shared leaf). So each node keeps
/// `cover` (blocks with this node canonical) and `touch` (blocks with a canonical node in its
/// subtree), and the blocks conflicting with [lo, hi] are: `touch` of its canonical nodes and
/// `cover` of their strict ancestors.
class LiveRangeTree {
public:
  explicit LiveRangeTree(size_t leaves) {
    while (leaves_ < leaves)
      leaves_ *= 2;
    setOf_.assign(2 * leaves_, {-1, -1});
    stamp_.assign(2 * leaves_, 0);
  }

  /// Records that bytes [begin, end) are taken over leaves [lo, hi].
  void insert(size_t lo, size_t hi, uint64_t begin, uint64_t end) {
    byOffset_.insert({begin, end, lo, hi});
    decompose(lo, hi);
    for (size_t c : canonical_) {
      set(c, 0).insert(begin, end);
      set(c, 1).insert(begin, end);
    }
    for (size_t u : ancestors_)
      set(u, 1).insert(begin, end);
  }

  /// The lowest offset x such that [x, x + size) is free over leaves [lo, hi]. Every jump moves
  /// x to the end of an occupied run that [x, x + size) meets, and every offset skipped meets
  /// that run, so the first x that no union rejects is the lowest free one. When the unions
  /// interleave so many small holes that the probes would cost more than looking at every
  /// placed block, the rest of the search is the plain scan of all blocks by offset.
  uint64_t lowestFree(size_t lo, size_t hi, uint64_t size) {
    decompose(lo, hi);
    probe_.clear();
    for (size_t c : canonical_)
      if (setOf_[c][1] >= 0)
        probe_.push_back(&unions_[static_cast<size_t>(setOf_[c][1])]);
    for (size_t u : ancestors_)
      if (setOf_[u][0] >= 0)
        probe_.push_back(&unions_[static_cast<size_t>(setOf_[u][0])]);
    uint64_t x = 0;
    // A probe (a map search) costs about as much as visiting 16 blocks in the scan.
    size_t budget = 8 + byOffset_.size() / 16;
    // Probe the unions round-robin until all of them in a row accept x.
    size_t accepted = 0;
    for (size_t k = 0; accepted < probe_.size();) {
      if (budget-- == 0)
        return byOffset_.scanFrom(x, lo, hi, size);
      if (std::optional<uint64_t> end = probe_[k]->conflictEnd(x, size)) {
        x = *end; // the same union may still reject the new x: probe it again
        accepted = 0;
      } else {
        ++accepted;
        k = (k + 1) % probe_.size();
      }
    }
    return x;
  }

private:
  /// Fills canonical_ with the canonical nodes of [lo, hi] and ancestors_ with their strict
  /// ancestors (each once: a walk up stops at a node already seen).
  void decompose(size_t lo, size_t hi) {
    ++clock_;
    canonical_.clear();
    ancestors_.clear();
    for (size_t l = lo + leaves_, r = hi + leaves_ + 1; l < r; l /= 2, r /= 2) {
      if (l & 1)
        canonical_.push_back(l++);
      if (r & 1)
        canonical_.push_back(--r);
    }
    for (size_t c : canonical_)
      for (size_t u = c / 2; u >= 1 && stamp_[u] != clock_; u /= 2) {
        stamp_[u] = clock_;
        ancestors_.push_back(u);
      }
  }

  IntervalUnion &set(size_t node, int which) {
    int32_t &id = setOf_[node][static_cast<size_t>(which)];
    if (id < 0) {
      id = static_cast<int32_t>(unions_.size());
      unions_.emplace_back();
    }
    return unions_[static_cast<size_t>(id)];
  }

  size_t leaves_ = 1;
  std::vector<std::array<int32_t, 2>> setOf_; ///< per node: index of cover, touch in `unions_`
  std::vector<IntervalUnion> unions_;         ///< allocated on first use
  std::vector<uint64_t> stamp_;
  uint64_t clock_ = 0;
  std::vector<size_t> canonical_, ancestors_;
  std::vector<const IntervalUnion *> probe_;
  OffsetOrder byOffset_; ///< every placed block, for the scan
};

} // namespace

MemoryPlan planMemory(const std::vector<MemoryRequest> &requests, uint64_t alignment) {
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (requests[a].size != requests[b].size)
      return requests[a].size > requests[b].size;
    return requests[a].first < requests[b].first;
  });

  // Only the order of the range ends matters for intersection: compress them to leaves.
  std::vector<int64_t> times;
  times.reserve(2 * requests.size());
  for (const MemoryRequest &r : requests) {
    if (alignUp(r.size, alignment) == 0)
      continue;
    DTC_CHECK(r.first <= r.last, "memory request with a live range that ends before it starts");
    times.push_back(r.first);
    times.push_back(r.last);
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  auto leafOf = [&](int64_t t) {
    return static_cast<size_t>(std::lower_bound(times.begin(), times.end(), t) - times.begin());
  };

  LiveRangeTree tree(std::max<size_t>(times.size(), 1));
  for (size_t idx : order) {
    const MemoryRequest &r = requests[idx];
    uint64_t size = alignUp(r.size, alignment);
    plan.noReuseBytes += size;
    if (size == 0)
      continue;
    const size_t lo = leafOf(r.first), hi = leafOf(r.last);
    const uint64_t offset = tree.lowestFree(lo, hi, size);
    plan.offsets[idx] = offset;
    tree.insert(lo, hi, offset, offset + size);
    plan.arenaBytes = std::max(plan.arenaBytes, offset + size);
  }
  return plan;
}

} // namespace dtc::plan
