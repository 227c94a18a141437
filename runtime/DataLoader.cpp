// Datasets and the per-epoch sample order (see DataLoader.h).
#include "runtime/DataLoader.h"
#include "runtime/PlanUtil.h"

#include "ops/cpu/Kernel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>

namespace dtc::rt {

namespace {

/// "[N,3,4]": the shape of a whole array holding `sample`-shaped samples.
std::string arrayShapeStr(const std::vector<int64_t> &sample) {
  std::string s = "[N";
  for (int64_t d : sample)
    s += "," + std::to_string(d);
  return s + "]";
}

bool isIndexType(ir::DType t) { return t == ir::DType::kInt32 || t == ir::DType::kInt64; }

} // namespace

Expected<std::vector<DataInput>> dataInputsOf(const plan::Plan &plan, int rank) {
  const plan::RankProgram &rp = plan::programOf(plan, rank);
  std::set<std::string> runtimeFed;
  for (const std::string &n :
       {rp.training().lr_input(), rp.training().step_input(), rp.training().rng_input(),
        rp.training().tp_rank_input(), rp.training().dp_rank_input()})
    if (!n.empty())
      runtimeFed.insert(n);
  std::map<std::string, std::string> arrayOf;
  for (const plan::DataBinding &d : rp.data_bindings())
    arrayOf[d.input()] = d.array();
  std::vector<DataInput> out;
  for (const plan::Binding &b : rp.inputs()) {
    if (runtimeFed.count(b.name()))
      continue;
    const plan::Buffer &buf = rp.buffers(b.buffer());
    DataInput in;
    in.input = b.name();
    in.array = arrayOf.count(b.name()) ? arrayOf[b.name()] : b.name();
    in.dtype = static_cast<ir::DType>(buf.dtype());
    in.shape.assign(buf.shape().begin(), buf.shape().end());
    if (in.shape.empty() || in.shape[0] < 1)
      return Status::error("input '" + in.input + "'",
                           "has no batch axis (" + typeStr(in.dtype, in.shape) +
                               "): a training plan's data inputs are [batch, ...]");
    out.push_back(std::move(in));
  }
  return out;
}

std::vector<int64_t> epochOrder(int64_t n, uint64_t seed, int64_t epoch, bool shuffle) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    order[i] = i;
  if (!shuffle || n < 2)
    return order;
  const uint64_t e = static_cast<uint64_t>(epoch);
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(e), static_cast<uint32_t>(e >> 32)};
  std::mt19937_64 gen(seq);
  for (int64_t i = n - 1; i >= 1; --i) {
    const uint64_t m = static_cast<uint64_t>(i) + 1;
    const uint64_t threshold = (0 - m) % m; // 2^64 mod m: values below it would bias x mod m
    uint64_t x = gen();
    while (x < threshold)
      x = gen();
    std::swap(order[i], order[static_cast<int64_t>(x % m)]);
  }
  return order;
}

