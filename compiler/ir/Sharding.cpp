#include "compiler/ir/Sharding.h"

#include <algorithm>
#include <cstring>

namespace dtc::ir {

std::string Sharding::text() const {
  switch (kind) {
  case Kind::kReplicated:
    return "R";
  case Kind::kPartial:
    return "P/" + std::to_string(parts);
  case Kind::kSplit:
    break;
  }
  std::string t = "S" + std::to_string(axis) + "/" + std::to_string(parts);
  if (blocks > 1)
    t += "x" + std::to_string(blocks);
  return t;
}

Expected<std::vector<int64_t>> shardDims(const std::vector<int64_t> &whole, const Sharding &s) {
  if (!s.isSplit())
    return whole;
  if (s.axis < 0 || s.axis >= static_cast<int64_t>(whole.size()))
    return Status::error("sharding " + s.text(), "axis " + std::to_string(s.axis) +
                                                     " is out of range for rank " +
                                                     std::to_string(whole.size()));
  if (s.parts < 1 || s.blocks < 1 || whole[s.axis] % (s.parts * s.blocks) != 0)
    return Status::error("sharding " + s.text(), "axis " + std::to_string(s.axis) + " of size " +
                                                     std::to_string(whole[s.axis]) +
                                                     " does not divide by " +
                                                     std::to_string(s.parts * s.blocks));
  std::vector<int64_t> local = whole;
  local[s.axis] /= s.parts;
  return local;
}

SplitRange splitRange(int64_t size, int64_t parts, int64_t index) {
  const int64_t base = size / parts, extra = size % parts;
  return {index * base + std::min(index, extra), base + (index < extra ? 1 : 0)};
}

bool isUnevenSplit(const std::vector<int64_t> &whole, const Sharding &s) {
  return s.isSplit() && s.blocks == 1 && s.parts > 1 && s.axis >= 0 &&
         s.axis < static_cast<int64_t>(whole.size()) && whole[s.axis] % s.parts != 0;
}

Expected<std::vector<int64_t>> shardDimsOf(const std::vector<int64_t> &whole, const Sharding &s,
                                           int64_t index) {
  if (!isUnevenSplit(whole, s))
    return shardDims(whole, s);
  if (whole[s.axis] < s.parts)
    return Status::error("sharding " + s.text(), "axis " + std::to_string(s.axis) + " of size " +
                                                     std::to_string(whole[s.axis]) +
                                                     " has fewer elements than the divisor " +
                                                     std::to_string(s.parts));
  std::vector<int64_t> local = whole;
  local[s.axis] = splitRange(whole[s.axis], s.parts, index).length;
  return local;
}

namespace {

/// Calls fn(wholeOffset, localOffset, bytes) for every contiguous run of rank `index`'s shard.
template <class F>
void forEachRun(const std::vector<int64_t> &whole, size_t elemSize, const Sharding &s,
                int64_t index, F &&fn) {
  size_t outer = 1, inner = elemSize;
  for (int64_t d = 0; d < s.axis; ++d)
    outer *= static_cast<size_t>(whole[d]);
  for (size_t d = static_cast<size_t>(s.axis) + 1; d < whole.size(); ++d)
    inner *= static_cast<size_t>(whole[d]);
  const size_t n = static_cast<size_t>(whole[s.axis]);
  const size_t block = n / static_cast<size_t>(s.blocks);
  // Even: part rows at index * part of each block; uneven (one block): splitRange's rows.
  const SplitRange range = splitRange(static_cast<int64_t>(block), s.parts, index);
  const size_t part = static_cast<size_t>(range.length);
  size_t local = 0;
  for (size_t o = 0; o < outer; ++o)
    for (size_t k = 0; k < static_cast<size_t>(s.blocks); ++k) {
      const size_t row = k * block + static_cast<size_t>(range.first);
      fn((o * n + row) * inner, local, part * inner);
      local += part * inner;
    }
}

} // namespace

std::string sliceShard(const std::string &bytes, const std::vector<int64_t> &whole, size_t elemSize,
                       const Sharding &s, int64_t index) {
  if (!s.isSplit())
    return bytes;
  size_t size = 0;
  forEachRun(whole, elemSize, s, index, [&](size_t, size_t, size_t len) { size += len; });
  std::string out(size, '\0');
  forEachRun(whole, elemSize, s, index, [&](size_t from, size_t to, size_t len) {
    std::memcpy(out.data() + to, bytes.data() + from, len);
  });
  return out;
}

void placeShard(std::string &wholeBytes, const std::vector<int64_t> &whole, size_t elemSize,
                const Sharding &s, int64_t index, const std::string &local) {
  if (!s.isSplit()) {
    wholeBytes = local;
    return;
  }
  forEachRun(whole, elemSize, s, index, [&](size_t to, size_t from, size_t len) {
    std::memcpy(wholeBytes.data() + to, local.data() + from, len);
  });
}

} // namespace dtc::ir
