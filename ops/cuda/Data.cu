// CUDA kernels of the data-movement ops that map output coordinates to input coordinates axis by
// axis: Transpose (a 32x32 shared-memory tile kernel for (batched) 2-D transposes, a strided
// gather otherwise; DepthToSpace and SpaceToDepth are transposes of a 6-D view), Slice and Pad
// (their starts/ends/axes/steps or pads are read on the device by the first thread of every block
// and checked against the plan's output shape; a mismatch is an error site, never a host
// synchronization), Concat and Split (one strided copy per operand), Expand and Tile (broadcast
// strides, wrapped coordinates; their shape/repeats inputs are implied by the static output shape
// and not read), ai.dtc.SliceGrad (zero fill, strided scatter), Where (three-way broadcasting) and
// Cast/CastLike (ops/cpu/Cast.cpp's conversions). Elements move by size (1, 2, 4 or 8 bytes), so
// one instantiation serves every dtype of that size. The index math is in ops/cuda/DataUtil.cuh.
#include "ops/cuda/CudaKernel.h"
#include "ops/cuda/DataUtil.cuh"
#include "ops/tensor/SpaceDepthView.h"

#include <algorithm>

namespace dtc::ops::cuda {

namespace {

// ---- device kernels ----------------------------------------------------------------------------

/// out[e] = in[offset(e)] for the dense output (gather) or out[offset(e)] = in[e] for the dense
/// input (scatter).
template <typename T, bool Scatter>
__global__ void stridedCopyKernel(const T *__restrict__ in, T *__restrict__ out, int64_t n,
                                  StridedMap m) {
  for (int64_t e = gridStart(); e < n; e += gridStride()) {
    if constexpr (Scatter)
      out[stridedOffset(m, e)] = in[e];
    else
      out[e] = in[stridedOffset(m, e)];
  }
}

constexpr int kTile = 32, kTileRows = 8;

/// out[b][c][r] = in[b][r][c] for in of shape [batch][rows][cols], one 32x32 tile per block
/// iteration (coalesced reads and writes through shared memory; the +1 column avoids bank
/// conflicts).
template <typename T>
__global__ void transpose2dKernel(const T *__restrict__ in, T *__restrict__ out, int64_t batch,
                                  int64_t rows, int64_t cols) {
  __shared__ T tile[kTile][kTile + 1];
  const int64_t tilesR = (rows + kTile - 1) / kTile, tilesC = (cols + kTile - 1) / kTile;
  const int64_t perBatch = tilesR * tilesC, total = batch * perBatch;
  for (int64_t t = blockIdx.x; t < total; t += gridDim.x) {
    const int64_t b = t / perBatch, rem = t % perBatch;
    const int64_t r0 = (rem / tilesC) * kTile, c0 = (rem % tilesC) * kTile;
    const T *src = in + b * rows * cols;
    T *dst = out + b * rows * cols;
    for (int i = threadIdx.y; i < kTile; i += kTileRows) {
      const int64_t r = r0 + i, c = c0 + threadIdx.x;
      if (r < rows && c < cols)
        tile[i][threadIdx.x] = src[r * cols + c];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < kTile; i += kTileRows) {
      const int64_t c = c0 + i, r = r0 + threadIdx.x;
      if (c < cols && r < rows)
        dst[c * rows + r] = tile[threadIdx.x][i];
    }
    __syncthreads();
  }
}

/// The static part of a Slice: shapes, which optional inputs are given, their index types.
struct SliceStatic {
  int rank = 0;
  int64_t in[kDataMaxRank] = {};
  int64_t out[kDataMaxRank] = {};
  int64_t n = 0;     ///< entries of starts/ends/axes/steps (<= rank, the CPU check)
  bool is64[4] = {}; ///< starts, ends, axes, steps
  int site = 0;
  int *slot = nullptr;
};

struct SliceInputs {
  const void *starts, *ends, *axes, *steps; ///< axes and steps may be null
};

template <typename T>
__global__ void sliceKernel(const T *__restrict__ in, T *__restrict__ out, int64_t total,
                            SliceStatic p, SliceInputs v) {
  __shared__ alignas(8) unsigned char mapBytes[sizeof(StridedMap)];
  StridedMap &shared = *reinterpret_cast<StridedMap *>(mapBytes);
  if (threadIdx.x == 0) {
    int64_t starts[kDataMaxRank], ends[kDataMaxRank], axes[kDataMaxRank], steps[kDataMaxRank];
    for (int64_t i = 0; i < p.n; ++i) {
      starts[i] = loadIndex(v.starts, p.is64[0], i);
      ends[i] = loadIndex(v.ends, p.is64[1], i);
      axes[i] = v.axes ? loadIndex(v.axes, p.is64[2], i) : i;
      steps[i] = v.steps ? loadIndex(v.steps, p.is64[3], i) : 1;
    }
    StridedMap m;
    const int bad = sliceMap(p.in, p.out, p.rank, SliceArgs{starts, ends, axes, steps, p.n}, m);
    if (bad && blockIdx.x == 0)
      reportError(p.slot, p.site);
    coalesce(m);
    shared = m;
  }
  __syncthreads();
  const StridedMap m = shared;
  for (int64_t e = gridStart(); e < total; e += gridStride())
    out[e] = in[stridedOffset(m, e)];
}

/// The static part of a Pad.
struct PadStatic {
  int rank = 0;
  int64_t in[kDataMaxRank] = {};
  int64_t out[kDataMaxRank] = {};
  int64_t numPads = 0;  ///< entries of pads (2 per padded axis)
  bool hasAxes = false; ///< input 3 given
  bool axesIs64 = false;
  PadMode mode = PadMode::kConstant;
  int site = 0;
  int *slot = nullptr;
};

/// r = a + b; true (r unchanged) when the sum overflows int64.
__device__ inline bool addOverflows(int64_t a, int64_t b, int64_t &r) {
  if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b))
    return true;
  r = a + b;
  return false;
}