Expected<Dataset> Dataset::load(const std::string &path, const std::vector<DataInput> &inputs) {
  // Arrays the plan does not read are skipped, and a needed one of the wrong dtype or sample
  // shape is refused, from its .npy header alone: nothing is inflated that is not needed.
  std::vector<std::string> skipped; // "<name> <type>" of the arrays not read, for messages
  auto filter = [&](const std::string &name, ir::DType dtype,
                    const std::vector<int64_t> &shape) -> Expected<bool> {
    for (const DataInput &in : inputs) {
      if (in.array != name)
        continue;
      std::vector<int64_t> sample(in.shape.begin() + 1, in.shape.end());
      if (shape.empty())
        return true; // "is a scalar" below
      std::vector<int64_t> gotSample(shape.begin() + 1, shape.end());
      const bool convert = dtype != in.dtype && isIndexType(dtype) && isIndexType(in.dtype);
      if ((dtype != in.dtype && !convert) || gotSample != sample)
        return Status::error(path + ": array '" + in.array + "'",
                             "expected " + typeStr(in.dtype, sample) + " per sample (array shape " +
                                 arrayShapeStr(sample) + "), got " + typeStr(dtype, gotSample) +
                                 " per sample (array " + typeStr(dtype, shape) + ")");
      return true;
    }
    skipped.push_back(name + " " + typeStr(dtype, shape));
    return false;
  };
  DTC_ASSIGN_OR_RETURN(std::vector<HostArray> arrays, readArrays(path, filter));
  std::map<std::string, size_t> byName;
  for (size_t i = 0; i < arrays.size(); ++i)
    byName[arrays[i].name] = i;
  Dataset ds;
  ds.path_ = path;
  ds.inputs_ = inputs;
  std::string available;
  for (const HostArray &a : arrays)
    available += (available.empty() ? "" : ", ") + a.name + " " + typeStr(a.dtype, a.shape);
  for (const std::string &a : skipped)
    available += (available.empty() ? "" : ", ") + a;
  for (const DataInput &in : inputs) {
    const std::string where = path + ": array '" + in.array + "'";
    std::vector<int64_t> sample(in.shape.begin() + 1, in.shape.end());
    auto it = byName.find(in.array);
    if (it == byName.end())
      return Status::error(where, "missing: the plan's input '" + in.input + "' needs it (" +
                                      typeStr(in.dtype, sample) + " per sample); the file has " +
                                      (available.empty() ? std::string("no arrays") : available));
    HostArray a = std::move(arrays[it->second]);
    if (a.shape.empty())
      return Status::error(where, "is a scalar; axis 0 must count the samples");
    std::vector<int64_t> gotSample(a.shape.begin() + 1, a.shape.end());
    const bool convert = a.dtype != in.dtype && isIndexType(a.dtype) && isIndexType(in.dtype);
    if ((a.dtype != in.dtype && !convert) || gotSample != sample)
      return Status::error(where, "expected " + typeStr(in.dtype, sample) +
                                      " per sample (array shape " + arrayShapeStr(sample) +
                                      "), got " + typeStr(a.dtype, gotSample) +
                                      " per sample (array " + typeStr(a.dtype, a.shape) + ")");
    if (convert) {
      const int64_t n = a.numElements();
      HostArray c;
      c.name = a.name;
      c.dtype = in.dtype;
      c.shape = a.shape;
      c.bytes.resize(static_cast<size_t>(n) * ir::dtypeSize(in.dtype));
      if (in.dtype == ir::DType::kInt64) {
        for (int64_t i = 0; i < n; ++i) {
          int32_t v;
          std::memcpy(&v, a.bytes.data() + 4 * i, 4);
          int64_t w = v;
          std::memcpy(c.bytes.data() + 8 * i, &w, 8);
        }
      } else {
        for (int64_t i = 0; i < n; ++i) {
          int64_t v;
          std::memcpy(&v, a.bytes.data() + 8 * i, 8);
          if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
            return Status::error(where, "value " + std::to_string(v) + " at flat index " +
                                            std::to_string(i) + " does not fit the input's int32");
          int32_t w = static_cast<int32_t>(v);
          std::memcpy(c.bytes.data() + 4 * i, &w, 4);
        }
      }
      a = std::move(c);
    }
    ds.arrays_.push_back(std::move(a));
  }
  if (inputs.empty())
    return Status::error(path, "the plan has no data inputs");
  for (size_t i = 1; i < ds.arrays_.size(); ++i)
    if (ds.arrays_[i].shape[0] != ds.arrays_[0].shape[0]) {
      std::string counts;
      for (size_t k = 0; k < ds.arrays_.size(); ++k)
        counts += (k ? ", " : "") + std::string("'") + inputs[k].array + "' " +
                  std::to_string(ds.arrays_[k].shape[0]);
      return Status::error(path, "arrays have different sample counts (axis 0): " + counts);
    }
  ds.samples_ = ds.arrays_[0].shape[0];
  const int64_t batch = inputs[0].shape[0];
  if (ds.samples_ < batch)
    return Status::error(path, "has " + std::to_string(ds.samples_) +
                                   " samples, fewer than one batch of " + std::to_string(batch));
  return ds;
}

std::vector<HostArray> Dataset::batch(const std::vector<int64_t> &order, int64_t first) const {
  std::vector<HostArray> out;
  for (size_t k = 0; k < inputs_.size(); ++k) {
    const DataInput &in = inputs_[k];
    const HostArray &src = arrays_[k];
    const int64_t b = in.shape[0];
    DTC_CHECK(first >= 0 && first + b <= static_cast<int64_t>(order.size()),
              "batch past the end of the epoch order");
    const size_t row = src.shape[0] ? src.bytes.size() / static_cast<size_t>(src.shape[0]) : 0;
    HostArray a;
    a.name = in.input;
    a.dtype = in.dtype;
    a.shape = in.shape;
    a.bytes.resize(row * static_cast<size_t>(b));
    for (int64_t i = 0; i < b; ++i)
      std::memcpy(a.bytes.data() + row * i, src.bytes.data() + row * order[first + i], row);
    out.push_back(std::move(a));
  }
  return out;
}

std::string Dataset::nonFiniteArray() const {
  for (const HostArray &a : arrays_) {
    int64_t n = a.numElements();
    if (a.dtype == ir::DType::kFloat32) {
      for (int64_t i = 0; i < n; ++i) {
        float v;
        std::memcpy(&v, a.bytes.data() + i * 4, 4);
        if (!std::isfinite(v))
          return a.name;
      }
    } else if (a.dtype == ir::DType::kFloat64) {
      for (int64_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, a.bytes.data() + i * 8, 8);
        if (!std::isfinite(v))
          return a.name;
      }
    }
  }
  return "";
}

uint64_t Dataset::fingerprint() const {
  uint64_t h = 14695981039346656037ull; // FNV-1a 64 (Fowler, Noll, Vo)
  auto mix = [&h](const void *data, size_t n) {
    const unsigned char *p = static_cast<const unsigned char *>(data);
    for (size_t i = 0; i < n; ++i)
      h = (h ^ p[i]) * 1099511628211ull;
  };
  mix(&samples_, sizeof samples_);
  const int64_t picks = std::min<int64_t>(samples_, 256);
  for (const HostArray &a : arrays_) {
    mix(a.name.data(), a.name.size());
    for (int64_t d : a.shape)
      mix(&d, sizeof d);
    if (samples_ == 0)
      continue;
    const size_t row = a.bytes.size() / static_cast<size_t>(samples_);
    for (int64_t k = 0; k < picks; ++k) {
      const int64_t sample = picks > 1 ? k * (samples_ - 1) / (picks - 1) : 0;
      mix(a.bytes.data() + static_cast<size_t>(sample) * row, row);
    }
  }
  return h;
}

} // namespace dtc::rt
