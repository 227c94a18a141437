// CPU kernels of the index and shape ops: Gather, Slice, Split, Expand, Tile, Pad, Range, Shape,
// Size and ConstantOfShape, in their canonical (newest-opset) forms. They move elements by size, so
// one code path serves f32, i32, i64 and bool. Index, shape and pad tensors are read at run time
// and validated there; a value that disagrees with the static output shape is an error.
#include "ops/cpu/IndexUtil.h"

#include "compiler/ir/TensorData.h"

#include <cmath>
#include <cstdio>
#include <numeric>

namespace dtc::ops::cpu {

// ---- AxisRemap -----------------------------------------------------------------------------

AxisRemap::AxisRemap(std::vector<int64_t> inShape, std::vector<int64_t> outShape, size_t elemSize)
    : inShape_(std::move(inShape)), outShape_(std::move(outShape)), elem_(elemSize) {
  inStrides_ = rowMajorStrides(inShape_);
  coords_.resize(outShape_.size());
  for (size_t a = 0; a < outShape_.size(); ++a) {
    coords_[a].assign(static_cast<size_t>(outShape_[a]), 0);
    if (a < inShape_.size() && inShape_[a] == outShape_[a])
      setIdentity(a);
  }
}

void AxisRemap::setIdentity(size_t a) {
  std::iota(coords_[a].begin(), coords_[a].end(), int64_t{0});
}

namespace {

/// Writes `n` copies of the `elem`-byte value at `fill` (zeros when null) to `out`.
void fillElements(char *out, int64_t n, size_t elem, const void *fill) {
  if (!fill) {
    std::memset(out, 0, static_cast<size_t>(n) * elem);
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(out + static_cast<size_t>(i) * elem, fill, elem);
}

/// The innermost remapped axis: `count` blocks of `Bytes` bytes (0: `bytes`, run-time size).
template <size_t Bytes>
void remapRow(char *out, const char *in, int64_t base, const std::vector<int64_t> &coords,
              int64_t stride, size_t bytes, size_t elem, const void *fill, bool rowFill) {
  const size_t block = Bytes ? Bytes : bytes;
  const int64_t blockElems = static_cast<int64_t>(block / elem);
  for (int64_t c : coords) {
    if (rowFill || c < 0)
      fillElements(out, blockElems, elem, fill);
    else
      std::memcpy(out, in + static_cast<size_t>(base + c * stride) * elem, block);
    out += block;
  }
}

} // namespace

void AxisRemap::copy(const void *inPtr, void *outPtr, const void *fill) const {
  const char *in = static_cast<const char *>(inPtr);
  char *out = static_cast<char *>(outPtr);
  size_t rank = outShape_.size();
  for (int64_t d : outShape_)
    if (d == 0)
      return;
  auto isIdentity = [&](size_t a) {
    if (inShape_[a] != outShape_[a])
      return false;
    for (size_t c = 0; c < coords_[a].size(); ++c)
      if (coords_[a][c] != static_cast<int64_t>(c))
        return false;
    return true;
  };
  // Axes [k, rank) map identically: they form contiguous blocks of blockElems elements.
  size_t k = rank;
  while (k > 0 && isIdentity(k - 1))
    --k;
  int64_t blockElems = 1;
  for (size_t a = k; a < rank; ++a)
    blockElems *= outShape_[a];
  size_t blockBytes = static_cast<size_t>(blockElems) * elem_;
  if (k == 0) {
    std::memcpy(out, in, blockBytes);
    return;
  }
  int64_t rows = 1;
  for (size_t a = 0; a + 1 < k; ++a)
    rows *= outShape_[a];
  const std::vector<int64_t> &last = coords_[k - 1];
  int64_t lastStride = inStrides_[k - 1];
  size_t rowBytes = blockBytes * last.size();
  std::vector<int64_t> idx(k - 1, 0);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t base = 0;
    bool rowFill = false;
    for (size_t a = 0; a + 1 < k; ++a) {
      int64_t c = coords_[a][static_cast<size_t>(idx[a])];
      if (c < 0)
        rowFill = true;
      else
        base += c * inStrides_[a];
    }
    switch (blockBytes) {
    case 1:
      remapRow<1>(out, in, base, last, lastStride, blockBytes, elem_, fill, rowFill);
      break;
    case 4:
      remapRow<4>(out, in, base, last, lastStride, blockBytes, elem_, fill, rowFill);
      break;
    case 8:
      remapRow<8>(out, in, base, last, lastStride, blockBytes, elem_, fill, rowFill);
      break;
    default:
      remapRow<0>(out, in, base, last, lastStride, blockBytes, elem_, fill, rowFill);
    }
    out += rowBytes;
    for (size_t a = k - 1; a-- > 0;) {
      if (++idx[a] < outShape_[a])
        break;
      idx[a] = 0;
    }
  }
}

namespace {

const std::vector<ir::DType> kInt64Only = {ir::DType::kInt64};
const std::vector<ir::DType> kInt32Or64 = {ir::DType::kInt32, ir::DType::kInt64};

size_t elemSize(const TensorDesc &t) { return static_cast<size_t>(ir::dtypeSize(t.dtype)); }

/// Checks that input 0 is an element-moving data tensor and output `outIndex` has its dtype.
Status checkDataAndOutput(const KernelSpec &spec, size_t outIndex = 0) {
  DTC_RETURN_IF_ERROR(checkIndexDataDType(spec, true, 0));
  return checkDType(spec, false, outIndex, {spec.inputs[0].dtype});
}

/// A kernel whose run errors name the node.
class IndexKernel : public Kernel {
protected:
  explicit IndexKernel(const KernelSpec &spec) : where_(spec.where()) {}
  Status error(const std::string &what) const { return Status::error(where_, what); }
  std::string where_;
};

// ---- Gather --------------------------------------------------------------------------------

class GatherKernel : public IndexKernel {
public:
  GatherKernel(const KernelSpec &spec, int64_t axis)
      : IndexKernel(spec), axis_(axis), indexType_(spec.inputs[1].dtype),
        numIndices_(spec.inputs[1].numElements()) {
    const auto &data = spec.inputs[0].shape;
    int64_t outer = 1, inner = 1;
    for (int64_t a = 0; a < axis; ++a)
      outer *= data[static_cast<size_t>(a)];
    for (size_t a = static_cast<size_t>(axis) + 1; a < data.size(); ++a)
      inner *= data[a];
    dim_ = data[static_cast<size_t>(axis)];
    remap_ = AxisRemap({outer, dim_, inner}, {outer, numIndices_, inner}, elemSize(spec.inputs[0]));
  }

