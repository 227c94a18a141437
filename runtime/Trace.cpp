// The tracer (Trace.h): events are kept in memory; write() gathers every rank's events to rank 0
// through the communicator (serialized, all-gathered padded to the longest rank's bytes) and
// rank 0 writes one Chrome/Perfetto JSON file atomically.
#include "runtime/Trace.h"

#include "compiler/support/FileIO.h"
#include "runtime/comm/Communicator.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <limits>

namespace dtc::rt {
namespace {

// Serialization: little-endian host layout (all ranks of a job share the architecture).
template <typename T> void put(std::string &out, T v) {
  out.append(reinterpret_cast<const char *>(&v), sizeof v);
}
void putString(std::string &out, const std::string &s) {
  put<uint32_t>(out, static_cast<uint32_t>(s.size()));
  out += s;
}

class Reader {
public:
  Reader(const char *data, size_t size) : p_(data), end_(data + size) {}
  template <typename T> bool get(T &v) {
    if (static_cast<size_t>(end_ - p_) < sizeof v)
      return false;
    std::memcpy(&v, p_, sizeof v);
    p_ += sizeof v;
    return true;
  }
  bool getString(std::string &s) {
    uint32_t n = 0;
    if (!get(n) || static_cast<size_t>(end_ - p_) < n)
      return false;
    s.assign(p_, n);
    p_ += n;
    return true;
  }

private:
  const char *p_;
  const char *end_;
};

std::string serialize(int rank, const std::vector<Tracer::Event> &events) {
  std::string out;
  put<int32_t>(out, rank);
  put<uint64_t>(out, events.size());
  for (const Tracer::Event &e : events) {
    putString(out, e.name);
    putString(out, e.category);
    put<int32_t>(out, e.thread);
    put<int64_t>(out, e.beginUs);
    put<int64_t>(out, e.durationUs);
    put<uint64_t>(out, e.bytes);
  }
  return out;
}

bool deserialize(const char *data, size_t size, int &rank, std::vector<Tracer::Event> &events) {
  Reader r(data, size);
  int32_t rk = 0;
  uint64_t n = 0;
  if (!r.get(rk) || !r.get(n))
    return false;
  rank = rk;
  for (uint64_t i = 0; i < n; ++i) {
    Tracer::Event e;
    int32_t thread = 0;
    if (!r.getString(e.name) || !r.getString(e.category) || !r.get(thread) || !r.get(e.beginUs) ||
        !r.get(e.durationUs) || !r.get(e.bytes))
      return false;
    e.thread = thread;
    events.push_back(std::move(e));
  }
  return true;
}

const char *threadName(int t) {
  switch (t) {
  case Tracer::kCompute:
    return "compute";
  case Tracer::kComm:
    return "comm";
  case Tracer::kHost:
    return "host";
  default:
    return "other";
  }
}

} // namespace

// The steady clock's epoch is the machine's boot, common to every process of one host.
Tracer::Tracer(int rank) : rank_(rank), origin_() {}

int64_t Tracer::nowUs() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                               origin_)
      .count();
}

void Tracer::setOrigin() {
  std::lock_guard<std::mutex> lock(mu_);
  // Keep the events already recorded on the same timeline as the new ones.
  auto now = std::chrono::steady_clock::now();
  int64_t shift = std::chrono::duration_cast<std::chrono::microseconds>(now - origin_).count();
  for (Event &e : events_)
    e.beginUs -= shift;
  origin_ = now;
}

void Tracer::record(Event e) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(e));
}

size_t Tracer::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

std::vector<Tracer::Event> Tracer::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

Status Tracer::write(const std::string &path, Communicator *comm) {
  std::vector<Event> mine = snapshot();
  std::string bytes = serialize(rank_, mine);
  std::vector<std::pair<int, std::vector<Event>>> ranks;
  if (comm && comm->size() > 1) {
    const size_t n = static_cast<size_t>(comm->size());
    uint64_t mySize = bytes.size();
    std::vector<uint64_t> sizes(n);
    DTC_RETURN_IF_ERROR(comm->allGather(&mySize, sizeof mySize, sizes.data(), "trace sizes"));
    uint64_t longest = *std::max_element(sizes.begin(), sizes.end());
    if (longest > static_cast<uint64_t>(std::numeric_limits<int>::max()))
      return Status::error(path, "trace of one rank exceeds 2 GiB");
    bytes.resize(longest);
    std::string all(longest * n, '\0');
    DTC_RETURN_IF_ERROR(comm->allGather(bytes.data(), longest, all.data(), "trace events"));
    if (comm->rank() != 0)
      return Status::ok();
    for (size_t r = 0; r < n; ++r) {
      std::vector<Event> events;
      int rank = 0;
      if (!deserialize(all.data() + r * longest, sizes[r], rank, events))
        return Status::error(path, "malformed trace events from rank " + std::to_string(r));
      ranks.emplace_back(rank, std::move(events));
    }
  } else {
    ranks.emplace_back(rank_, std::move(mine));
  }

  // The file's timeline starts at the earliest event.
  int64_t first = std::numeric_limits<int64_t>::max();
  for (auto &[rank, events] : ranks)
    for (const Event &e : events)
      first = std::min(first, e.beginUs);
  if (first == std::numeric_limits<int64_t>::max())
    first = 0;

  nlohmann::json list = nlohmann::json::array();
  for (auto &[rank, events] : ranks) {
    list.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", rank},
                    {"tid", 0},
                    {"args", {{"name", "rank " + std::to_string(rank)}}}});
    list.push_back({{"name", "process_sort_index"},
                    {"ph", "M"},
                    {"pid", rank},
                    {"tid", 0},
                    {"args", {{"sort_index", rank}}}});
    for (int t : {kCompute, kComm, kHost})
      list.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", rank},
                      {"tid", t},
                      {"args", {{"name", threadName(t)}}}});
    for (const Event &e : events) {
      nlohmann::json j = {{"name", e.name},     {"cat", e.category}, {"ph", "X"},
                          {"pid", rank},        {"tid", e.thread},   {"ts", e.beginUs - first},
                          {"dur", e.durationUs}};
      if (e.bytes)
        j["args"] = {{"bytes", e.bytes}};
      list.push_back(std::move(j));
    }
  }
  nlohmann::json doc = {{"traceEvents", std::move(list)}, {"displayTimeUnit", "ms"}};
  return writeFileAtomically(path, doc.dump());
}

} // namespace dtc::rt