/// Per-axis begin pads from pads/axes (the checks of the CPU's PadKernel::run); 1 when they do
/// not give the output shape (then all begins are 0: every source index stays in range).
__device__ inline int padBegins(const PadStatic &p, const int64_t *pads, const void *axesPtr,
                                int64_t *begin) {
  for (int a = 0; a < p.rank; ++a)
    begin[a] = 0;
  int64_t shape[kDataMaxRank];
  bool seen[kDataMaxRank] = {};
  for (int a = 0; a < p.rank; ++a)
    shape[a] = p.in[a];
  const int64_t n = p.numPads / 2;
  int bad = 0;
  for (int64_t i = 0; !bad && i < n; ++i) {
    int64_t a = p.hasAxes ? loadIndex(axesPtr, p.axesIs64, i) : i;
    if (a < 0)
      a += p.rank;
    if (a < 0 || a >= p.rank || seen[a]) {
      bad = 1;
      break;
    }
    seen[a] = true;
    const int64_t b = pads[i], e = pads[i + n], dim = p.in[a];
    int64_t size = 0;
    if (addOverflows(dim, b, size) || addOverflows(size, e, size) || size < 0) {
      bad = 1;
      break;
    }
    if (p.mode != PadMode::kConstant && dim == 0 && size > 0)
      bad = 1;
    if (p.mode == PadMode::kReflect && (b >= dim || e >= dim) && size > 0)
      bad = 1;
    begin[a] = b;
    shape[a] = size;
  }
  for (int a = 0; !bad && a < p.rank; ++a)
    bad = shape[a] != p.out[a];
  if (bad)
    for (int a = 0; a < p.rank; ++a)
      begin[a] = 0;
  return bad;
}

template <typename T>
__global__ void padKernel(const T *__restrict__ in, T *__restrict__ out, int64_t total, PadStatic p,
                          const int64_t *pads, const void *axes, const T *value) {
  __shared__ int64_t begin[kDataMaxRank];
  if (threadIdx.x == 0) {
    int64_t b[kDataMaxRank];
    if (padBegins(p, pads, axes, b) && blockIdx.x == 0)
      reportError(p.slot, p.site);
    for (int a = 0; a < p.rank; ++a)
      begin[a] = b[a];
  }
  __syncthreads();
  const T fill = value ? *value : T(0);
  for (int64_t e = gridStart(); e < total; e += gridStride()) {
    int64_t rest = e, off = 0, stride = 1;
    bool pad = false;
    for (int a = p.rank - 1; a >= 0; --a) {
      const int64_t c = rest % p.out[a];
      rest /= p.out[a];
      const int64_t s = padSource(c - begin[a], p.in[a], p.mode);
      pad = pad || s < 0;
      off += s * stride;
      stride *= p.in[a];
    }
    out[e] = pad ? fill : in[off];
  }
}