  Status run(const KernelArgs &args) override {
    std::vector<int64_t> idx = readIndexTensor(args.inputs[1], indexType_, numIndices_);
    for (int64_t &v : idx) {
      if (v < -dim_ || v >= dim_)
        return error("index " + std::to_string(v) + " is out of range for axis " +
                     std::to_string(axis_) + " of size " + std::to_string(dim_));
      if (v < 0)
        v += dim_;
    }
    remap_.coords(1) = std::move(idx);
    remap_.copy(args.inputs[0], args.outputs[0], nullptr);
    return Status::ok();
  }

private:
  int64_t axis_, dim_ = 0;
  ir::DType indexType_;
  int64_t numIndices_;
  AxisRemap remap_;
};

Expected<int64_t> gatherAxis(const KernelSpec &spec) {
  int64_t rank = static_cast<int64_t>(spec.inputs[0].shape.size());
  int64_t axis = spec.attrInt("axis", 0);
  if (rank == 0)
    return spec.error("input 0 must have rank >= 1");
  if (!normalizeAxisValue(axis, rank))
    return spec.error("axis " + std::to_string(axis) + " is out of range for rank " +
                      std::to_string(rank));
  return axis;
}

// ---- Slice ---------------------------------------------------------------------------------

class SliceKernel : public IndexKernel {
public:
  explicit SliceKernel(const KernelSpec &spec)
      : IndexKernel(spec), inShape_(spec.inputs[0].shape), outShape_(spec.outputs[0].shape),
        n_(spec.inputs[1].numElements()),
        remap_(spec.inputs[0].shape, spec.outputs[0].shape, elemSize(spec.inputs[0])) {
    for (size_t i = 1; i < 5; ++i)
      types_[i] = i < spec.inputs.size() ? spec.inputs[i].dtype : ir::DType::kUndefined;
  }

