// MpiCommunicator's point-to-point exchanges (MpiCommunicator.h, Task::exchange): small
// all-reduces, all-gathers and reduce-scatters of power-of-two groups run as recursive doubling
// or halving between partner ranks, in segments under the eager limit, instead of Open MPI's
// non-blocking collectives (libnbc), which take 1.5-3x the blocking time at these sizes.
#include "runtime/comm/MpiCommunicator.h"

namespace dtc::rt::mpi {

bool MpiCommunicator::exchangeEligible(const Task &t) const {
  const size_t n = t.g->ranks.size();
  if (xchComm_ == MPI_COMM_NULL || n < 2 || (n & (n - 1)) != 0 || t.group >= 1024 || t.bytes == 0 ||
      t.bytes > (size_t{1} << 30))
    return false;
  switch (t.op) {
  case Op::kAllReduce:
    return !t.pieces.empty() && t.bytes <= xch_.maxBytes;
  case Op::kAllGather:
  case Op::kReduceScatter:
    return t.req.bytes[0] > 0 && t.bytes <= xch_.gatherMaxBytes;
  default:
    return false;
  }
}

namespace {

/// The phase-`k` view of a reduce-scatter exchange by recursive halving on `n` ranks (group
/// rank `r`, blocks of `b` bytes): before the phase this rank holds partial sums of blocks
/// [lo, lo + 2 * half); it keeps [keep, keep + half), sends [other, other + half) to `partner`
/// and receives the partner's partial sums of the kept blocks.
struct HalvingStep {
  size_t half, lo, keep, other;
  int partner;
  HalvingStep(int n, int r, int k) {
    const size_t len = static_cast<size_t>(n) >> k;
    half = len / 2;
    const size_t ur = static_cast<size_t>(r);
    lo = ur / len * len;
    keep = ur / half * half;
    other = keep == lo ? lo + half : lo;
    partner = r ^ static_cast<int>(half);
  }
};

} // namespace

namespace {

/// The bytes an all-reduce exchange reduces (its span, or its staging buffer).
size_t exchangeBytes(const Task &t) { return t.contiguous ? t.span : t.staging.size(); }

/// Byte offset of block `i` of `n` of a halving all-reduce: blocks of whole elements, as even
/// as the element count allows.
size_t blockOffset(const Task &t, size_t i, size_t n) {
  const size_t count = exchangeBytes(t) / t.info.size;
  return i * count / n * t.info.size;
}

} // namespace

int MpiCommunicator::postExchange(Task &t) {
  const Group &g = *t.g;
  const int n = static_cast<int>(g.ranks.size());
  const size_t un = static_cast<size_t>(n);
  const int r = g.myRank;
  const int k = t.phase;
  CommRequest &q = t.req;
  const std::byte *send = nullptr;
  std::byte *recv = nullptr;
  size_t sendBytes = 0, recvBytes = 0;
  int partner = r;
  switch (t.op) {
  case Op::kAllReduce:
    if (!t.halving) {
      // Recursive doubling: after phase k every rank of each aligned run of 2^(k+1) ranks holds
      // their sum (a + b on both partners: the same bits, as addition commutes).
      partner = r ^ (1 << k);
      sendBytes = recvBytes = exchangeBytes(t);
      if (k == 0 && t.sendBase) {
        send = t.sendBase; // the partner's bytes land in the output, this rank's are added later
        recv = t.work;
      } else {
        send = t.work;
        recv = t.scratch.data();
      }
    } else if (k < t.phases / 2) {
      // Reduce-scatter: the partial sums of the blocks the partner keeps, for its of ours. Each
      // block's sum is made on one rank and gathered: the same bits everywhere.
      const HalvingStep h(n, r, k);
      partner = h.partner;
      const bool fromInput = k == 0 && t.sendBase;
      send = (fromInput ? t.sendBase : t.work) + blockOffset(t, h.other, un);
      sendBytes = blockOffset(t, h.other + h.half, un) - blockOffset(t, h.other, un);
      recv = fromInput ? t.work + blockOffset(t, h.keep, un) : t.scratch.data();
      recvBytes = blockOffset(t, h.keep + h.half, un) - blockOffset(t, h.keep, un);
    } else {
      // All-gather by recursive doubling of the reduced blocks.
      const size_t d = size_t{1} << (k - t.phases / 2);
      partner = r ^ static_cast<int>(d);
      const size_t mine = static_cast<size_t>(r) / d * d;
      const size_t theirs = static_cast<size_t>(partner) / d * d;
      send = t.work + blockOffset(t, mine, un);
      sendBytes = blockOffset(t, mine + d, un) - blockOffset(t, mine, un);
      recv = t.work + blockOffset(t, theirs, un);
      recvBytes = blockOffset(t, theirs + d, un) - blockOffset(t, theirs, un);
    }
    break;
  case Op::kAllGather: {
    // Recursive doubling: the partner's run of 2^k blocks for this rank's.
    const size_t b = q.bytes[0];
    const size_t d = size_t{1} << k;
    partner = r ^ static_cast<int>(d);
    std::byte *out = static_cast<std::byte *>(q.outputs[0]);
    // Phase 0: this rank's block straight from the input (startTask copies it meanwhile).
    send = k == 0 ? static_cast<const std::byte *>(q.inputs[0])
                  : out + static_cast<size_t>(r) / d * d * b;
    recv = out + static_cast<size_t>(partner) / d * d * b;
    sendBytes = recvBytes = d * b;
    break;
  }
  case Op::kReduceScatter: {
    const size_t b = q.bytes[0];
    const HalvingStep h(n, r, k);
    const size_t areaBytes = un / 2 * b;
    const bool inPlace = q.inputs[0] == q.outputs[0];
    // Partial sums before phase k: the input (k = 0) or the area phase k - 1 wrote, which
    // holds blocks [lo, lo + 2 * half).
    const std::byte *cur = k == 0 ? static_cast<const std::byte *>(q.inputs[0])
                                  : t.scratch.data() + static_cast<size_t>((k - 1) % 2) * areaBytes;
    const size_t curBase = k == 0 ? 0 : h.lo;
    partner = h.partner;
    send = cur + (h.other - curBase) * b;
    recv = h.half == 1 && !inPlace ? static_cast<std::byte *>(q.outputs[0])
                                   : t.scratch.data() + static_cast<size_t>(k % 2) * areaBytes;
    sendBytes = recvBytes = h.half * b;
    break;
  }
  default:
    return MPI_ERR_INTERN;
  }
  const int peer = g.ranks[static_cast<size_t>(partner)];
  // The same cut on both sides: the partner sends as many bytes as this rank receives.
  // (At most 1 GiB in all: exchangeEligible.)
  const size_t whole = t.op == Op::kAllReduce ? xch_.wholeAbove : xch_.gatherWholeAbove;
  auto cut = [&](size_t bytes) { return bytes > whole ? bytes : xch_.segmentBytes; };
  for (size_t off = 0, seg = cut(recvBytes); off < recvBytes; off += seg) {
    t.reqs.emplace_back();
    const int rc = MPI_Irecv(recv + off, static_cast<int>(std::min(seg, recvBytes - off)),
                             MPI_BYTE, peer, t.xtag, xchComm_, &t.reqs.back());
    if (rc != MPI_SUCCESS)
      return rc;
  }
  for (size_t off = 0, seg = cut(sendBytes); off < sendBytes; off += seg) {
    t.reqs.emplace_back();
    const int rc = MPI_Isend(send + off, static_cast<int>(std::min(seg, sendBytes - off)),
                             MPI_BYTE, peer, t.xtag, xchComm_, &t.reqs.back());
    if (rc != MPI_SUCCESS)
      return rc;
  }
  return MPI_SUCCESS;
}

int MpiCommunicator::advanceExchange(Task &t, bool &more) {
  more = false;
  const Group &g = *t.g;
  const int n = static_cast<int>(g.ranks.size());
  const size_t un = static_cast<size_t>(n);
  const int k = t.phase;
  CommRequest &q = t.req;
  const size_t elem = t.info.size;
  int rc = MPI_SUCCESS;
  switch (t.op) {
  case Op::kAllReduce:
    if (!t.halving) {
      const void *mine = k == 0 && t.sendBase ? static_cast<const void *>(t.sendBase)
                                              : static_cast<const void *>(t.scratch.data());
      rc = MPI_Reduce_local(mine, t.work, static_cast<int>(exchangeBytes(t) / elem), t.info.mpi,
                            t.info.sum);
    } else if (k < t.phases / 2) {
      const HalvingStep h(n, g.myRank, k);
      const size_t at = blockOffset(t, h.keep, un);
      const size_t bytes = blockOffset(t, h.keep + h.half, un) - at;
      const void *other = k == 0 && t.sendBase ? static_cast<const void *>(t.sendBase + at)
                                               : static_cast<const void *>(t.scratch.data());
      if (bytes > 0)
        rc = MPI_Reduce_local(other, t.work + at, static_cast<int>(bytes / elem), t.info.mpi,
                              t.info.sum);
    }
    break;
  case Op::kReduceScatter: {
    const size_t b = q.bytes[0];
    const HalvingStep h(n, g.myRank, k);
    const size_t areaBytes = un / 2 * b;
    const bool inPlace = q.inputs[0] == q.outputs[0];
    const std::byte *cur = k == 0 ? static_cast<const std::byte *>(q.inputs[0])
                                  : t.scratch.data() + static_cast<size_t>((k - 1) % 2) * areaBytes;
    const size_t curBase = k == 0 ? 0 : h.lo;
    std::byte *dest = h.half == 1 && !inPlace
                          ? static_cast<std::byte *>(q.outputs[0])
                          : t.scratch.data() + static_cast<size_t>(k % 2) * areaBytes;
    rc = MPI_Reduce_local(cur + (h.keep - curBase) * b, dest, static_cast<int>(h.half * b / elem),
                          t.info.mpi, t.info.sum);
    if (rc == MPI_SUCCESS && h.half == 1 && inPlace)
      std::memcpy(q.outputs[0], dest, b); // every send has completed: the input may change
    break;
  }
  default:
    break;
  }
  if (rc != MPI_SUCCESS)
    return rc;
  t.reqs.clear();
  if (++t.phase < t.phases) {
    more = true;
    return postExchange(t);
  }
  return MPI_SUCCESS;
}

} // namespace dtc::rt::mpi
