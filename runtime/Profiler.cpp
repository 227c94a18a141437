// Profile table printing (see Profiler.h).
#include "runtime/Profiler.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>

namespace dtc::rt {

uint64_t peakResidentBytes() {
  struct rusage ru {};
  if (getrusage(RUSAGE_SELF, &ru) != 0)
    return 0;
  return static_cast<uint64_t>(ru.ru_maxrss) * 1024; // Linux reports KiB
}

void Profiler::print(std::ostream &os, uint64_t arenaBytes) const {
  double total = 0;
  for (const Entry &e : entries_)
    total += e.seconds;
  std::vector<size_t> order(entries_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return entries_[a].seconds > entries_[b].seconds; });
  char line[512];
  std::snprintf(line, sizeof line, "%-20s %-40s %7s %11s %11s %6s\n", "op", "node", "calls",
                "total ms", "mean us", "%");
  os << line;
  for (size_t i : order) {
    const Entry &e = entries_[i];
    std::string node = e.node.size() > 40 ? "..." + e.node.substr(e.node.size() - 37) : e.node;
    std::snprintf(line, sizeof line, "%-20s %-40s %7lld %11.3f %11.1f %6.1f\n", e.op.c_str(),
                  node.c_str(), static_cast<long long>(e.calls), e.seconds * 1e3,
                  e.calls ? e.seconds * 1e6 / e.calls : 0.0,
                  total > 0 ? 100 * e.seconds / total : 0.0);
    os << line;
  }
  std::map<std::string, std::pair<int64_t, double>> byOp;
  for (const Entry &e : entries_) {
    byOp[e.op].first += e.calls;
    byOp[e.op].second += e.seconds;
  }
  std::vector<std::pair<std::string, std::pair<int64_t, double>>> ops(byOp.begin(), byOp.end());
  std::stable_sort(ops.begin(), ops.end(),
                   [](const auto &a, const auto &b) { return a.second.second > b.second.second; });
  os << "per op:\n";
  for (const auto &[op, cs] : ops) {
    std::snprintf(line, sizeof line, "  %-20s %7lld calls %11.3f ms %6.1f%%\n", op.c_str(),
                  static_cast<long long>(cs.first), cs.second * 1e3,
                  total > 0 ? 100 * cs.second / total : 0.0);
    os << line;
  }
  std::snprintf(line, sizeof line, "kernel time %.3f ms, arena %llu bytes, peak RSS %llu bytes\n",
                total * 1e3, static_cast<unsigned long long>(arenaBytes),
                static_cast<unsigned long long>(peakResidentBytes()));
  os << line;
}

} // namespace dtc::rt