  Status run(const KernelArgs &args) override {
    int64_t rank = static_cast<int64_t>(inShape_.size());
    std::vector<int64_t> starts = readIndexTensor(args.inputs[1], types_[1], n_);
    std::vector<int64_t> ends = readIndexTensor(args.inputs[2], types_[2], n_);
    std::vector<int64_t> axes(static_cast<size_t>(n_)), steps(static_cast<size_t>(n_), 1);
    std::iota(axes.begin(), axes.end(), int64_t{0});
    if (types_[3] != ir::DType::kUndefined && args.numInputs > 3 && args.inputs[3])
      axes = readIndexTensor(args.inputs[3], types_[3], n_);
    if (types_[4] != ir::DType::kUndefined && args.numInputs > 4 && args.inputs[4])
      steps = readIndexTensor(args.inputs[4], types_[4], n_);
    std::vector<int64_t> first(inShape_.size(), 0), step(inShape_.size(), 1), shape = inShape_;
    std::vector<bool> seen(inShape_.size(), false);
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t a = axes[i];
      if (!normalizeAxisValue(a, rank))
        return error("axis " + std::to_string(axes[i]) + " is out of range for rank " +
                     std::to_string(rank));
      if (seen[static_cast<size_t>(a)])
        return error("axes " + shapeStr(axes) + " repeat axis " + std::to_string(a));
      seen[static_cast<size_t>(a)] = true;
      if (steps[i] == 0)
        return error("slice step must not be 0");
      SliceRange r = clampSlice(inShape_[static_cast<size_t>(a)], starts[i], ends[i], steps[i]);
      first[static_cast<size_t>(a)] = r.start;
      step[static_cast<size_t>(a)] = steps[i];
      shape[static_cast<size_t>(a)] = r.count;
    }
    if (shape != outShape_)
      return error("starts " + shapeStr(starts) + ", ends " + shapeStr(ends) + ", axes " +
                   shapeStr(axes) + ", steps " + shapeStr(steps) + " give output shape " +
                   shapeStr(shape) + ", but the kernel was made for " + shapeStr(outShape_));
    for (size_t a = 0; a < shape.size(); ++a) {
      std::vector<int64_t> &c = remap_.coords(a);
      for (size_t j = 0; j < c.size(); ++j)
        c[j] = first[a] + static_cast<int64_t>(j) * step[a];
    }
    remap_.copy(args.inputs[0], args.outputs[0], nullptr);
    return Status::ok();
  }

private:
  std::vector<int64_t> inShape_, outShape_;
  int64_t n_;
  ir::DType types_[5] = {};
  AxisRemap remap_;
};

// ---- Split ---------------------------------------------------------------------------------

int64_t splitAxis(const KernelSpec &spec) {
  int64_t axis = spec.attrInt("axis", 0);
  normalizeAxisValue(axis, static_cast<int64_t>(spec.inputs[0].shape.size()));
  return axis;
}

std::vector<int64_t> splitSizesOf(const KernelSpec &spec, int64_t axis) {
  std::vector<int64_t> sizes;
  for (const TensorDesc &t : spec.outputs)
    sizes.push_back(t.shape[static_cast<size_t>(axis)]);
  return sizes;
}

class SplitKernel : public IndexKernel {
public:
  explicit SplitKernel(const KernelSpec &spec)
      : IndexKernel(spec), sizes_(splitSizesOf(spec, splitAxis(spec))),
        hasSplit_(spec.inputs.size() > 1 && spec.inputs[1].present()) {
    const auto &in = spec.inputs[0].shape;
    size_t axis = static_cast<size_t>(splitAxis(spec));
    outer_ = 1;
    for (size_t a = 0; a < axis; ++a)
      outer_ *= in[a];
    int64_t inner = static_cast<int64_t>(elemSize(spec.inputs[0]));
    for (size_t a = axis + 1; a < in.size(); ++a)
      inner *= in[a];
    innerBytes_ = inner;
    dim_ = in[axis];
  }

  Status run(const KernelArgs &args) override {
    if (hasSplit_ && args.numInputs > 1 && args.inputs[1]) {
      std::vector<int64_t> split =
          readIndexTensor(args.inputs[1], ir::DType::kInt64, static_cast<int64_t>(sizes_.size()));
      if (split != sizes_)
        return error("split " + shapeStr(split) + " disagrees with the output sizes " +
                     shapeStr(sizes_) + " the kernel was made for");
    }
    const char *in = static_cast<const char *>(args.inputs[0]);
    int64_t offset = 0;
    for (size_t i = 0; i < sizes_.size(); ++i) {
      size_t chunk = static_cast<size_t>(sizes_[i] * innerBytes_);
      char *out = static_cast<char *>(args.outputs[i]);
      if (chunk > 0)
        for (int64_t o = 0; o < outer_; ++o)
          std::memcpy(out + static_cast<size_t>(o) * chunk,
                      in + static_cast<size_t>((o * dim_ + offset) * innerBytes_), chunk);
      offset += sizes_[i];
    }
    return Status::ok();
  }

private:
  std::vector<int64_t> sizes_;
  bool hasSplit_;
  int64_t outer_ = 1, innerBytes_ = 1, dim_ = 0;
};

// ---- Expand --------------------------------------------------------------------------------

/// The input shape with leading 1s up to `rank`.
std::vector<int64_t> leftPadded(const std::vector<int64_t> &shape, size_t rank) {
  std::vector<int64_t> out(rank - std::min(rank, shape.size()), 1);
  out.insert(out.end(), shape.begin(), shape.end());
  return out;
}

class ExpandKernel : public IndexKernel {
public:
  explicit ExpandKernel(const KernelSpec &spec)
      : IndexKernel(spec), inShape_(spec.inputs[0].shape), outShape_(spec.outputs[0].shape),
        n_(spec.inputs[1].numElements()),
        remap_(leftPadded(spec.inputs[0].shape, spec.outputs[0].shape.size()),
               spec.outputs[0].shape, elemSize(spec.inputs[0])) {
    // Axes of size 1 broadcast: every output coordinate reads input coordinate 0 (the default).
  }