/// out[e] = cond[.] ? x[.] : y[.] with three-way broadcasting. Not restrict: the output may be
/// a branch of its own shape (each element is read and written by one thread).
template <typename T>
__global__ void whereKernel(const uint8_t *cond, const T *x, const T *y, T *out, int64_t n,
                            Broadcast3 m) {
  for (int64_t e = gridStart(); e < n; e += gridStride()) {
    int64_t off[3];
    broadcastOffsets(m, e, off);
    out[e] = cond[off[0]] ? x[off[1]] : y[off[2]];
  }
}

/// Elementwise conversion; may run in place when the element sizes are equal.
template <typename From, typename To>
__global__ void castKernel(const From *in, To *out, int64_t n) {
  for (int64_t e = gridStart(); e < n; e += gridStride())
    out[e] = castValue<From, To>(in[e]);
}

// ---- host side ---------------------------------------------------------------------------------

/// The unsigned type of an element size (1, 2, 4 or 8 bytes; the checks allow no other).
template <typename Fn> Status withElementSize(int64_t size, Fn &&fn) {
  switch (size) {
  case 1:
    return fn(uint8_t{});
  case 2:
    return fn(uint16_t{});
  case 4:
    return fn(uint32_t{});
  default:
    return fn(uint64_t{});
  }
}

/// Launches a strided copy of n elements of `elem` bytes.
Status launchStrided(bool scatter, int64_t elem, const void *in, void *out, int64_t n,
                     const StridedMap &map, cudaStream_t stream, const std::string &where) {
  if (n == 0)
    return Status::ok();
  PitchedCopy c;
  if (asPitchedCopy(map, elem, c)) { // the copy engine's 2-D form: no index math per element
    char *dst = static_cast<char *>(out);
    const char *src = static_cast<const char *>(in);
    if (scatter)
      DTC_CUDA_RETURN_IF_ERROR(where,
                               cudaMemcpy2DAsync(dst + c.offset, c.pitch, src, c.width, c.width,
                                                 c.height, cudaMemcpyDeviceToDevice, stream));
    else
      DTC_CUDA_RETURN_IF_ERROR(where,
                               cudaMemcpy2DAsync(dst, c.width, src + c.offset, c.pitch, c.width,
                                                 c.height, cudaMemcpyDeviceToDevice, stream));
    return Status::ok();
  }
  return withElementSize(elem, [&](auto tag) {
    using T = decltype(tag);
    if (scatter)
      stridedCopyKernel<T, true><<<dataGrid(n), kDataBlock, 0, stream>>>(
          static_cast<const T *>(in), static_cast<T *>(out), n, map);
    else
      stridedCopyKernel<T, false><<<dataGrid(n), kDataBlock, 0, stream>>>(
          static_cast<const T *>(in), static_cast<T *>(out), n, map);
    return lastLaunchError(where);
  });
}

/// One strided gather (or scatter) from input `in` to output `out` per run, with a map fixed at
/// creation. `zeroOutput` clears the output first (SliceGrad's scatter).
class StridedKernel : public Kernel {
public:
  StridedKernel(const KernelSpec &spec, CudaContext &ctx, StridedMap map, bool scatter,
                bool zeroOutput = false)
      : where_(spec.where()), ctx_(ctx), map_(map), scatter_(scatter), zero_(zeroOutput),
        elem_(ir::dtypeSize(spec.outputs[0].dtype)),
        n_(scatter ? spec.inputs[0].numElements() : spec.outputs[0].numElements()),
        outBytes_(static_cast<size_t>(spec.outputs[0].byteSize())) {}
  Status run(const KernelArgs &args) override {
    if (zero_)
      DTC_CUDA_RETURN_IF_ERROR(where_,
                               cudaMemsetAsync(args.outputs[0], 0, outBytes_, ctx_.stream()));
    return launchStrided(scatter_, elem_, args.inputs[0], args.outputs[0], n_, map_, ctx_.stream(),
                         where_);
  }

private:
  std::string where_;
  CudaContext &ctx_;
  StridedMap map_;
  bool scatter_, zero_;
  int64_t elem_, n_;
  size_t outBytes_;
};

