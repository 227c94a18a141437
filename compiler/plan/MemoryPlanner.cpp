// Greedy-by-size offset assignment over live ranges (see MemoryPlanner.h).
#include "compiler/plan/MemoryPlanner.h"

#include <algorithm>
#include <numeric>

namespace dtc::plan {

namespace {

uint64_t alignUp(uint64_t v, uint64_t alignment) { return (v + alignment - 1) & ~(alignment - 1); }

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

  struct Placed {
    uint64_t begin, end; // [begin, end) in bytes
    size_t index;
  };
  std::vector<Placed> placed; // sorted by begin
  std::vector<Placed> conflicts;
  for (size_t idx : order) {
    const MemoryRequest &r = requests[idx];
    uint64_t size = alignUp(r.size, alignment);
    plan.noReuseBytes += size;
    if (size == 0)
      continue;
    conflicts.clear();
    for (const Placed &p : placed)
      if (liveRangesOverlap(requests[p.index], r))
        conflicts.push_back(p);
    // `placed` is sorted by begin, so `conflicts` is too: walk the gaps bottom-up.
    uint64_t offset = 0;
    for (const Placed &p : conflicts) {
      if (offset + size <= p.begin)
        break;
      offset = std::max(offset, p.end);
    }
    plan.offsets[idx] = offset;
    Placed np{offset, offset + size, idx};
    placed.insert(
        std::upper_bound(placed.begin(), placed.end(), np,
                         [](const Placed &a, const Placed &b) { return a.begin < b.begin; }),
        np);
    plan.arenaBytes = std::max(plan.arenaBytes, offset + size);
  }
  return plan;
}

} // namespace dtc::plan