  Status run(const KernelArgs &args) override {
    std::vector<int64_t> target = readIndexTensor(args.inputs[1], ir::DType::kInt64, n_);
    std::vector<int64_t> shape;
    bool ok = std::all_of(target.begin(), target.end(), [](int64_t d) { return d >= 0; }) &&
              broadcastShapes(inShape_, target, shape);
    if (!ok || shape != outShape_)
      return error("shape " + shapeStr(target) + " expands input " + shapeStr(inShape_) +
                   (ok ? " to " + shapeStr(shape) : std::string(" to nothing valid")) +
                   ", but the kernel was made for " + shapeStr(outShape_));
    remap_.copy(args.inputs[0], args.outputs[0], nullptr);
    return Status::ok();
  }

private:
  std::vector<int64_t> inShape_, outShape_;
  int64_t n_;
  AxisRemap remap_;
};

// ---- Tile ----------------------------------------------------------------------------------

class TileKernel : public IndexKernel {
public:
  explicit TileKernel(const KernelSpec &spec)
      : IndexKernel(spec), inShape_(spec.inputs[0].shape), outShape_(spec.outputs[0].shape),
        remap_(spec.inputs[0].shape, spec.outputs[0].shape, elemSize(spec.inputs[0])) {
    for (size_t a = 0; a < outShape_.size(); ++a) {
      std::vector<int64_t> &c = remap_.coords(a);
      for (size_t j = 0; j < c.size(); ++j)
        c[j] = static_cast<int64_t>(j) % inShape_[a]; // out > 0 implies in > 0
    }
  }

  Status run(const KernelArgs &args) override {
    std::vector<int64_t> repeats =
        readIndexTensor(args.inputs[1], ir::DType::kInt64, static_cast<int64_t>(inShape_.size()));
    for (size_t a = 0; a < repeats.size(); ++a) {
      int64_t size = 0;
      if (repeats[a] < 0 || __builtin_mul_overflow(inShape_[a], repeats[a], &size) ||
          size != outShape_[a])
        return error("repeats " + shapeStr(repeats) + " do not tile input " + shapeStr(inShape_) +
                     " to the output " + shapeStr(outShape_) + " the kernel was made for");
    }
    remap_.copy(args.inputs[0], args.outputs[0], nullptr);
    return Status::ok();
  }

private:
  std::vector<int64_t> inShape_, outShape_;
  AxisRemap remap_;
};

// ---- Pad -----------------------------------------------------------------------------------

class PadKernel : public IndexKernel {
public:
  explicit PadKernel(const KernelSpec &spec)
      : IndexKernel(spec), mode_(spec.attrString("mode", "constant")),
        inShape_(spec.inputs[0].shape), outShape_(spec.outputs[0].shape),
        numPads_(spec.inputs[1].numElements()),
        axesType_(spec.inputs.size() > 3 ? spec.inputs[3].dtype : ir::DType::kUndefined),
        hasValue_(spec.inputs.size() > 2 && spec.inputs[2].present()),
        remap_(spec.inputs[0].shape, spec.outputs[0].shape, elemSize(spec.inputs[0])) {}

  Status run(const KernelArgs &args) override {
    int64_t rank = static_cast<int64_t>(inShape_.size());
    std::vector<int64_t> pads = readIndexTensor(args.inputs[1], ir::DType::kInt64, numPads_);
    std::vector<int64_t> axes(inShape_.size());
    std::iota(axes.begin(), axes.end(), int64_t{0});
    if (axesType_ != ir::DType::kUndefined && args.numInputs > 3 && args.inputs[3])
      axes = readIndexTensor(args.inputs[3], axesType_, numPads_ / 2);
    std::vector<int64_t> begin(inShape_.size(), 0), shape = inShape_;
    std::vector<bool> seen(inShape_.size(), false);
    size_t n = axes.size();
    for (size_t i = 0; i < n; ++i) {
      int64_t a = axes[i];
      if (!normalizeAxisValue(a, rank))
        return error("axis " + std::to_string(axes[i]) + " is out of range for rank " +
                     std::to_string(rank));
      size_t ua = static_cast<size_t>(a);
      if (seen[ua])
        return error("axes " + shapeStr(axes) + " repeat axis " + std::to_string(a));
      seen[ua] = true;
      int64_t b = pads[i], e = pads[i + n], dim = inShape_[ua], size = 0;
      if (__builtin_add_overflow(dim, b, &size) || __builtin_add_overflow(size, e, &size) ||
          size < 0)
        return error("pads " + shapeStr(pads) + " give axis " + std::to_string(a) + " of size " +
                     std::to_string(dim) + " a negative or overflowing size");
      if (mode_ != "constant" && dim == 0 && size > 0)
        return error("cannot pad an empty axis in " + mode_ + " mode");
      if (mode_ == "reflect" && (b >= dim || e >= dim) && size > 0)
        return error("reflect pads " + shapeStr(pads) + " must be smaller than the size " +
                     std::to_string(dim) + " of axis " + std::to_string(a));
      begin[ua] = b;
      shape[ua] = size;
    }
    if (shape != outShape_)
      return error("pads " + shapeStr(pads) + " give output shape " + shapeStr(shape) +
                   ", but the kernel was made for " + shapeStr(outShape_));
    for (size_t a = 0; a < shape.size(); ++a) {
      std::vector<int64_t> &c = remap_.coords(a);
      for (size_t j = 0; j < c.size(); ++j)
        c[j] = padSourceIndex(static_cast<int64_t>(j) - begin[a], inShape_[a], mode_);
    }
    const void *fill =
        hasValue_ && mode_ == "constant" && args.numInputs > 2 ? args.inputs[2] : nullptr;
    remap_.copy(args.inputs[0], args.outputs[0], fill);
    return Status::ok();
  }

private:
  std::string mode_;
  std::vector<int64_t> inShape_, outShape_;
  int64_t numPads_;
  ir::DType axesType_;
  bool hasValue_;
  AxisRemap remap_;
};

// ---- Range ---------------------------------------------------------------------------------

/// max(ceil((limit - start) / delta), 0) in exact integer arithmetic (delta != 0).
int64_t intRangeLength(int64_t start, int64_t limit, int64_t delta) {
  __int128 span = static_cast<__int128>(limit) - start;
  __int128 q = span / delta;
  if (q * delta != span && ((span > 0) == (delta > 0)))
    ++q;
  if (q > INT64_MAX)
    return INT64_MAX;
  return q > 0 ? static_cast<int64_t>(q) : int64_t{0};
}

class RangeKernel : public IndexKernel {
public:
  RangeKernel(const KernelSpec &spec)
      : IndexKernel(spec), type_(spec.inputs[0].dtype), length_(spec.outputs[0].shape[0]) {}