/// Transpose: the tiled kernel when the (coalesced) permutation swaps the two inner axes of a
/// [batch, rows, cols] view, the strided gather otherwise.
class TransposeKernel : public Kernel {
public:
  TransposeKernel(const KernelSpec &spec, CudaContext &ctx, StridedMap map)
      : where_(spec.where()), ctx_(ctx), map_(map), elem_(ir::dtypeSize(spec.inputs[0].dtype)),
        n_(spec.outputs[0].numElements()) {
    tiled_ = batchedTranspose(map_, batch_, rows_, cols_);
  }
  Status run(const KernelArgs &args) override {
    if (!tiled_)
      return launchStrided(false, elem_, args.inputs[0], args.outputs[0], n_, map_, ctx_.stream(),
                           where_);
    const int64_t tiles = batch_ * ((rows_ + kTile - 1) / kTile) * ((cols_ + kTile - 1) / kTile);
    const unsigned grid = static_cast<unsigned>(std::min<int64_t>(tiles, int64_t{1} << 20));
    const dim3 block(kTile, kTileRows);
    return withElementSize(elem_, [&](auto tag) {
      using T = decltype(tag);
      transpose2dKernel<T><<<grid, block, 0, ctx_.stream()>>>(
          static_cast<const T *>(args.inputs[0]), static_cast<T *>(args.outputs[0]), batch_, rows_,
          cols_);
      return lastLaunchError(where_);
    });
  }

private:
  std::string where_;
  CudaContext &ctx_;
  StridedMap map_;
  int64_t elem_, n_;
  bool tiled_ = false;
  int64_t batch_ = 1, rows_ = 0, cols_ = 0;
};

/// Concat (scatter of each input into its slab of the output) or Split (gather of each output
/// from its slab of the input).
class ConcatSplitKernel : public Kernel {
public:
  ConcatSplitKernel(const KernelSpec &spec, CudaContext &ctx, bool concat)
      : where_(spec.where()), ctx_(ctx), concat_(concat),
        elem_(ir::dtypeSize(spec.inputs[0].dtype)) {
    const TensorDesc &whole = concat ? spec.outputs[0] : spec.inputs[0];
    const std::vector<TensorDesc> &parts = concat ? spec.inputs : spec.outputs;
    int64_t axis = spec.attrInt("axis", 0);
    if (axis < 0)
      axis += static_cast<int64_t>(whole.shape.size());
    std::vector<std::vector<int64_t>> shapes;
    for (const TensorDesc &t : parts) {
      shapes.push_back(t.shape);
      counts_.push_back(t.numElements());
    }
    maps_ = concatMaps(shapes, whole.shape, axis);
  }
  Status run(const KernelArgs &args) override {
    for (size_t i = 0; i < maps_.size(); ++i) {
      const void *in = concat_ ? args.inputs[i] : args.inputs[0];
      void *out = concat_ ? args.outputs[0] : args.outputs[i];
      DTC_RETURN_IF_ERROR(
          launchStrided(concat_, elem_, in, out, counts_[i], maps_[i], ctx_.stream(), where_));
    }
    return Status::ok();
  }

private:
  std::string where_;
  CudaContext &ctx_;
  bool concat_;
  int64_t elem_;
  std::vector<StridedMap> maps_;
  std::vector<int64_t> counts_;
};

class SliceKernel : public Kernel {
public:
  SliceKernel(const KernelSpec &spec, CudaContext &ctx)
      : where_(spec.where()), ctx_(ctx), elem_(ir::dtypeSize(spec.inputs[0].dtype)),
        n_(spec.outputs[0].numElements()) {
    p_.rank = static_cast<int>(spec.inputs[0].shape.size());
    for (int a = 0; a < p_.rank; ++a) {
      p_.in[a] = spec.inputs[0].shape[static_cast<size_t>(a)];
      p_.out[a] = spec.outputs[0].shape[static_cast<size_t>(a)];
    }
    p_.n = spec.inputs[1].numElements();
    for (size_t i = 1; i < 5; ++i) {
      const bool given = i < spec.inputs.size() && spec.inputs[i].present();
      p_.is64[i - 1] = given && spec.inputs[i].dtype == ir::DType::kInt64;
      given_[i - 1] = given;
    }
    p_.site = ctx.addErrorSite(spec.where() +
                               ": starts, ends, axes and steps do not give the "
                               "output shape " +
                               spec.outputs[0].str() +
                               " the kernel was made for (or name an "
                               "axis out of range or twice, or a step 0)");
    p_.slot = ctx.errorSlot();
  }
  Status run(const KernelArgs &args) override {
    SliceInputs v{args.inputs[1], args.inputs[2], given_[2] ? args.inputs[3] : nullptr,
                  given_[3] ? args.inputs[4] : nullptr};
    return withElementSize(elem_, [&](auto tag) {
      using T = decltype(tag);
      sliceKernel<T><<<dataGrid(n_), kDataBlock, 0, ctx_.stream()>>>(
          static_cast<const T *>(args.inputs[0]), static_cast<T *>(args.outputs[0]), n_, p_, v);
      return lastLaunchError(where_);
    });
  }

private:
  std::string where_;
  CudaContext &ctx_;
  int64_t elem_, n_;
  SliceStatic p_;
  bool given_[4] = {};
};

