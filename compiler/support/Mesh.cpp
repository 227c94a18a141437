// Device mesh: --strategy parsing, rank <-> coordinates (tp fastest, then dp, then pp) and the
// communicator groups along each axis.
#include "compiler/support/Mesh.h"

#include <cerrno>
#include <cstdlib>
#include <set>

namespace dtc {

const char *meshAxisName(MeshAxis a) {
  switch (a) {
  case MeshAxis::kDp:
    return "dp";
  case MeshAxis::kPp:
    return "pp";
  case MeshAxis::kTp:
    return "tp";
  }
  return "?";
}

const char *pipelineScheduleName(PipelineSchedule s) {
  switch (s) {
  case PipelineSchedule::kGPipe: return "gpipe";
  case PipelineSchedule::k1F1B: return "1f1b";
  case PipelineSchedule::kZBH1: return "zb-h1";
  case PipelineSchedule::kInterleaved: return "interleaved";
  }
  return "?";
}

int64_t Mesh::degree(MeshAxis a) const {
  return a == MeshAxis::kDp ? dp : a == MeshAxis::kPp ? pp : tp;
}

MeshCoord Mesh::coordOf(int64_t rank) const {
  MeshCoord c;
  c.tp = rank % tp;
  c.dp = (rank / tp) % dp;
  c.pp = rank / (tp * dp);
  return c;
}

int64_t Mesh::rankOf(const MeshCoord &c) const { return c.tp + tp * (c.dp + dp * c.pp); }

std::vector<int64_t> Mesh::groupOf(int64_t rank, MeshAxis axis) const {
  MeshCoord c = coordOf(rank);
  std::vector<int64_t> ranks;
  for (int64_t i = 0; i < degree(axis); ++i) {
    MeshCoord m = c;
    (axis == MeshAxis::kDp ? m.dp : axis == MeshAxis::kPp ? m.pp : m.tp) = i;
    ranks.push_back(rankOf(m));
  }
  return ranks;
}

std::vector<std::vector<int64_t>> Mesh::groups(MeshAxis axis) const {
  std::vector<std::vector<int64_t>> out;
  std::set<int64_t> seen;
  for (int64_t r = 0; r < worldSize(); ++r) {
    if (seen.count(r))
      continue;
    std::vector<int64_t> g = groupOf(r, axis);
    seen.insert(g.begin(), g.end());
    out.push_back(std::move(g));
  }
  return out;
}

std::string Mesh::text() const {
  if (single)
    return "single";
  if (psServers > 0)
    return "ps=" + std::to_string(psServers) + ":" + std::to_string(dp);
  if (csDevices > 0)
    return "cs=" + std::to_string(csDevices);
  std::string s;
  auto add = [&](const std::string &item) { s += (s.empty() ? "" : ",") + item; };
  if (dp > 1 || (pp == 1 && tp == 1))
    add("dp=" + std::to_string(dp));
  if (pp > 1)
    add("pp=" + std::to_string(pp));
  if (tp > 1)
    add("tp=" + std::to_string(tp));
  if (pp > 1) {
    add("microbatches=" + std::to_string(microbatches));
    add(std::string("schedule=") + pipelineScheduleName(schedule));
    if (schedule == PipelineSchedule::kInterleaved)
      add("virtual-stages=" + std::to_string(virtualStages));
  }
  return s;
}

Expected<Mesh> parseMesh(const std::string &strategy) {
  const std::string where = "--strategy " + strategy;
  Mesh m;
  if (strategy == "single")
    return m;
  const char *kHelp = " (available: single, or dp=N, pp=S, tp=T combined with commas, with "
                      "microbatches=M, schedule=gpipe|1f1b|zb-h1|interleaved and virtual-stages=V "
                      "for pipelines; e.g. dp=2,pp=2; or ps=S:W parameter servers, or cs=N "
                      "central storage)";
  if (strategy.empty())
    return Status::error("--strategy", std::string("is empty") + kHelp);
  m.single = false;
  // Role layouts: ps=S:W and cs=N stand alone.
  auto count = [&](const std::string &text, const char *what, long long hi,
                   int64_t &out) -> Status {
    char *end = nullptr;
    errno = 0;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || !end || *end || errno || v < 1 || v > hi)
      return Status::error(where, std::string(what) + " needs an integer in [1, " +
                                      std::to_string(hi) + "], got '" + text + "'");
    out = v;
    return Status::ok();
  };
  if (strategy.rfind("ps=", 0) == 0 || strategy.rfind("cs=", 0) == 0) {
    const std::string value = strategy.substr(3);
    if (value.find(',') != std::string::npos)
      return Status::error(where, strategy.substr(0, 2) +
                                      " stands alone: it does not combine with other keys");
    if (strategy[0] == 'c') {
      DTC_RETURN_IF_ERROR(count(value, "cs=N (devices)", 256, m.csDevices));
      m.dp = m.csDevices;
      return m;
    }
    const size_t colon = value.find(':');
    if (colon == std::string::npos)
      return Status::error(where, "ps needs S:W (servers:workers), e.g. ps=2:3");
    DTC_RETURN_IF_ERROR(count(value.substr(0, colon), "ps=S:W servers", 256, m.psServers));
    DTC_RETURN_IF_ERROR(count(value.substr(colon + 1), "ps=S:W workers", 4096, m.dp));
    return m;
  }
  std::set<std::string> seen;
  bool microbatchesGiven = false, scheduleGiven = false, virtualGiven = false;
  size_t pos = 0;
  while (pos <= strategy.size()) {
    size_t comma = strategy.find(',', pos);
    if (comma == std::string::npos)
      comma = strategy.size();
    const std::string item = strategy.substr(pos, comma - pos);
    pos = comma + 1;
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      return Status::error(where, "'" + item + "' is not KEY=VALUE" + kHelp);
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (!seen.insert(key).second)
      return Status::error(where, "'" + key + "' is given twice");
    if (key == "schedule") {
      if (value == "gpipe")
        m.schedule = PipelineSchedule::kGPipe;
      else if (value == "1f1b")
        m.schedule = PipelineSchedule::k1F1B;
      else if (value == "zb-h1")
        m.schedule = PipelineSchedule::kZBH1;
      else if (value == "interleaved")
        m.schedule = PipelineSchedule::kInterleaved;
      else
        return Status::error(where, "unknown schedule '" + value +
                                        "' (known: gpipe, 1f1b, zb-h1, interleaved)");
      scheduleGiven = true;
      continue;
    }
    if (key != "dp" && key != "pp" && key != "tp" && key != "microbatches" &&
        key != "virtual-stages")
      return Status::error(where, "unknown key '" + key + "'" + kHelp);
    char *end = nullptr;
    errno = 0;
    const long long v = std::strtoll(value.c_str(), &end, 10);
    const long long lo = key == "virtual-stages" ? 2 : 1;
    const long long hi = key == "microbatches" ? 4096 : key == "virtual-stages" ? 64 : 65536;
    if (value.empty() || !end || *end || errno || v < lo || v > hi)
      return Status::error(where, key + " needs an integer in [" + std::to_string(lo) + ", " +
                                      std::to_string(hi) + "], got '" + value + "'");
    if (key == "dp")
      m.dp = v;
    else if (key == "pp")
      m.pp = v;
    else if (key == "tp")
      m.tp = v;
    else if (key == "virtual-stages") {
      m.virtualStages = v;
      virtualGiven = true;
    } else {
      m.microbatches = v;
      microbatchesGiven = true;
    }
  }
  if (m.worldSize() > 65536)
    return Status::error(where,
                         "the mesh has " + std::to_string(m.worldSize()) + " ranks; at most 65536");
  if (m.pp == 1 && (microbatchesGiven || scheduleGiven))
    return Status::error(where, std::string(microbatchesGiven ? "microbatches" : "schedule") +
                                    " is a pipeline option: it needs pp=S with S >= 2");
  if (m.pp > 1 && !microbatchesGiven)
    m.microbatches = m.pp;
  if (virtualGiven && m.schedule != PipelineSchedule::kInterleaved)
    return Status::error(where, "virtual-stages is an option of schedule=interleaved");
  if (m.schedule == PipelineSchedule::kInterleaved) {
    if (!virtualGiven)
      m.virtualStages = 2;
    // Megatron-LM's interleaved schedule runs the micro-batches in rounds of pp.
    if (m.microbatches % m.pp != 0)
      return Status::error(where, "schedule=interleaved needs microbatches to be a multiple of "
                                  "pp=" + std::to_string(m.pp) + ", got " +
                                      std::to_string(m.microbatches));
  }
  return m;
}

} // namespace dtc