  Status run(const KernelArgs &args) override {
    if (type_ == ir::DType::kFloat32)
      return runFloat(args);
    int64_t s = readIndexTensor(args.inputs[0], type_, 1)[0];
    int64_t l = readIndexTensor(args.inputs[1], type_, 1)[0];
    int64_t d = readIndexTensor(args.inputs[2], type_, 1)[0];
    if (d == 0)
      return error("delta must not be 0");
    int64_t n = intRangeLength(s, l, d);
    if (n != length_)
      return error(lengthMessage(std::to_string(s), std::to_string(l), std::to_string(d), n));
    for (int64_t k = 0; k < n; ++k) {
      // The true value lies between start and limit, so wrapping arithmetic is exact.
      int64_t v = static_cast<int64_t>(static_cast<uint64_t>(s) +
                                       static_cast<uint64_t>(k) * static_cast<uint64_t>(d));
      if (type_ == ir::DType::kInt64)
        static_cast<int64_t *>(args.outputs[0])[k] = v;
      else
        static_cast<int32_t *>(args.outputs[0])[k] = static_cast<int32_t>(v);
    }
    return Status::ok();
  }

private:
  /// Float32 Range as dtc's constant folding computes it (ops/tensor/Range.cpp): length
  /// ceil(float(limit - start) / delta), element k = start + float(k) * delta.
  Status runFloat(const KernelArgs &args) {
    float s, l, d;
    std::memcpy(&s, args.inputs[0], 4);
    std::memcpy(&l, args.inputs[1], 4);
    std::memcpy(&d, args.inputs[2], 4);
    if (d == 0.0f)
      return error("delta must not be 0");
    double q = static_cast<double>(
        std::ceil(static_cast<float>(static_cast<double>(l) - static_cast<double>(s)) / d));
    if (!std::isfinite(q) || q > static_cast<double>(INT64_MAX / 2))
      return error("range length is not finite");
    int64_t n = q > 0 ? static_cast<int64_t>(q) : 0;
    if (n != length_)
      return error(lengthMessage(floatText(s), floatText(l), floatText(d), n));
    float *out = static_cast<float *>(args.outputs[0]);
    for (int64_t k = 0; k < n; ++k)
      out[k] = s + static_cast<float>(k) * d;
    return Status::ok();
  }

  static std::string floatText(float v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
    return buf;
  }

  std::string lengthMessage(const std::string &s, const std::string &l, const std::string &d,
                            int64_t n) const {
    return "start " + s + ", limit " + l + ", delta " + d + " give " + std::to_string(n) +
           " elements, but the kernel was made for " + std::to_string(length_);
  }

  ir::DType type_;
  int64_t length_;
};

// ---- Shape ---------------------------------------------------------------------------------

/// The dims Shape-15 outputs for `in` with start/end attributes (negative = from the end,
/// clamped to [0, rank]).
std::vector<int64_t> shapeOpDims(const KernelSpec &spec) {
  const auto &in = spec.inputs[0].shape;
  int64_t rank = static_cast<int64_t>(in.size());
  int64_t start = spec.attrInt("start", 0), end = spec.attrInt("end", rank);
  if (start < 0)
    start += rank;
  if (end < 0)
    end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  return std::vector<int64_t>(in.begin() + start, in.begin() + std::max(start, end));
}

/// Writes a fixed byte pattern: Shape's dims, or ConstantOfShape's value repeated.
class ConstantKernel : public IndexKernel {
public:
  ConstantKernel(const KernelSpec &spec, std::string pattern, int64_t repeat,
                 std::vector<int64_t> checkedShape, ir::DType shapeType, bool checkShape)
      : IndexKernel(spec), pattern_(std::move(pattern)), repeat_(repeat),
        outShape_(std::move(checkedShape)), shapeType_(shapeType), checkShape_(checkShape) {}

