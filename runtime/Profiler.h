// Per-instruction timing for `dtc-run --profile`: wall time of each kernel call, summed over
// runs, printed as a table sorted by total time, with the rank's arena and the process's peak
// resident memory.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace dtc::rt {

class Profiler {
public:
  struct Entry {
    std::string op;
    std::string node;
    int64_t calls = 0;
    double seconds = 0;
  };
  /// One entry per instruction, in program order.
  void reset(std::vector<Entry> entries) { entries_ = std::move(entries); }
  /// Zeroes every entry's calls and time.
  void clear() {
    for (Entry &e : entries_) {
      e.calls = 0;
      e.seconds = 0;
    }
  }
  void add(size_t instruction, double seconds) {
    entries_[instruction].calls++;
    entries_[instruction].seconds += seconds;
  }
  const std::vector<Entry> &entries() const { return entries_; }
  /// The table: rank, op, node, calls, total ms, mean us, share of the total; sorted by total
  /// time (ties: program order); then a per-op summary, the arena bytes and the peak RSS.
  void print(std::ostream &os, uint64_t arenaBytes) const;

private:
  std::vector<Entry> entries_;
};

/// Peak resident set size of this process in bytes (getrusage), 0 when unknown.
uint64_t peakResidentBytes();

} // namespace dtc::rt
