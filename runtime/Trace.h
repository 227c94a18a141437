// Chrome/Perfetto trace of a run (dtc-run --trace trace.json): every kernel on the "compute"
// thread and every collective on the "comm" thread of each rank, one process row per rank, on
// one timeline. Events are recorded in memory (a mutex-guarded vector: tens of thousands per
// run) and written once at the end; rank 0 gathers the other ranks' events and writes the file.
// Format: the Trace Event Format's JSON object form ({"traceEvents": [...]}) with complete
// ("ph": "X") events, microsecond timestamps.
#pragma once

#include "compiler/support/Status.h"

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace dtc::rt {

class Communicator;

class Tracer {
public:
  enum Thread : int { kCompute = 0, kComm = 1, kHost = 2 };
  struct Event {
    std::string name;     ///< node name, collective name
    std::string category; ///< op type ("Conv"), "all-reduce", "step"
    int thread = kCompute;
    int64_t beginUs = 0; ///< since the tracer's origin
    int64_t durationUs = 0;
    uint64_t bytes = 0; ///< collectives: bytes reduced (an "args" entry), 0 otherwise
  };

  /// `rank` labels this process's row.
  explicit Tracer(int rank);
  /// Microseconds since the origin (steady clock; one origin per machine-wide clock, so ranks
  /// of one host line up; setOrigin aligns ranks of several hosts after a barrier).
  int64_t nowUs() const;
  /// Makes "now" the origin (call right after a barrier on every rank).
  void setOrigin();
  /// Thread-safe.
  void record(Event e);
  /// Writes the trace: with `comm` (several ranks) every rank must call it; rank 0 gathers all
  /// events and writes `path` atomically, the others write nothing. Errors: the file cannot be
  /// written, a communication failure.
  Status write(const std::string &path, Communicator *comm);
  size_t size() const;
  /// A copy of the events recorded so far (thread-safe).
  std::vector<Event> snapshot() const;

private:
  int rank_;
  std::chrono::steady_clock::time_point origin_;
  mutable std::mutex mu_;
  std::vector<Event> events_;
};

} // namespace dtc::rt