  Status run(const KernelArgs &args) override {
    if (checkShape_) {
      std::vector<int64_t> dims =
          readIndexTensor(args.inputs[0], shapeType_, static_cast<int64_t>(outShape_.size()));
      if (dims != outShape_)
        return error("shape " + shapeStr(dims) + " disagrees with the output shape " +
                     shapeStr(outShape_) + " the kernel was made for");
    }
    char *out = static_cast<char *>(args.outputs[0]);
    for (int64_t i = 0; i < repeat_; ++i)
      std::memcpy(out + static_cast<size_t>(i) * pattern_.size(), pattern_.data(), pattern_.size());
    return Status::ok();
  }

private:
  std::string pattern_;
  int64_t repeat_;
  std::vector<int64_t> outShape_;
  ir::DType shapeType_;
  bool checkShape_;
};

/// ConstantOfShape's fill value: the `value` tensor attribute (one element), or f32 0.
Expected<ir::TensorDataPtr> constantValue(const KernelSpec &spec) {
  auto it = spec.attrs.find("value");
  if (it == spec.attrs.end())
    return ir::TensorDataPtr(ir::TensorData::fromFloats("value", {1}, {0.0f}));
  if (it->second.kind() != ir::AttrKind::kTensor || !it->second.t())
    return spec.error("attribute 'value' must be a tensor");
  const ir::TensorDataPtr &t = it->second.t();
  if (t->numElements() != 1)
    return spec.error("attribute 'value' must hold exactly one element, got " +
                      std::to_string(t->numElements()));
  return t;
}

} // namespace

// ---- checks and factories ------------------------------------------------------------------

Status checkGather(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1));
  DTC_RETURN_IF_ERROR(checkDataAndOutput(spec));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, kInt32Or64));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  DTC_ASSIGN_OR_RETURN(int64_t axis, gatherAxis(spec));
  const auto &data = spec.inputs[0].shape;
  const auto &idx = spec.inputs[1].shape;
  std::vector<int64_t> out(data.begin(), data.begin() + axis);
  out.insert(out.end(), idx.begin(), idx.end());
  out.insert(out.end(), data.begin() + axis + 1, data.end());
  return checkOutputShape(spec, out);
}

Expected<KernelPtr> createGather(const KernelSpec &spec, CpuContext &) {
  DTC_ASSIGN_OR_RETURN(int64_t axis, gatherAxis(spec));
  return KernelPtr(std::make_unique<GatherKernel>(spec, axis));
}

Status checkSlice(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 3, 5, 1));
  DTC_RETURN_IF_ERROR(checkDataAndOutput(spec));
  for (size_t i = 1; i < spec.inputs.size(); ++i)
    DTC_RETURN_IF_ERROR(checkIndexVector(spec, i, i < 3, kInt32Or64));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  int64_t n = spec.inputs[1].shape[0];
  for (size_t i = 2; i < spec.inputs.size(); ++i)
    if (spec.inputs[i].present() && spec.inputs[i].shape[0] != n)
      return spec.error("input " + std::to_string(i) + " has " +
                        std::to_string(spec.inputs[i].shape[0]) + " entries but starts has " +
                        std::to_string(n));
  const auto &in = spec.inputs[0].shape, &out = spec.outputs[0].shape;
  bool ok = in.size() == out.size() && n <= static_cast<int64_t>(in.size());
  for (size_t a = 0; ok && a < in.size(); ++a)
    ok = out[a] <= in[a];
  if (!ok)
    return spec.error("output " + spec.outputs[0].str() + " cannot be a slice of input " +
                      spec.inputs[0].str() + " along " + std::to_string(n) + " axes");
  return Status::ok();
}

Expected<KernelPtr> createSlice(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<SliceKernel>(spec));
}