class PadKernel : public Kernel {
public:
  PadKernel(const KernelSpec &spec, CudaContext &ctx)
      : where_(spec.where()), ctx_(ctx), elem_(ir::dtypeSize(spec.inputs[0].dtype)),
        n_(spec.outputs[0].numElements()),
        hasValue_(spec.inputs.size() > 2 && spec.inputs[2].present()) {
    p_.rank = static_cast<int>(spec.inputs[0].shape.size());
    for (int a = 0; a < p_.rank; ++a) {
      p_.in[a] = spec.inputs[0].shape[static_cast<size_t>(a)];
      p_.out[a] = spec.outputs[0].shape[static_cast<size_t>(a)];
    }
    p_.numPads = spec.inputs[1].numElements();
    p_.hasAxes = spec.inputs.size() > 3 && spec.inputs[3].present();
    p_.axesIs64 = p_.hasAxes && spec.inputs[3].dtype == ir::DType::kInt64;
    const std::string mode = spec.attrString("mode", "constant");
    p_.mode = mode == "edge"      ? PadMode::kEdge
              : mode == "reflect" ? PadMode::kReflect
              : mode == "wrap"    ? PadMode::kWrap
                                  : PadMode::kConstant;
    p_.site = ctx.addErrorSite(spec.where() + ": pads (and axes) do not give the output shape " +
                               spec.outputs[0].str() +
                               " the kernel was made for, or are invalid "
                               "for mode " +
                               mode);
    p_.slot = ctx.errorSlot();
  }
  Status run(const KernelArgs &args) override {
    const void *axes = p_.hasAxes ? args.inputs[3] : nullptr;
    const void *value = hasValue_ && p_.mode == PadMode::kConstant ? args.inputs[2] : nullptr;
    const int64_t *pads = static_cast<const int64_t *>(args.inputs[1]);
    return withElementSize(elem_, [&](auto tag) {
      using T = decltype(tag);
      padKernel<T><<<dataGrid(n_), kDataBlock, 0, ctx_.stream()>>>(
          static_cast<const T *>(args.inputs[0]), static_cast<T *>(args.outputs[0]), n_, p_, pads,
          axes, static_cast<const T *>(value));
      return lastLaunchError(where_);
    });
  }

private:
  std::string where_;
  CudaContext &ctx_;
  int64_t elem_, n_;
  bool hasValue_;
  PadStatic p_;
};

class WhereKernel : public Kernel {
public:
  WhereKernel(const KernelSpec &spec, CudaContext &ctx)
      : where_(spec.where()), ctx_(ctx), elem_(ir::dtypeSize(spec.outputs[0].dtype)),
        n_(spec.outputs[0].numElements()) {
    const std::vector<int64_t> shapes[3] = {spec.inputs[0].shape, spec.inputs[1].shape,
                                            spec.inputs[2].shape};
    m_ = broadcast3Map(shapes, spec.outputs[0].shape);
  }
  Status run(const KernelArgs &args) override {
    const uint8_t *cond = static_cast<const uint8_t *>(args.inputs[0]);
    return withElementSize(elem_, [&](auto tag) {
      using T = decltype(tag);
      whereKernel<T><<<dataGrid(n_), kDataBlock, 0, ctx_.stream()>>>(
          cond, static_cast<const T *>(args.inputs[1]), static_cast<const T *>(args.inputs[2]),
          static_cast<T *>(args.outputs[0]), n_, m_);
      return lastLaunchError(where_);
    });
  }

private:
  std::string where_;
  CudaContext &ctx_;
  int64_t elem_, n_;
  Broadcast3 m_;
};

