// Compacted pipeline programs (plan format 4): a pipeline stage runs the same forward and
// backward instructions for every micro-batch, on other activation buffers. The writer stores one
// slot of each kind and, for the others, which buffers differ (RepeatedSlot, DerivedBuffers);
// the reader rebuilds the format-3 program. A program is compacted only when rebuilding it gives
// back exactly the program lowering produced.
#include "compiler/plan/Plan.h"

#include "compiler/plan/Parallel.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

namespace dtc::plan {

namespace {

/// Expanded programs may hold at most this many instructions and buffers each (a small file
/// must not expand into gigabytes).
constexpr int64_t kMaxExpandedItems = int64_t{1} << 22;

/// `name` with its first "/microbatch<from>" (not followed by another digit) read as
/// "/microbatch<to>"; unchanged when it has none.
std::string renameMicroBatch(const std::string &name, int32_t from, int32_t to) {
  if (from == to)
    return name;
  const std::string token = "/microbatch" + std::to_string(from);
  for (size_t at = name.find(token); at != std::string::npos; at = name.find(token, at + 1)) {
    const size_t end = at + token.size();
    if (end == name.size() || name[end] < '0' || name[end] > '9')
      return name.substr(0, at) + "/microbatch" + std::to_string(to) + name.substr(end);
  }
  return name;
}

struct SlotMapping {
  std::unordered_map<int32_t, int32_t> buffers;
  int64_t tagDelta = 0;
  int64_t shift = 0; // instruction index of the slot minus that of its template
  int32_t fromMb = 0, toMb = 0;
  int32_t map(int32_t b) const {
    auto it = buffers.find(b);
    return it == buffers.end() ? b : it->second;
  }
};

void mapAll(google::protobuf::RepeatedField<int32_t> *xs, const SlotMapping &m) {
  for (int32_t &x : *xs)
    x = m.map(x);
}

/// Instruction `t` of a template slot as the repeated slot runs it.
Instruction repeatInstruction(const Instruction &t, const SlotMapping &m) {
  Instruction out = t;
  switch (out.kind_case()) {
  case Instruction::kKernel:
    mapAll(out.mutable_kernel()->mutable_inputs(), m);
    mapAll(out.mutable_kernel()->mutable_outputs(), m);
    out.mutable_kernel()->set_node(renameMicroBatch(t.kernel().node(), m.fromMb, m.toMb));
    break;
  case Instruction::kCopy:
    out.mutable_copy()->set_src(m.map(t.copy().src()));
    out.mutable_copy()->set_dst(m.map(t.copy().dst()));
    break;
  case Instruction::kCollective: {
    Collective *c = out.mutable_collective();
    mapAll(c->mutable_inputs(), m);
    mapAll(c->mutable_outputs(), m);
    c->set_name(renameMicroBatch(t.collective().name(), m.fromMb, m.toMb));
    if (c->kind() == COLLECTIVE_SEND || c->kind() == COLLECTIVE_RECV)
      c->set_tag(static_cast<int64_t>(static_cast<uint64_t>(c->tag()) +
                                      static_cast<uint64_t>(m.tagDelta))); // hostile: wraps
    break;
  }
  case Instruction::kWait:
    out.mutable_wait()->set_collective(static_cast<int32_t>(t.wait().collective() + m.shift));
    break;
  case Instruction::KIND_NOT_SET:
    break;
  }
  return out;
}

/// [begin, end) instruction range of each schedule slot in a program of `count` instructions
/// (a slot runs to the next one's start; the last one to the end).
std::vector<std::pair<int64_t, int64_t>> slotRanges(const RankProgram &p, int64_t count) {
  std::vector<std::pair<int64_t, int64_t>> r;
  for (int i = 0; i < p.schedule_size(); ++i) {
    const int64_t end = i + 1 < p.schedule_size() ? p.schedule(i + 1).first_instruction() : count;
    r.emplace_back(p.schedule(i).first_instruction(), end);
  }
  return r;
}

Buffer deriveBuffer(const Buffer &like, uint64_t offset, int32_t fromMb, int32_t toMb) {
  Buffer b = like;
  b.set_offset(offset);
  b.set_name(renameMicroBatch(like.name(), fromMb, toMb));
  return b;
}

/// The micro-batch a stored buffer's name carries ("/microbatch<k>"), or -1.
int32_t microBatchOfName(const std::string &name) {
  for (size_t at = name.find("/microbatch"); at != std::string::npos;
       at = name.find("/microbatch", at + 1)) {
    size_t end = at + 11;
    while (end < name.size() && name[end] >= '0' && name[end] <= '9')
      ++end;
    if (end > at + 11 && end - at - 11 <= 9)
      return static_cast<int32_t>(std::atol(name.c_str() + at + 11));
  }
  return -1;
}

/// Tries to store slot `s` as a repeat of slot `like`; on success records the mapping in
/// `rep` and the buffers it derives in `derived` (index -> (like, micro-batch)).
bool matchSlot(const RankProgram &p, const std::vector<std::pair<int64_t, int64_t>> &ranges, int s,
               int like, std::vector<char> &isDerived, std::vector<char> &isLike,
               std::unordered_map<int32_t, std::pair<int32_t, int32_t>> &derived,
               RepeatedSlot &rep) {
  const auto [b0, e0] = ranges[like];
  const auto [b1, e1] = ranges[s];
  if (e1 - b1 != e0 - b0 || e0 == b0)
    return false;
  SlotMapping m;
  m.shift = b1 - b0;
  m.fromMb = p.schedule(like).micro_batch();
  m.toMb = p.schedule(s).micro_batch();
  bool tagSet = false;
  auto pair = [&](int32_t a, int32_t b) {
    if (a == b)
      return true;
    auto [it, fresh] = m.buffers.emplace(a, b);
    return fresh || it->second == b;
  };
  auto pairAll = [&](const auto &xs, const auto &ys) {
    if (xs.size() != ys.size())
      return false;
    for (int i = 0; i < xs.size(); ++i)
      if (!pair(xs[i], ys[i]))
        return false;
    return true;
  };
  for (int64_t k = 0; k < e0 - b0; ++k) {
    const Instruction &t = p.instructions(static_cast<int>(b0 + k));
    const Instruction &u = p.instructions(static_cast<int>(b1 + k));
    if (t.kind_case() != u.kind_case())
      return false;
    bool ok = true;
    if (t.has_kernel())
      ok = pairAll(t.kernel().inputs(), u.kernel().inputs()) &&
           pairAll(t.kernel().outputs(), u.kernel().outputs());
    else if (t.has_copy())
      ok = pair(t.copy().src(), u.copy().src()) && pair(t.copy().dst(), u.copy().dst());
    else if (t.has_collective()) {
      ok = pairAll(t.collective().inputs(), u.collective().inputs()) &&
           pairAll(t.collective().outputs(), u.collective().outputs());
      const CollectiveKind kind = t.collective().kind();
      if (ok && !tagSet && (kind == COLLECTIVE_SEND || kind == COLLECTIVE_RECV)) {
        m.tagDelta = u.collective().tag() - t.collective().tag();
        tagSet = true;
      }
    }
    if (!ok)
      return false;
  }
  for (int64_t k = 0; k < e0 - b0; ++k)
    if (repeatInstruction(p.instructions(static_cast<int>(b0 + k)), m).SerializeAsString() !=
        p.instructions(static_cast<int>(b1 + k)).SerializeAsString())
      return false;
  // A mapped buffer is derived (not stored) when it is the template's buffer for another
  // micro-batch at another offset, the template's is stored and no derived buffer copies it;
  // otherwise it stays stored (a running gradient sum that the next micro-batch reads).
  std::vector<std::pair<int32_t, int32_t>> fresh; // (derived, like)
  for (const auto &[a, b] : m.buffers) {
    if (a < 0 || b < 0 || a >= p.buffers_size() || b >= p.buffers_size())
      return false;
    if (derived.count(b) || isDerived[static_cast<size_t>(a)] || isLike[static_cast<size_t>(b)])
      continue;
    const Buffer &la = p.buffers(a);
    const Buffer &lb = p.buffers(b);
    if (lb.kind() == BUFFER_CONSTANT || lb.kind() == BUFFER_PARAMETER ||
        microBatchOfName(la.name()) != m.fromMb ||
        deriveBuffer(la, lb.offset(), m.fromMb, m.toMb).SerializeAsString() !=
            lb.SerializeAsString())
      continue;
    fresh.emplace_back(b, a);
  }
  for (const auto &[b, a] : fresh) {
    derived.emplace(b, std::make_pair(a, m.toMb));
    isDerived[static_cast<size_t>(b)] = 1;
    isLike[static_cast<size_t>(a)] = 1;
  }
  rep.set_slot(s);
  rep.set_like(like);
  rep.set_tag_delta(m.tagDelta);
  std::vector<std::pair<int32_t, int32_t>> pairs(m.buffers.begin(), m.buffers.end());
  std::sort(pairs.begin(), pairs.end());
  for (const auto &[a, b] : pairs) {
    rep.add_from(a);
    rep.add_to(b);
  }
  return true;
}

/// The compacted form of `p` (a pipeline program), or nullopt when no slot repeats.
std::optional<RankProgram> compactProgram(const RankProgram &p) {
  if (p.schedule_size() < 2 || p.repeated_slots_size() > 0)
    return std::nullopt;
  const auto ranges = slotRanges(p, p.instructions_size());
  for (size_t i = 0; i < ranges.size(); ++i)
    if (ranges[i].first > ranges[i].second || ranges[i].second > p.instructions_size() ||
        (i > 0 && ranges[i].first < ranges[i - 1].second))
      return std::nullopt;
  std::vector<char> isDerived(static_cast<size_t>(p.buffers_size()), 0);
  std::vector<char> isLike(static_cast<size_t>(p.buffers_size()), 0);
  std::unordered_map<int32_t, std::pair<int32_t, int32_t>> derived;
  std::vector<RepeatedSlot> reps;
  std::vector<char> repeated(ranges.size(), 0);
  // Stored slots of each (kind, chunk) are the candidate templates of the later ones. The first
  // micro-batch's names carry no "/microbatch<k>" (they are the model's), so slot 1 is usually
  // the template of slots 2 and on.
  constexpr size_t kMaxCandidates = 4;
  std::unordered_map<int64_t, std::vector<int>> templatesOf;
  for (int s = 0; s < p.schedule_size(); ++s) {
    const int64_t key = int64_t{p.schedule(s).kind()} * (int64_t{1} << 32) + p.schedule(s).chunk();
    std::vector<int> &candidates = templatesOf[key];
    bool matched = false;
    for (int like : candidates) {
      RepeatedSlot rep;
      if (matchSlot(p, ranges, s, like, isDerived, isLike, derived, rep)) {
        reps.push_back(std::move(rep));
        repeated[static_cast<size_t>(s)] = 1;
        matched = true;
        break;
      }
    }
    if (!matched && candidates.size() < kMaxCandidates)
      candidates.push_back(s);
  }
  if (reps.empty())
    return std::nullopt;
  RankProgram out = p;
  out.clear_buffers();
  out.clear_instructions();
  std::vector<std::pair<int32_t, std::pair<int32_t, int32_t>>> ds(derived.begin(), derived.end());
  std::sort(ds.begin(), ds.end());
  DerivedBuffers *db = out.mutable_derived_buffers();
  for (const auto &[b, src] : ds) {
    db->add_index(b);
    db->add_like(src.first);
    db->add_offset(p.buffers(b).offset());
    db->add_micro_batch(src.second);
  }
  for (int b = 0; b < p.buffers_size(); ++b)
    if (!derived.count(b))
      *out.add_buffers() = p.buffers(b);
  int64_t next = 0;
  for (size_t s = 0; s <= ranges.size(); ++s) {
    const int64_t end = s < ranges.size() ? ranges[s].first : p.instructions_size();
    for (; next < end; ++next)
      *out.add_instructions() = p.instructions(static_cast<int>(next));
    if (s < ranges.size() && repeated[s])
      next = ranges[s].second;
  }
  for (RepeatedSlot &r : reps)
    *out.add_repeated_slots() = std::move(r);
  return out;
}

} // namespace

namespace {

/// The buffer list of a compacted program with its derived buffers rebuilt (expandProgram's
/// first half, on its own for summaries, which have no instructions).
Expected<google::protobuf::RepeatedPtrField<Buffer>>
expandedBuffers(const RankProgram &p, const std::function<Status(const std::string &)> &bad) {
  const DerivedBuffers &db = p.derived_buffers();
  const int nDerived = db.index_size();
  if (db.like_size() != nDerived || db.offset_size() != nDerived ||
      db.micro_batch_size() != nDerived)
    return bad("derived buffers' lists differ in length");
  const int64_t nBuffers = int64_t{p.buffers_size()} + nDerived;
  if (nBuffers > kMaxExpandedItems)
    return bad("more than " + std::to_string(kMaxExpandedItems) + " buffers");
  // Buffers: stored ones fill the indices the derived list leaves free, in order.
  std::vector<int> storedIndexOf(static_cast<size_t>(nBuffers), -1);
  {
    int d = 0, stored = 0;
    for (int64_t i = 0; i < nBuffers; ++i) {
      if (d < nDerived && db.index(d) == i)
        ++d;
      else
        storedIndexOf[static_cast<size_t>(i)] = stored++;
    }
    if (d != nDerived)
      return bad("derived buffer indices not ascending or out of range");
  }
  google::protobuf::RepeatedPtrField<Buffer> buffers;
  buffers.Reserve(static_cast<int>(nBuffers));
  {
    int d = 0;
    for (int64_t i = 0; i < nBuffers; ++i) {
      if (d < nDerived && db.index(d) == i) {
        const int32_t like = db.like(d);
        if (like < 0 || like >= nBuffers || storedIndexOf[static_cast<size_t>(like)] < 0)
          return bad("derived buffer " + std::to_string(i) + " is like buffer " +
                     std::to_string(like) + ", which is not a stored buffer");
        const Buffer &src = p.buffers(storedIndexOf[static_cast<size_t>(like)]);
        const int32_t fromMb = microBatchOfName(src.name());
        if (fromMb < 0)
          return bad("derived buffer " + std::to_string(i) + ": buffer '" + src.name() +
                     "' names no micro-batch");
        *buffers.Add() = deriveBuffer(src, db.offset(d), fromMb, db.micro_batch(d));
        ++d;
      } else {
        *buffers.Add() = p.buffers(storedIndexOf[static_cast<size_t>(i)]);
      }
    }
  }
  return buffers;
}

} // namespace

Status expandSummaryBuffers(RankProgram &p, const std::string &where) {
  if (p.derived_buffers().index_size() == 0 && p.derived_buffers().like_size() == 0 &&
      p.derived_buffers().offset_size() == 0 && p.derived_buffers().micro_batch_size() == 0)
    return Status::ok();
  auto bad = [&](const std::string &what) {
    return Status::error(where, "compacted program: " + what);
  };
  DTC_ASSIGN_OR_RETURN(google::protobuf::RepeatedPtrField<Buffer> buffers, expandedBuffers(p, bad));
  p.mutable_buffers()->Swap(&buffers);
  p.clear_derived_buffers();
  return Status::ok();
}

Status expandProgram(RankProgram &p, const std::string &where) {
  if (p.repeated_slots_size() == 0 && p.derived_buffers().index_size() == 0)
    return Status::ok();
  auto bad = [&](const std::string &what) {
    return Status::error(where, "compacted program: " + what);
  };
  DTC_ASSIGN_OR_RETURN(google::protobuf::RepeatedPtrField<Buffer> buffers, expandedBuffers(p, bad));
  // Instructions: stored ones in order, the repeated slots rebuilt from their templates.
  const int nSlots = p.schedule_size();
  if (nSlots == 0)
    return bad("compaction records in a program without a pipeline schedule");
  std::vector<const RepeatedSlot *> repOf(static_cast<size_t>(nSlots), nullptr);
  for (const RepeatedSlot &r : p.repeated_slots()) {
    if (r.slot() < 0 || r.slot() >= nSlots || r.like() < 0 || r.like() >= r.slot())
      return bad("repeated slot " + std::to_string(r.slot()) + " like slot " +
                 std::to_string(r.like()) + ": not an earlier slot of the schedule");
    if (repOf[static_cast<size_t>(r.slot())])
      return bad("slot " + std::to_string(r.slot()) + " repeated twice");
    if (repOf[static_cast<size_t>(r.like())])
      return bad("slot " + std::to_string(r.slot()) + " repeats slot " + std::to_string(r.like()) +
                 ", which is itself repeated");
    if (r.from_size() != r.to_size())
      return bad("slot " + std::to_string(r.slot()) + ": buffer lists differ in length");
    repOf[static_cast<size_t>(r.slot())] = &r;
  }
  for (int s = 0; s + 1 < nSlots; ++s)
    if (p.schedule(s).first_instruction() < 0 ||
        p.schedule(s + 1).first_instruction() < p.schedule(s).first_instruction())
      return bad("schedule slots out of order");
  google::protobuf::RepeatedPtrField<Instruction> out;
  int stored = 0;
  auto copyStored = [&](int64_t n) -> Status {
    if (n < 0 || stored + n > p.instructions_size())
      return bad("fewer stored instructions than the schedule needs");
    for (int64_t k = 0; k < n; ++k)
      *out.Add() = p.instructions(stored++);
    return Status::ok();
  };
  std::vector<std::pair<int64_t, int64_t>> built(static_cast<size_t>(nSlots));
  for (int s = 0; s <= nSlots; ++s) {
    const int64_t begin = s < nSlots ? p.schedule(s).first_instruction() : -1;
    if (s == nSlots) { // after the last slot: whatever is left belongs to it
      if (nSlots > 0 && !repOf[static_cast<size_t>(nSlots - 1)])
        DTC_RETURN_IF_ERROR(copyStored(p.instructions_size() - stored));
      if (nSlots > 0)
        built[static_cast<size_t>(nSlots - 1)].second = out.size();
      break;
    }
    if (begin < out.size())
      return bad("slot " + std::to_string(s) + " starts inside the one before");
    if (s > 0 && repOf[static_cast<size_t>(s - 1)] && out.size() != begin)
      return bad("slot " + std::to_string(s - 1) + " is not as long as its template");
    DTC_RETURN_IF_ERROR(copyStored(begin - out.size()));
    if (s > 0)
      built[static_cast<size_t>(s - 1)].second = out.size();
    built[static_cast<size_t>(s)].first = out.size();
    if (const RepeatedSlot *r = repOf[static_cast<size_t>(s)]) {
      const auto [b0, e0] = built[static_cast<size_t>(r->like())];
      if (out.size() + (e0 - b0) > kMaxExpandedItems)
        return bad("more than " + std::to_string(kMaxExpandedItems) + " instructions");
      SlotMapping m;
      for (int i = 0; i < r->from_size(); ++i)
        m.buffers[r->from(i)] = r->to(i);
      m.tagDelta = r->tag_delta();
      m.shift = out.size() - b0;
      m.fromMb = p.schedule(r->like()).micro_batch();
      m.toMb = p.schedule(s).micro_batch();
      for (int64_t k = b0; k < e0; ++k)
        *out.Add() = repeatInstruction(out.Get(static_cast<int>(k)), m);
    }
  }
  if (nSlots == 0 || stored != p.instructions_size())
    return bad("stored instructions left over after the schedule");
  p.mutable_buffers()->Swap(&buffers);
  p.mutable_instructions()->Swap(&out);
  p.clear_repeated_slots();
  p.clear_derived_buffers();
  return Status::ok();
}

bool compactPlan(Plan &plan) {
  // Programs are compacted and checked on several threads (each touches only its own).
  std::vector<char> compacted(static_cast<size_t>(plan.programs_size()), 0);
  (void)parallelFor(compacted.size(), compileThreads(), [&](size_t i) {
    RankProgram &p = *plan.mutable_programs(static_cast<int>(i));
    std::optional<RankProgram> c = compactProgram(p);
    if (!c)
      return Status::ok();
    // Only a compaction that reads back as the same program is kept.
    RankProgram check = *c;
    if (!expandProgram(check, "").isOk() || check.SerializeAsString() != p.SerializeAsString())
      return Status::ok();
    p = std::move(*c);
    compacted[i] = 1;
    return Status::ok();
  });
  const bool any = std::find(compacted.begin(), compacted.end(), 1) != compacted.end();
  if (any)
    plan.set_format_version(kCompactPlanFormatVersion);
  return any;
}

} // namespace dtc::plan