Status checkSplit(const KernelSpec &spec) {
  if (spec.outputs.empty())
    return spec.error("expected at least 1 output, got 0");
  DTC_RETURN_IF_ERROR(checkArity(spec, 1, 2, spec.outputs.size()));
  DTC_RETURN_IF_ERROR(checkIndexDataDType(spec, true, 0));
  for (size_t i = 0; i < spec.outputs.size(); ++i)
    DTC_RETURN_IF_ERROR(checkDType(spec, false, i, {spec.inputs[0].dtype}));
  DTC_RETURN_IF_ERROR(checkIndexVector(spec, 1, false, kInt64Only));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  const auto &in = spec.inputs[0].shape;
  int64_t rank = static_cast<int64_t>(in.size()), axis = spec.attrInt("axis", 0);
  if (!normalizeAxisValue(axis, rank))
    return spec.error("axis " + std::to_string(spec.attrInt("axis", 0)) +
                      " is out of range for rank " + std::to_string(rank));
  size_t ua = static_cast<size_t>(axis);
  int64_t n = static_cast<int64_t>(spec.outputs.size()), sum = 0;
  for (size_t i = 0; i < spec.outputs.size(); ++i) {
    const auto &s = spec.outputs[i].shape;
    bool ok = s.size() == in.size();
    for (size_t a = 0; ok && a < s.size(); ++a)
      ok = a == ua || s[a] == in[a];
    if (!ok)
      return spec.error("output " + std::to_string(i) + " has shape " + shapeStr(s) +
                        ", which does not match input " + shapeStr(in) + " outside axis " +
                        std::to_string(axis));
    sum += s[ua];
  }
  std::vector<int64_t> sizes = splitSizesOf(spec, axis);
  if (sum != in[ua])
    return spec.error("output sizes " + shapeStr(sizes) + " along axis " + std::to_string(axis) +
                      " sum to " + std::to_string(sum) + ", but the input has " +
                      std::to_string(in[ua]));
  bool hasSplit = spec.inputs.size() > 1 && spec.inputs[1].present();
  if (hasSplit && spec.inputs[1].shape[0] != n)
    return spec.error("split has " + std::to_string(spec.inputs[1].shape[0]) +
                      " entries but the node has " + std::to_string(n) + " outputs");
  if (spec.attrs.count("num_outputs")) {
    if (hasSplit)
      return spec.error("either input 'split' or attribute 'num_outputs' may be given, not both");
    if (spec.attrInt("num_outputs", 0) != n)
      return spec.error("num_outputs is " + std::to_string(spec.attrInt("num_outputs", 0)) +
                        " but the node has " + std::to_string(n) + " outputs");
    // Split-18: chunks of ceil(dim / n), the last one smaller.
    int64_t chunk = in[ua] / n + (in[ua] % n != 0 ? 1 : 0);
    std::vector<int64_t> expected(static_cast<size_t>(n), chunk);
    expected.back() = in[ua] - chunk * (n - 1);
    if (sizes != expected)
      return spec.error("output sizes " + shapeStr(sizes) + " differ from the num_outputs split " +
                        shapeStr(expected));
  }
  return Status::ok();
}

Expected<KernelPtr> createSplit(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<SplitKernel>(spec));
}

Status checkExpand(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1));
  DTC_RETURN_IF_ERROR(checkDataAndOutput(spec));
  DTC_RETURN_IF_ERROR(checkIndexVector(spec, 1, true, kInt64Only));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  const auto &in = spec.inputs[0].shape, &out = spec.outputs[0].shape;
  std::vector<int64_t> b;
  if (static_cast<int64_t>(out.size()) !=
          std::max<int64_t>(static_cast<int64_t>(in.size()), spec.inputs[1].shape[0]) ||
      !broadcastShapes(in, out, b) || b != out)
    return spec.error("output " + spec.outputs[0].str() + " is not an expansion of input " +
                      spec.inputs[0].str() + " by a shape of " +
                      std::to_string(spec.inputs[1].shape[0]) + " entries");
  return Status::ok();
}

Expected<KernelPtr> createExpand(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<ExpandKernel>(spec));
}

Status checkTile(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1));
  DTC_RETURN_IF_ERROR(checkDataAndOutput(spec));
  DTC_RETURN_IF_ERROR(checkIndexVector(spec, 1, true, kInt64Only));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  const auto &in = spec.inputs[0].shape, &out = spec.outputs[0].shape;
  if (spec.inputs[1].shape[0] != static_cast<int64_t>(in.size()))
    return spec.error("repeats has " + std::to_string(spec.inputs[1].shape[0]) +
                      " entries but input 0 has rank " + std::to_string(in.size()));
  bool ok = in.size() == out.size();
  for (size_t a = 0; ok && a < in.size(); ++a)
    ok = in[a] == 0 ? out[a] == 0 : out[a] % in[a] == 0;
  if (!ok)
    return spec.error("output " + spec.outputs[0].str() + " is not a tiling of input " +
                      spec.inputs[0].str());
  return Status::ok();
}

Expected<KernelPtr> createTile(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<TileKernel>(spec));
}