/// Calls fn(T{}) for the storage type of a Cast dtype (the CPU's: f32, f64, bf16, f16, i32, i64,
/// i8, u8, bool).
template <typename Fn> Status withCastType(ir::DType t, Fn &&fn) {
  switch (t) {
  case ir::DType::kBFloat16:
    return fn(BF16Bits{});
  case ir::DType::kFloat16:
    return fn(F16Bits{});
  case ir::DType::kFloat32:
    return fn(float{});
  case ir::DType::kFloat64:
    return fn(double{});
  case ir::DType::kInt32:
    return fn(int32_t{});
  case ir::DType::kInt64:
    return fn(int64_t{});
  case ir::DType::kInt8:
    return fn(int8_t{});
  case ir::DType::kUInt8:
    return fn(uint8_t{});
  default:
    return fn(BoolByte{});
  }
}

class CastKernel : public Kernel {
public:
  CastKernel(const KernelSpec &spec, CudaContext &ctx)
      : where_(spec.where()), ctx_(ctx), from_(spec.inputs[0].dtype), to_(spec.outputs[0].dtype),
        n_(spec.inputs[0].numElements()) {}
  Status run(const KernelArgs &args) override {
    if (n_ == 0)
      return Status::ok();
    return withCastType(from_, [&](auto f) {
      return withCastType(to_, [&](auto t) {
        using From = decltype(f);
        using To = decltype(t);
        castKernel<From, To><<<dataGrid(n_), kDataBlock, 0, ctx_.stream()>>>(
            static_cast<const From *>(args.inputs[0]), static_cast<To *>(args.outputs[0]), n_);
        return lastLaunchError(where_);
      });
    });
  }

private:
  std::string where_;
  CudaContext &ctx_;
  ir::DType from_, to_;
  int64_t n_;
};

} // namespace

Expected<KernelPtr> createTranspose(const KernelSpec &spec, CudaContext &ctx) {
  const std::vector<int64_t> &in = spec.inputs[0].shape;
  std::vector<int64_t> perm(in.size());
  for (size_t i = 0; i < perm.size(); ++i)
    perm[i] = static_cast<int64_t>(perm.size() - 1 - i);
  perm = spec.attrInts("perm", perm);
  return KernelPtr(std::make_unique<TransposeKernel>(spec, ctx, transposeMap(in, perm)));
}

Expected<KernelPtr> createSpaceDepth(const KernelSpec &spec, CudaContext &ctx) {
  // One permutation of a 6-D view of the input (ops/tensor/SpaceDepthView.h, the CPU's view).
  const std::vector<int64_t> &x = spec.inputs[0].shape;
  const int64_t b = spec.attrInt("blocksize", 1);
  const SpaceDepthView v =
      spec.op == "DepthToSpace"
          ? depthToSpaceView(x[0], x[1], x[2], x[3], b, spec.attrString("mode", "DCR") == "CRD")
          : spaceToDepthView(x[0], x[1], x[2], x[3], b);
  return KernelPtr(std::make_unique<TransposeKernel>(spec, ctx, transposeMap(v.dims, v.perm)));
}

Expected<KernelPtr> createSlice(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<SliceKernel>(spec, ctx));
}

Expected<KernelPtr> createSliceGrad(const KernelSpec &spec, CudaContext &ctx) {
  // dx = 0; dx[starts + k * steps] = dy[k]: a scatter of the dense dy.
  return KernelPtr(
      std::make_unique<StridedKernel>(spec, ctx,
                                      sliceGradMap(spec.inputs[0].shape, spec.outputs[0].shape,
                                                   spec.attrInts("starts"), spec.attrInts("steps")),
                                      /*scatter=*/true, /*zeroOutput=*/true));
}

Expected<KernelPtr> createConcat(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<ConcatSplitKernel>(spec, ctx, /*concat=*/true));
}

Expected<KernelPtr> createSplit(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<ConcatSplitKernel>(spec, ctx, /*concat=*/false));
}

Expected<KernelPtr> createExpand(const KernelSpec &spec, CudaContext &ctx) {
  // The output shape (checked against the shape input by the CPU check's rules) decides
  // everything: input axes of size 1 broadcast with stride 0.
  return KernelPtr(std::make_unique<StridedKernel>(
      spec, ctx, expandMap(spec.inputs[0].shape, spec.outputs[0].shape), /*scatter=*/false));
}

Expected<KernelPtr> createTile(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<StridedKernel>(
      spec, ctx, tileMap(spec.inputs[0].shape, spec.outputs[0].shape), /*scatter=*/false));
}

Expected<KernelPtr> createPad(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<PadKernel>(spec, ctx));
}

Expected<KernelPtr> createWhere(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<WhereKernel>(spec, ctx));
}

Expected<KernelPtr> createCast(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<CastKernel>(spec, ctx));
}

} // namespace dtc::ops::cuda