Status checkPad(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 4, 1));
  DTC_RETURN_IF_ERROR(checkDataAndOutput(spec));
  DTC_RETURN_IF_ERROR(checkIndexVector(spec, 1, true, kInt64Only));
  DTC_RETURN_IF_ERROR(checkIndexVector(spec, 3, false, kInt32Or64));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  std::string mode = spec.attrString("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return spec.error("unknown pad mode '" + mode + "'");
  if (spec.inputs.size() > 2 && spec.inputs[2].present()) {
    DTC_RETURN_IF_ERROR(checkDType(spec, true, 2, {spec.inputs[0].dtype}));
    if (spec.inputs[2].numElements() != 1)
      return spec.error("constant_value must be one element, got " + spec.inputs[2].str());
  }
  const auto &in = spec.inputs[0].shape;
  int64_t axes = spec.inputs.size() > 3 && spec.inputs[3].present()
                     ? spec.inputs[3].shape[0]
                     : static_cast<int64_t>(in.size());
  if (spec.inputs[1].shape[0] != 2 * axes)
    return spec.error("pads has " + std::to_string(spec.inputs[1].shape[0]) +
                      " entries; expected 2 per padded axis (" + std::to_string(2 * axes) + ")");
  if (spec.outputs[0].shape.size() != in.size())
    return spec.error("output " + spec.outputs[0].str() + " and input " + spec.inputs[0].str() +
                      " differ in rank");
  return Status::ok();
}

Expected<KernelPtr> createPad(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<PadKernel>(spec));
}

Status checkRange(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 3, 3, 1));
  DTC_RETURN_IF_ERROR(
      checkDType(spec, true, 0, {ir::DType::kFloat32, ir::DType::kInt32, ir::DType::kInt64}));
  for (size_t i = 1; i < 3; ++i)
    DTC_RETURN_IF_ERROR(checkDType(spec, true, i, {spec.inputs[0].dtype}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {spec.inputs[0].dtype}));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  for (size_t i = 0; i < 3; ++i)
    if (spec.inputs[i].shape.size() > 1 || spec.inputs[i].numElements() != 1)
      return spec.error("input " + std::to_string(i) + " must be a scalar, got shape " +
                        shapeStr(spec.inputs[i].shape));
  if (spec.outputs[0].shape.size() != 1)
    return spec.error("output 0 must be 1-D, got shape " + shapeStr(spec.outputs[0].shape));
  return Status::ok();
}

Expected<KernelPtr> createRange(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<RangeKernel>(spec));
}

Status checkShapeOp(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, kInt64Only));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  return checkOutputShape(spec, {static_cast<int64_t>(shapeOpDims(spec).size())});
}

Expected<KernelPtr> createShapeOp(const KernelSpec &spec, CpuContext &) {
  std::vector<int64_t> dims = shapeOpDims(spec);
  std::string bytes(dims.size() * sizeof(int64_t), '\0');
  if (!dims.empty())
    std::memcpy(bytes.data(), dims.data(), bytes.size());
  return KernelPtr(
      std::make_unique<ConstantKernel>(spec, bytes, 1, dims, ir::DType::kInt64, false));
}

// Size: the input's element count, known when the kernel is made (its data is not read).
Status checkSizeOp(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, kInt64Only));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  return checkOutputShape(spec, {});
}

Expected<KernelPtr> createSizeOp(const KernelSpec &spec, CpuContext &) {
  const int64_t n = spec.inputs[0].numElements();
  std::string bytes(sizeof(int64_t), '\0');
  std::memcpy(bytes.data(), &n, sizeof(n));
  return KernelPtr(std::make_unique<ConstantKernel>(spec, bytes, 1, std::vector<int64_t>{},
                                                    ir::DType::kInt64, false));
}

Status checkConstantOfShape(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1));
  DTC_RETURN_IF_ERROR(checkIndexVector(spec, 0, true, kInt64Only));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  DTC_ASSIGN_OR_RETURN(ir::TensorDataPtr value, constantValue(spec));
  if (std::find(indexDataDTypes().begin(), indexDataDTypes().end(), value->dtype()) ==
      indexDataDTypes().end())
    return spec.error(std::string("attribute 'value' has dtype ") + ir::dtypeName(value->dtype()) +
                      "; the CPU kernel supports f32, i32, i64 or bool");
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {value->dtype()}));
  if (spec.inputs[0].shape[0] != static_cast<int64_t>(spec.outputs[0].shape.size()))
    return spec.error("output " + spec.outputs[0].str() + " has rank " +
                      std::to_string(spec.outputs[0].shape.size()) + " but the shape input has " +
                      std::to_string(spec.inputs[0].shape[0]) + " entries");
  return Status::ok();
}

Expected<KernelPtr> createConstantOfShape(const KernelSpec &spec, CpuContext &) {
  DTC_ASSIGN_OR_RETURN(ir::TensorDataPtr value, constantValue(spec));
  Expected<const std::string *> bytes = value->bytes();
  if (!bytes.hasValue())
    return spec.error("attribute 'value': " + bytes.status().message());
  if ((*bytes)->size() != static_cast<size_t>(ir::dtypeSize(value->dtype())))
    return spec.error("attribute 'value' holds " + std::to_string((*bytes)->size()) +
                      " bytes, expected one " + ir::dtypeName(value->dtype()));
  return KernelPtr(std::make_unique<ConstantKernel>(spec, **bytes, spec.outputs[0].numElements(),
                                                    spec.outputs[0].shape, ir::DType::kInt64,
                                                    true));
}

} // namespace dtc::ops::cpu
