// The index math of the CUDA data-movement kernels (ops/cuda/DataUtil.cuh) on the host, against
// the CPU kernels and the shared rules they use (ops/ShapeHelpers.h, ops/cpu/ResizeCoords.h).
// These tests need no GPU: every map is applied on the host exactly as the device kernels apply
// it (out[e] = in[stridedOffset(map, e)], scatters, Resize's corners), and the result must equal
// the CPU kernel's output for the same spec and inputs.
#include "tests/gpu/GpuTestUtil.h"

#include "ops/ShapeHelpers.h"
#include "ops/cpu/IndexUtil.h"
#include "ops/cpu/ResizeCoords.h"
#include "ops/cuda/DataUtil.cuh"
#include "ops/kernel/Target.h"
#include "ops/tensor/SpaceDepthView.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace dtc::gputest {
namespace {

using ops::shapeStr;
using ops::cuda::Broadcast3;
using ops::cuda::StridedMap;

std::string bytesOf(const std::vector<int64_t> &v) {
  return std::string(reinterpret_cast<const char *>(v.data()), v.size() * sizeof(int64_t));
}

template <typename T> std::string bytesOfT(const std::vector<T> &v) {
  return std::string(reinterpret_cast<const char *>(v.data()), v.size() * sizeof(T));
}

/// out[e] = in[offset(e)] for n elements of `elem` bytes (the device's strided gather).
std::string applyGather(const StridedMap &m, const std::string &in, size_t elem, int64_t n) {
  std::string out(static_cast<size_t>(n) * elem, '\0');
  for (int64_t e = 0; e < n; ++e) {
    const int64_t off = ops::cuda::stridedOffset(m, e);
    EXPECT_TRUE(off >= 0 && static_cast<size_t>(off + 1) * elem <= in.size()) << "offset " << off;
    if (off < 0 || static_cast<size_t>(off + 1) * elem > in.size())
      return out;
    std::memcpy(out.data() + static_cast<size_t>(e) * elem,
                in.data() + static_cast<size_t>(off) * elem, elem);
  }
  return out;
}

/// out[offset(e)] = in[e] into `out` (the device's strided scatter).
void applyScatter(const StridedMap &m, const std::string &in, size_t elem, std::string &out) {
  const int64_t n = static_cast<int64_t>(in.size() / elem);
  for (int64_t e = 0; e < n; ++e) {
    const int64_t off = ops::cuda::stridedOffset(m, e);
    ASSERT_TRUE(off >= 0 && static_cast<size_t>(off + 1) * elem <= out.size()) << off;
    std::memcpy(out.data() + static_cast<size_t>(off) * elem,
                in.data() + static_cast<size_t>(e) * elem, elem);
  }
}

/// cudaMemcpy2D on the host: `height` rows of `width` bytes.
void copy2d(char *dst, size_t dpitch, const char *src, size_t spitch, size_t width, size_t height) {
  for (size_t r = 0; r < height; ++r)
    std::memcpy(dst + r * dpitch, src + r * spitch, width);
}

TEST(CudaDataMath, PitchedCopiesEqualTheirMaps) {
  // Concat/Split slabs, a row slice, a plain copy; and maps that must not take the 2-D path.
  const auto concat = ops::cuda::concatMaps({{8, 32, 4, 4}, {8, 16, 4, 4}}, {8, 48, 4, 4}, 1);
  StridedMap rows;
  const std::vector<int64_t> in = {6, 10}, out = {3, 10};
  const std::vector<int64_t> starts = {2}, ends = {5};
  ASSERT_EQ(ops::cuda::sliceMap(in.data(), out.data(), 2,
                                {starts.data(), ends.data(), nullptr, nullptr, 1}, rows),
            0);
  ops::cuda::coalesce(rows);
  const StridedMap plain = ops::cuda::transposeMap({3, 4, 5}, {0, 1, 2});
  for (const StridedMap &m : {concat[0], concat[1], rows, plain}) {
    ops::cuda::PitchedCopy c;
    ASSERT_TRUE(ops::cuda::asPitchedCopy(m, 4, c));
    int64_t n = 1, span = m.base + 1;
    for (int a = 0; a < m.rank; ++a) {
      n *= m.dims[a];
      span += (m.dims[a] - 1) * m.strides[a];
    }
    std::string dense(static_cast<size_t>(n) * 4, '\0'),
        strided(static_cast<size_t>(span) * 4, '\0');
    for (size_t i = 0; i < dense.size(); ++i)
      dense[i] = static_cast<char>(i * 7 + 3);
    for (size_t i = 0; i < strided.size(); ++i)
      strided[i] = static_cast<char>(i * 5 + 1);
    // Gather: dense out from the strided side.
    std::string viaCopy(dense.size(), '\0');
    copy2d(viaCopy.data(), c.width, strided.data() + c.offset, c.pitch, c.width, c.height);
    EXPECT_EQ(viaCopy, applyGather(m, strided, 4, n));
    // Scatter: dense in to the strided side.
    std::string a = strided, b = strided;
    copy2d(a.data() + c.offset, c.pitch, dense.data(), c.width, c.width, c.height);
    applyScatter(m, dense, 4, b);
    EXPECT_EQ(a, b);
  }
  ops::cuda::PitchedCopy c;
  EXPECT_FALSE(ops::cuda::asPitchedCopy(ops::cuda::expandMap({1, 16}, {8, 16}), 4, c));
  EXPECT_FALSE(ops::cuda::asPitchedCopy(ops::cuda::transposeMap({96, 32}, {1, 0}), 4, c));
  EXPECT_FALSE(ops::cuda::asPitchedCopy(ops::cuda::tileMap({2, 3}, {2, 9}), 4, c));
  EXPECT_FALSE(ops::cuda::asPitchedCopy(ops::cuda::sliceGradMap({3}, {7}, {6}, {-2}), 4, c));
}

TEST(CudaDataMath, SliceClampMatchesTheSharedRule) {
  const int64_t big = std::numeric_limits<int64_t>::max(),
                small = std::numeric_limits<int64_t>::min();
  const std::vector<int64_t> values = {small, -100, -7, -5, -1, 0, 1, 2, 4, 5, 6, 100, big};
  const std::vector<int64_t> steps = {small, -3, -2, -1, 1, 2, 3, big};
  for (int64_t dim : {0, 1, 5, 6})
    for (int64_t s : values)
      for (int64_t e : values)
        for (int64_t st : steps) {
          const ops::SliceRange r = ops::clampSlice(dim, s, e, st);
          int64_t first = -1, count = -1;
          ops::cuda::sliceClamp(dim, s, e, st, first, count);
          ASSERT_EQ(count, r.count) << dim << " " << s << " " << e << " " << st;
          if (count > 0) {
            ASSERT_EQ(first, r.start) << dim << " " << s << " " << e << " " << st;
          }
        }
}

TEST(CudaDataMath, PadSourceMatchesTheSharedRule) {
  const std::pair<const char *, ops::cuda::PadMode> modes[] = {
      {"constant", ops::cuda::PadMode::kConstant},
      {"edge", ops::cuda::PadMode::kEdge},
      {"reflect", ops::cuda::PadMode::kReflect},
      {"wrap", ops::cuda::PadMode::kWrap}};
  for (const auto &[name, mode] : modes)
    for (int64_t dim : {0, 1, 2, 3, 7})
      for (int64_t x = -20; x < 20; ++x)
        ASSERT_EQ(ops::cuda::padSource(x, dim, mode), ops::padSourceIndex(x, dim, name))
            << name << " dim " << dim << " x " << x;
}

TEST(CudaDataMath, CoalescingKeepsEveryOffset) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    StridedMap m;
    m.rank = 1 + static_cast<int>(rng() % 6);
    int64_t n = 1;
    for (int a = 0; a < m.rank; ++a) {
      m.dims[a] = 1 + static_cast<int64_t>(rng() % 4);
      n *= m.dims[a];
    }
    // Dense strides of a random permutation, some axes broadcast, some wrapped.
    int64_t stride = 1;
    for (int a = m.rank - 1; a >= 0; --a) {
      const int kind = static_cast<int>(rng() % 5);
      m.strides[a] = kind == 0 ? 0 : (kind == 1 ? -stride : stride);
      m.wrap[a] = kind == 2 && m.dims[a] > 1 ? 1 + static_cast<int64_t>(rng() % m.dims[a]) : 0;
      stride *= m.dims[a];
    }
    m.base = static_cast<int64_t>(rng() % 10);
    StridedMap c = m;
    ops::cuda::coalesce(c);
    ASSERT_LE(c.rank, m.rank);
    for (int64_t e = 0; e < n; ++e)
      ASSERT_EQ(ops::cuda::stridedOffset(c, e), ops::cuda::stridedOffset(m, e)) << trial;
  }
}

TEST(CudaDataMath, TransposeMapsMatchTheCpuKernel) {
  struct Case {
    std::vector<int64_t> in, perm;
    bool tiled;
  };
  const Case cases[] = {{{96, 32}, {1, 0}, true},              // gpt: a weight transpose
                        {{8, 16, 2, 16}, {0, 2, 1, 3}, false}, // gpt: heads
                        {{8, 2, 16, 16}, {0, 1, 3, 2}, true},  // gpt: K^T (batched 2-D)
                        {{33, 17}, {1, 0}, true},              // odd sizes, partial tiles
                        {{2, 3, 4, 5}, {3, 1, 0, 2}, false},   // general
                        {{4, 1, 5}, {2, 1, 0}, true},          // a size-1 axis
                        {{3, 4, 5}, {0, 1, 2}, false}};        // identity
  for (const Case &c : cases) {
    std::vector<int64_t> out;
    for (int64_t p : c.perm)
      out.push_back(c.in[static_cast<size_t>(p)]);
    ops::KernelSpec spec = makeSpec("Transpose", {c.in}, {out});
    spec.attrs["perm"] = c.perm;
    std::vector<HostTensor> in = randomInputs(spec, 3);
    std::vector<HostTensor> cpu = runCpu(spec, in);
    ASSERT_EQ(cpu.size(), 1u);
    const StridedMap m = ops::cuda::transposeMap(c.in, c.perm);
    EXPECT_EQ(applyGather(m, in[0].bytes, 4, spec.outputs[0].numElements()), cpu[0].bytes)
        << shapeStr(c.in);
    int64_t batch = 0, rows = 0, cols = 0;
    EXPECT_EQ(ops::cuda::batchedTranspose(m, batch, rows, cols), c.tiled) << shapeStr(c.in);
    if (c.tiled) { // the tile kernel's formula: out[b][c][r] = in[b][r][c]
      std::vector<float> x(in[0].bytes.size() / 4), y(x.size());
      std::memcpy(x.data(), in[0].bytes.data(), in[0].bytes.size());
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t k = 0; k < cols; ++k)
            y[static_cast<size_t>(b * rows * cols + k * rows + r)] =
                x[static_cast<size_t>(b * rows * cols + r * cols + k)];
      EXPECT_EQ(bytesOfT(y), cpu[0].bytes) << shapeStr(c.in);
    }
  }
}

TEST(CudaDataMath, SpaceDepthMapsMatchTheCpuKernels) {
  for (const char *mode : {"DCR", "CRD"}) {
    ops::KernelSpec spec = makeSpec("DepthToSpace", {{2, 12, 3, 5}}, {{2, 3, 6, 10}});
    spec.attrs["blocksize"] = int64_t{2};
    spec.attrs["mode"] = std::string(mode);
    std::vector<HostTensor> in = randomInputs(spec, 43);
    std::vector<HostTensor> cpu = runCpu(spec, in);
    ASSERT_EQ(cpu.size(), 1u);
    const ops::SpaceDepthView v = ops::depthToSpaceView(2, 12, 3, 5, 2, std::string(mode) == "CRD");
    EXPECT_EQ(applyGather(ops::cuda::transposeMap(v.dims, v.perm), in[0].bytes, 4,
                          spec.outputs[0].numElements()),
              cpu[0].bytes)
        << mode;
  }
  ops::KernelSpec spec = makeSpec("SpaceToDepth", {{2, 3, 6, 10}}, {{2, 12, 3, 5}});
  spec.attrs["blocksize"] = int64_t{2};
  std::vector<HostTensor> in = randomInputs(spec, 47);
  std::vector<HostTensor> cpu = runCpu(spec, in);
  ASSERT_EQ(cpu.size(), 1u);
  const ops::SpaceDepthView v = ops::spaceToDepthView(2, 3, 6, 10, 2);
  EXPECT_EQ(applyGather(ops::cuda::transposeMap(v.dims, v.perm), in[0].bytes, 4,
                        spec.outputs[0].numElements()),
            cpu[0].bytes);
}

/// A Slice spec with i64 starts/ends/axes/steps (axes and steps may be empty: omitted).
ops::KernelSpec sliceSpec(const std::vector<int64_t> &in, const std::vector<int64_t> &out, size_t n,
                          bool axes, bool steps) {
  std::vector<std::vector<int64_t>> shapes = {
      in, {static_cast<int64_t>(n)}, {static_cast<int64_t>(n)}};
  if (axes || steps)
    shapes.push_back({static_cast<int64_t>(n)});
  if (steps)
    shapes.push_back({static_cast<int64_t>(n)});
  ops::KernelSpec spec = makeSpec("Slice", shapes, {out});
  for (size_t i = 1; i < spec.inputs.size(); ++i)
    spec.inputs[i].dtype = ir::DType::kInt64;
  if (!axes && steps)
    spec.inputs[3].dtype = ir::DType::kUndefined;
  return spec;
}

TEST(CudaDataMath, SliceMapsMatchTheCpuKernel) {
  struct Case {
    std::vector<int64_t> in, out, starts, ends, axes, steps;
  };
  const int64_t big = std::numeric_limits<int64_t>::max();
  const Case cases[] = {
      {{1, 1, 32, 32}, {1, 1, 16, 32}, {0}, {16}, {2}, {}}, // gpt: the causal mask
      {{1, 1, 32, 32}, {1, 1, 16, 16}, {0, 0}, {16, 16}, {2, 3}, {}},
      {{5, 7}, {3, 2}, {-1, 1}, {-big, 5}, {0, 1}, {-2, 3}},     // negative step, clamping
      {{6}, {6}, {big}, {-big}, {}, {-1}},                       // reverse
      {{4, 5, 6}, {2, 5, 2}, {1, 1}, {3, 100}, {0, -1}, {1, 3}}, // negative axis
      {{3, 4}, {3, 4}, {0}, {big}, {}, {}}};
  for (const Case &c : cases) {
    const size_t n = c.starts.size();
    const bool steps = !c.steps.empty(), axes = !c.axes.empty();
    ops::KernelSpec spec = sliceSpec(c.in, c.out, n, axes, steps);
    std::vector<Fill> fills = {Fill{}, Fill{0, 0, bytesOf(c.starts)}, Fill{0, 0, bytesOf(c.ends)}};
    if (axes || steps)
      fills.push_back(Fill{0, 0, axes ? bytesOf(c.axes) : std::string()});
    if (steps)
      fills.push_back(Fill{0, 0, bytesOf(c.steps)});
    std::vector<HostTensor> in = randomInputs(spec, 5, fills);
    std::vector<HostTensor> cpu = runCpu(spec, in);
    ASSERT_EQ(cpu.size(), 1u);
    StridedMap m;
    const ops::cuda::SliceArgs args{c.starts.data(), c.ends.data(), axes ? c.axes.data() : nullptr,
                                    steps ? c.steps.data() : nullptr, static_cast<int64_t>(n)};
    ASSERT_EQ(
        ops::cuda::sliceMap(c.in.data(), c.out.data(), static_cast<int>(c.in.size()), args, m), 0)
        << shapeStr(c.in);
    ops::cuda::coalesce(m);
    EXPECT_EQ(applyGather(m, in[0].bytes, 4, spec.outputs[0].numElements()), cpu[0].bytes)
        << shapeStr(c.in) << " starts " << shapeStr(c.starts);
  }
}

TEST(CudaDataMath, SliceMapRejectsWhatTheCpuRejects) {
  const std::vector<int64_t> in = {4, 6}, out = {2, 6};
  const std::vector<int64_t> starts = {0}, ends = {2}, ends3 = {3}, axes0 = {0}, axes2 = {2},
                             zero = {0};
  StridedMap m;
  auto run = [&](const std::vector<int64_t> &e, const std::vector<int64_t> *ax,
                 const std::vector<int64_t> *st) {
    return ops::cuda::sliceMap(
        in.data(), out.data(), 2,
        {starts.data(), e.data(), ax ? ax->data() : nullptr, st ? st->data() : nullptr, 1}, m);
  };
  EXPECT_EQ(run(ends, &axes0, nullptr), 0);
  EXPECT_EQ(run(ends3, &axes0, nullptr), 1); // another output shape
  EXPECT_EQ(run(ends, &axes2, nullptr), 1);  // axis out of range
  EXPECT_EQ(run(ends, &axes0, &zero), 1);    // step 0
  // The fallback map stays inside the input: the first rows, step 1.
  EXPECT_EQ(m.base, 0);
  EXPECT_EQ(ops::cuda::stridedOffset(m, 2 * 6 - 1), 11);
}

TEST(CudaDataMath, SliceGradConcatSplitExpandTileMatchTheCpuKernels) {
  { // SliceGrad: dy [2,3] into dx [5,7] from (1, 6) by steps (2, -2).
    ops::KernelSpec spec = makeSpec("SliceGrad", {{2, 3}}, {{5, 7}}, ir::DType::kFloat32, "ai.dtc");
    spec.attrs["starts"] = std::vector<int64_t>{1, 6};
    spec.attrs["steps"] = std::vector<int64_t>{2, -2};
    std::vector<HostTensor> in = randomInputs(spec, 9);
    std::vector<HostTensor> cpu = runCpu(spec, in);
    ASSERT_EQ(cpu.size(), 1u);
    std::string dx(cpu[0].bytes.size(), '\0');
    applyScatter(ops::cuda::sliceGradMap({2, 3}, {5, 7}, {1, 6}, {2, -2}), in[0].bytes, 4, dx);
    EXPECT_EQ(dx, cpu[0].bytes);
  }
  { // Concat: unet's skip connection, axis 1.
    ops::KernelSpec spec = makeSpec("Concat", {{2, 32, 4, 4}, {2, 16, 4, 4}}, {{2, 48, 4, 4}});
    spec.attrs["axis"] = int64_t{1};
    std::vector<HostTensor> in = randomInputs(spec, 11);
    std::vector<HostTensor> cpu = runCpu(spec, in);
    ASSERT_EQ(cpu.size(), 1u);
    std::string out(cpu[0].bytes.size(), '\0');
    const auto maps = ops::cuda::concatMaps({{2, 32, 4, 4}, {2, 16, 4, 4}}, {2, 48, 4, 4}, 1);
    for (size_t i = 0; i < maps.size(); ++i)
      applyScatter(maps[i], in[i].bytes, 4, out);
    EXPECT_EQ(out, cpu[0].bytes);
  }
  { // Split: gpt's qkv, three parts along the last axis (and uneven parts).
    for (const std::vector<int64_t> &sizes :
         {std::vector<int64_t>{32, 32, 32}, std::vector<int64_t>{5, 90, 1}}) {
      std::vector<std::vector<int64_t>> outs;
      for (int64_t s : sizes)
        outs.push_back({2, 16, s});
      ops::KernelSpec spec = makeSpec("Split", {{2, 16, 96}, {3}}, outs);
      spec.inputs[1].dtype = ir::DType::kInt64;
      spec.attrs["axis"] = int64_t{-1};
      std::vector<HostTensor> in = randomInputs(spec, 13, {Fill{}, Fill{0, 0, bytesOf(sizes)}});
      std::vector<HostTensor> cpu = runCpu(spec, in);
      ASSERT_EQ(cpu.size(), 3u);
      const auto maps = ops::cuda::concatMaps(outs, {2, 16, 96}, 2);
      for (size_t i = 0; i < maps.size(); ++i)
        EXPECT_EQ(applyGather(maps[i], in[0].bytes, 4, spec.outputs[i].numElements()), cpu[i].bytes)
            << i;
    }
  }
  { // Expand: the causal mask to the scores' shape, and a rank-raising broadcast.
    const std::pair<std::vector<int64_t>, std::vector<int64_t>> cases[] = {
        {{1, 1, 16, 16}, {8, 2, 16, 16}}, {{3, 1}, {2, 3, 4}}, {{}, {2, 2}}};
    for (const auto &[from, to] : cases) {
      ops::KernelSpec spec = makeSpec("Expand", {from, {static_cast<int64_t>(to.size())}}, {to});
      spec.inputs[1].dtype = ir::DType::kInt64;
      std::vector<HostTensor> in = randomInputs(spec, 17, {Fill{}, Fill{0, 0, bytesOf(to)}});
      std::vector<HostTensor> cpu = runCpu(spec, in);
      ASSERT_EQ(cpu.size(), 1u);
      EXPECT_EQ(applyGather(ops::cuda::expandMap(from, to), in[0].bytes, 4,
                            spec.outputs[0].numElements()),
                cpu[0].bytes)
          << shapeStr(from);
    }
  }
  { // Tile.
    ops::KernelSpec spec = makeSpec("Tile", {{2, 3, 1}, {3}}, {{4, 9, 2}});
    spec.inputs[1].dtype = ir::DType::kInt64;
    std::vector<HostTensor> in = randomInputs(spec, 19, {Fill{}, Fill{0, 0, bytesOf({2, 3, 2})}});
    std::vector<HostTensor> cpu = runCpu(spec, in);
    ASSERT_EQ(cpu.size(), 1u);
    EXPECT_EQ(applyGather(ops::cuda::tileMap({2, 3, 1}, {4, 9, 2}), in[0].bytes, 4,
                          spec.outputs[0].numElements()),
              cpu[0].bytes);
  }
}

TEST(CudaDataMath, WhereBroadcastMatchesTheCpuKernel) {
  // gpt's masked scores: a [1,1,T,T] condition, [N,H,T,T] scores, a scalar fill.
  const std::vector<int64_t> shapes[3] = {{1, 1, 4, 4}, {3, 2, 4, 4}, {}};
  const std::vector<int64_t> out = {3, 2, 4, 4};
  ops::KernelSpec spec = makeSpec("Where", {shapes[0], shapes[1], shapes[2]}, {out});
  spec.inputs[0].dtype = ir::DType::kBool;
  std::vector<HostTensor> in = randomInputs(spec, 23);
  std::vector<HostTensor> cpu = runCpu(spec, in);
  ASSERT_EQ(cpu.size(), 1u);
  const Broadcast3 m = ops::cuda::broadcast3Map(shapes, out);
  std::vector<float> y(static_cast<size_t>(spec.outputs[0].numElements()));
  for (int64_t e = 0; e < static_cast<int64_t>(y.size()); ++e) {
    int64_t off[3];
    ops::cuda::broadcastOffsets(m, e, off);
    float x, z;
    std::memcpy(&x, in[1].bytes.data() + 4 * off[1], 4);
    std::memcpy(&z, in[2].bytes.data() + 4 * off[2], 4);
    y[static_cast<size_t>(e)] = in[0].bytes[static_cast<size_t>(off[0])] ? x : z;
  }
  EXPECT_EQ(bytesOfT(y), cpu[0].bytes);
}

/// Every Cast pair of the CPU's dtypes on special values: castValue equals the CPU kernel.
template <typename From> void expectCastsFrom(ir::DType from, const std::vector<From> &values) {
  const std::pair<ir::DType, size_t> targets[] = {
      {ir::DType::kFloat32, 4}, {ir::DType::kFloat64, 8},  {ir::DType::kInt32, 4},
      {ir::DType::kInt64, 8},   {ir::DType::kInt8, 1},     {ir::DType::kUInt8, 1},
      {ir::DType::kBool, 1},    {ir::DType::kBFloat16, 2}, {ir::DType::kFloat16, 2}};
  for (const auto &[to, size] : targets) {
    const int64_t n = static_cast<int64_t>(values.size());
    ops::KernelSpec spec = makeSpec("Cast", {{n}}, {{n}});
    spec.inputs[0].dtype = from;
    spec.outputs[0].dtype = to;
    spec.attrs["to"] = static_cast<int64_t>(to);
    std::vector<HostTensor> in = {{spec.inputs[0], bytesOfT(values)}};
    std::vector<HostTensor> cpu = runCpu(spec, in);
    ASSERT_EQ(cpu.size(), 1u);
    std::string mine(static_cast<size_t>(n) * size, '\0');
    for (size_t i = 0; i < values.size(); ++i) {
      char *p = mine.data() + i * size;
      auto put = [&](auto v) { std::memcpy(p, &v, sizeof v); };
      switch (to) {
      case ir::DType::kFloat32:
        put(ops::cuda::castValue<From, float>(values[i]));
        break;
      case ir::DType::kFloat64:
        put(ops::cuda::castValue<From, double>(values[i]));
        break;
      case ir::DType::kInt32:
        put(ops::cuda::castValue<From, int32_t>(values[i]));
        break;
      case ir::DType::kInt64:
        put(ops::cuda::castValue<From, int64_t>(values[i]));
        break;
      case ir::DType::kInt8:
        put(ops::cuda::castValue<From, int8_t>(values[i]));
        break;
      case ir::DType::kUInt8:
        put(ops::cuda::castValue<From, uint8_t>(values[i]));
        break;
      case ir::DType::kBFloat16:
        put(ops::cuda::castValue<From, ops::cuda::BF16Bits>(values[i]));
        break;
      case ir::DType::kFloat16:
        put(ops::cuda::castValue<From, ops::cuda::F16Bits>(values[i]));
        break;
      default:
        put(ops::cuda::castValue<From, ops::cuda::BoolByte>(values[i]));
        break;
      }
    }
    EXPECT_EQ(mine, cpu[0].bytes) << ir::dtypeName(from) << " -> " << ir::dtypeName(to);
  }
}

TEST(CudaDataMath, CastMatchesTheCpuKernel) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  expectCastsFrom<float>(ir::DType::kFloat32,
                         {0.0f, -0.0f, 1.5f, -1.5f, 2.7f, -2.7f, 127.9f, 128.0f, -129.0f, 255.5f,
                          300.0f, 3e9f, -3e9f, 1e19f, -1e19f, inf, -inf, nan, 1e-40f});
  expectCastsFrom<double>(ir::DType::kFloat64,
                          {0.0, -0.5, 0.5, 2147483647.5, 2147483648.0, -2147483649.0, 1e300, -1e300,
                           9.3e18, -9.3e18, 3.4e39, std::nan(""), 1e-320});
  expectCastsFrom<int32_t>(ir::DType::kInt32,
                           {0, 1, -1, 127, 128, 255, 256, -129, INT32_MAX, INT32_MIN, 16777217});
  expectCastsFrom<int64_t>(
      ir::DType::kInt64, {0, 1, -1, 300, INT64_MAX, INT64_MIN, int64_t{1} << 40, 9007199254740993});
  expectCastsFrom<int8_t>(ir::DType::kInt8, {0, 1, -1, 127, -128});
  expectCastsFrom<uint8_t>(ir::DType::kUInt8, {0, 1, 128, 255});
  // Bool bytes: any non-zero byte reads as true.
  expectCastsFrom<ops::cuda::BoolByte>(ir::DType::kBool, {{0}, {1}, {2}, {0}});
  // Mixed precision: bf16 and f16 bit patterns (1, -2.5, max, inf, NaN, subnormal, 0).
  expectCastsFrom<ops::cuda::BF16Bits>(
      ir::DType::kBFloat16,
      {{0x3f80}, {0xc020}, {0x7f7f}, {0x7f80}, {0xff80}, {0x7fc0}, {0x0001}, {0x8000}, {0x4f00}});
  expectCastsFrom<ops::cuda::F16Bits>(
      ir::DType::kFloat16,
      {{0x3c00}, {0xc100}, {0x7bff}, {0x7c00}, {0xfc00}, {0x7e00}, {0x0001}, {0x8000}, {0x5bf8}});
  // f32 -> bf16/f16 rounding: ties to even, overflow, the smallest subnormals.
  expectCastsFrom<float>(ir::DType::kFloat32, {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 65504.0f,
                                               65520.0f, 0x1p-24f, 0x1p-25f, 3.0e38f, -1e-45f});
}

TEST(CudaDataMath, ResizeTapsMatchTheCpuMaps) {
  using ops::cpu::ResizeRounding;
  using ops::cpu::ResizeTransform;
  const ResizeTransform transforms[] = {
      ResizeTransform::kHalfPixel,        ResizeTransform::kHalfPixelSymmetric,
      ResizeTransform::kPytorchHalfPixel, ResizeTransform::kAlignCorners,
      ResizeTransform::kAsymmetric,       ResizeTransform::kTfHalfPixelForNn};
  const ResizeRounding roundings[] = {ResizeRounding::kRoundPreferFloor,
                                      ResizeRounding::kRoundPreferCeil, ResizeRounding::kFloor,
                                      ResizeRounding::kCeil};
  const std::pair<int64_t, int64_t> lengths[] = {{16, 32}, {32, 16}, {5, 7}, {7, 3},
                                                 {1, 4},   {4, 1},   {3, 3}, {6, 9}};
  for (bool linear : {false, true})
    for (ResizeTransform t : transforms)
      for (ResizeRounding r : roundings)
        for (const auto &[in, out] : lengths)
          for (double s : {static_cast<double>(out) / static_cast<double>(in), 2.0, 0.5, 1.0}) {
            const ops::cpu::ResizeAxisMap m = ops::cpu::resizeAxisMap(linear, t, r, in, out, s);
            for (int64_t x = 0; x < out; ++x) {
              const ops::cuda::ResizeTap tap =
                  ops::cuda::resizeTap(linear, static_cast<ops::cuda::ResizeTransformMode>(t),
                                       static_cast<ops::cuda::ResizeNearestMode>(r), in, out, s, x);
              const size_t u = static_cast<size_t>(x);
              ASSERT_EQ(tap.i0, m.i0[u]) << linear << " " << static_cast<int>(t) << " " << in
                                         << "->" << out << " s " << s << " x " << x;
              ASSERT_EQ(tap.i1, m.i1[u]);
              ASSERT_EQ(tap.w, m.w[u]);
            }
          }
}

/// The device Resize on the host: out[e] = sum of weight * in[corner].
std::vector<float> resizeOnHost(const ops::cuda::ResizeGeometry &g, const std::vector<float> &x,
                                int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  int64_t off[1 << ops::cuda::kResizeLinearMax];
  float w[1 << ops::cuda::kResizeLinearMax];
  for (int64_t e = 0; e < n; ++e) {
    const int k = ops::cuda::resizeCorners(g, e, off, w);
    EXPECT_GT(k, 0);
    float acc = 0.0f;
    for (int c = 0; c < k; ++c)
      acc += w[c] * x[static_cast<size_t>(off[c])];
    y[static_cast<size_t>(e)] = acc;
  }
  return y;
}

ops::cuda::ResizeGeometry geometry(const std::vector<int64_t> &in, const std::vector<int64_t> &out,
                                   bool linear, ops::cuda::ResizeTransformMode t,
                                   const std::vector<double> &scales) {
  ops::cuda::ResizeGeometry g;
  g.rank = static_cast<int>(in.size());
  g.linear = linear;
  g.transform = t;
  g.rounding = ops::cuda::ResizeNearestMode::kFloor;
  for (size_t d = 0; d < in.size(); ++d) {
    g.in[d] = in[d];
    g.out[d] = out[d];
    g.scale[d] = scales[d];
  }
  return g;
}

void expectNear(const std::vector<float> &a, const std::string &cpu, const std::string &what) {
  ASSERT_EQ(a.size() * 4, cpu.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    float b;
    std::memcpy(&b, cpu.data() + 4 * i, 4);
    ASSERT_NEAR(a[i], b, 1e-5 + 1e-5 * std::fabs(b)) << what << " element " << i;
  }
}

TEST(CudaDataMath, ResizeAndResizeGradMatchTheCpuKernels) {
  struct Case {
    std::vector<int64_t> in, out;
    std::vector<float> scales;
    std::string mode, transform;
    ops::cuda::ResizeTransformMode t;
  };
  const Case cases[] = {// unet: bilinear x2 of the bottleneck (half_pixel), batch 2.
                        {{2, 4, 8, 8},
                         {2, 4, 16, 16},
                         {1, 1, 2, 2},
                         "linear",
                         "half_pixel",
                         ops::cuda::ResizeTransformMode::kHalfPixel},
                        {{1, 2, 5, 7},
                         {1, 2, 3, 11},
                         {1, 1, 0.6f, 1.6f},
                         "linear",
                         "align_corners",
                         ops::cuda::ResizeTransformMode::kAlignCorners},
                        {{2, 3, 4, 4},
                         {2, 3, 8, 12},
                         {1, 1, 2, 3},
                         "nearest",
                         "asymmetric",
                         ops::cuda::ResizeTransformMode::kAsymmetric},
                        {{1, 1, 3, 3, 3},
                         {1, 1, 6, 5, 4},
                         {1, 1, 2, 1.7f, 1.4f},
                         "linear",
                         "pytorch_half_pixel",
                         ops::cuda::ResizeTransformMode::kPytorchHalfPixel}};
  for (const Case &c : cases) {
    const int64_t k = static_cast<int64_t>(c.in.size());
    ops::KernelSpec spec = makeSpec("Resize", {c.in, {0}, {k}}, {c.out});
    spec.inputs[1].dtype = ir::DType::kUndefined;
    spec.attrs["mode"] = c.mode;
    spec.attrs["coordinate_transformation_mode"] = c.transform;
    spec.attrs["nearest_mode"] = std::string("floor");
    std::vector<HostTensor> in =
        randomInputs(spec, 29, {Fill{}, Fill{}, Fill{0, 0, bytesOfT(c.scales)}});
    std::vector<HostTensor> cpu = runCpu(spec, in);
    ASSERT_EQ(cpu.size(), 1u);
    std::vector<double> scales(c.scales.begin(), c.scales.end());
    const ops::cuda::ResizeGeometry g = geometry(c.in, c.out, c.mode == "linear", c.t, scales);
    std::vector<float> x(in[0].bytes.size() / 4);
    std::memcpy(x.data(), in[0].bytes.data(), in[0].bytes.size());
    expectNear(resizeOnHost(g, x, spec.outputs[0].numElements()), cpu[0].bytes,
               "Resize " + c.mode + " " + c.transform);

    // The gradient: dx[corner] += weight * dy[e].
    ops::KernelSpec grad = makeSpec("ResizeGrad", {c.out}, {c.in}, ir::DType::kFloat32, "ai.dtc");
    grad.attrs["mode"] = c.mode;
    grad.attrs["coordinate_transformation_mode"] = c.transform;
    grad.attrs["nearest_mode"] = std::string("floor");
    grad.attrs["input_shape"] = c.in;
    grad.attrs["scales"] = c.scales;
    std::vector<HostTensor> dyIn = randomInputs(grad, 31);
    std::vector<HostTensor> dxCpu = runCpu(grad, dyIn);
    ASSERT_EQ(dxCpu.size(), 1u);
    std::vector<float> dy(dyIn[0].bytes.size() / 4), dx(x.size(), 0.0f);
    std::memcpy(dy.data(), dyIn[0].bytes.data(), dyIn[0].bytes.size());
    int64_t off[1 << ops::cuda::kResizeLinearMax];
    float w[1 << ops::cuda::kResizeLinearMax];
    for (int64_t e = 0; e < static_cast<int64_t>(dy.size()); ++e) {
      const int n = ops::cuda::resizeCorners(g, e, off, w);
      ASSERT_GT(n, 0);
      for (int j = 0; j < n; ++j)
        dx[static_cast<size_t>(off[j])] += w[j] * dy[static_cast<size_t>(e)];
    }
    expectNear(dx, dxCpu[0].bytes, "ResizeGrad " + c.mode + " " + c.transform);
  }
}

TEST(CudaDataMath, ResizeCornersRefuseTooManyInterpolatedAxes) {
  std::vector<int64_t> in(5, 3), out(5, 5);
  const ops::cuda::ResizeGeometry g = geometry(
      in, out, true, ops::cuda::ResizeTransformMode::kHalfPixel, std::vector<double>(5, 5.0 / 3.0));
  int64_t off[1 << ops::cuda::kResizeLinearMax];
  float w[1 << ops::cuda::kResizeLinearMax];
  // Element (1,1,1,1,1): every axis has a fractional coordinate.
  const int64_t e = 1 + 5 + 25 + 125 + 625;
  EXPECT_EQ(ops::cuda::resizeCorners(g, e, off, w), -1);
}

TEST(CudaDataMath, DropoutMasksMatchTheCpuKernelBitForBit) {
  // 4099 elements: a partial last Philox block; a seed above 2^32, rank 3, step 17, stream 5.
  const int64_t n = 4099;
  ops::KernelSpec spec =
      makeSpec("DropoutTraining", {{n}, {3}}, {{n}, {n}}, ir::DType::kFloat32, "ai.dtc");
  spec.inputs[1].dtype = ir::DType::kInt64;
  spec.outputs[1].dtype = ir::DType::kBool;
  spec.attrs["ratio"] = 0.3f;
  spec.attrs["stream"] = int64_t{5};
  const std::vector<int64_t> rng = {(int64_t{7} << 32) + 12345, 17, 3};
  std::vector<HostTensor> in = randomInputs(spec, 37, {Fill{}, Fill{0, 0, bytesOf(rng)}});
  std::vector<HostTensor> cpu = runCpu(spec, in);
  ASSERT_EQ(cpu.size(), 2u);
  const double ratio = 0.3f;
  const uint64_t threshold = static_cast<uint64_t>(std::floor(ratio * 4294967296.0));
  const float scale = static_cast<float>(1.0 / (1.0 - ratio));
  std::string mask(static_cast<size_t>(n), '\0');
  std::vector<float> x(static_cast<size_t>(n)), y(x.size());
  std::memcpy(x.data(), in[0].bytes.data(), in[0].bytes.size());
  int64_t kept = 0;
  for (int64_t b = 0; b < (n + 3) / 4; ++b) {
    bool keep[4];
    ops::cuda::dropoutKeep(b, static_cast<uint64_t>(rng[0]), 17, 3, 5, threshold, keep);
    for (int64_t l = 0; l < 4 && 4 * b + l < n; ++l) {
      const size_t i = static_cast<size_t>(4 * b + l);
      mask[i] = keep[l] ? 1 : 0;
      y[i] = keep[l] ? x[i] * scale : 0.f;
      kept += keep[l] ? 1 : 0;
    }
  }
  EXPECT_EQ(mask, cpu[1].bytes);
  EXPECT_EQ(bytesOfT(y), cpu[0].bytes);
  // About 70% kept (4099 draws: 5 standard deviations is about 0.036).
  EXPECT_NEAR(static_cast<double>(kept) / static_cast<double>(n), 0.7, 0.036);
}

TEST(CudaDataMath, NDGeometryMatchesTheCpuGeometry) {
  struct Case {
    std::vector<int64_t> data, indices;
    int64_t batchDims;
  };
  const Case cases[] = {{{4, 5, 6}, {3, 2}, 0},
                        {{4, 5, 6}, {2, 3, 3}, 0},
                        {{2, 5, 6}, {2, 4, 1}, 1},
                        {{2, 3, 5, 6}, {2, 3, 7, 1}, 2},
                        {{7}, {5, 1}, 0}};
  std::mt19937_64 rng(41);
  for (const Case &c : cases) {
    ops::KernelSpec spec = makeSpec("GatherND", {c.data, c.indices}, {{1}});
    std::vector<int64_t> out;
    auto cpu = ops::cpu::GatherNDGeometry::make(spec, c.data, c.indices, c.batchDims, out);
    ASSERT_TRUE(cpu.hasValue()) << cpu.status().message();
    const ops::cuda::NDGeometry g = ops::cuda::ndGeometry(c.data, c.indices, c.batchDims);
    ASSERT_EQ(g.tuples, cpu->tuples);
    ASSERT_EQ(g.slice, cpu->slice);
    for (int64_t t = 0; t < g.tuples; ++t) {
      std::vector<int64_t> tuple(static_cast<size_t>(g.m));
      for (int64_t k = 0; k < g.m; ++k) {
        const int64_t s = c.data[static_cast<size_t>(c.batchDims + k)];
        tuple[static_cast<size_t>(k)] =
            static_cast<int64_t>(rng() % static_cast<uint64_t>(3 * s)) - s - s / 2; // some bad
      }
      int64_t bad = 0;
      const int64_t want = cpu->offset(t, tuple.data(), bad);
      const int64_t got = ops::cuda::ndOffset(g, t, tuple.data());
      ASSERT_EQ(got, want < 0 ? -1 : want) << shapeStr(c.data) << " tuple " << shapeStr(tuple);
    }
  }
}

TEST(CudaDataChecks, TheTargetTakesTheBundledModelsShapesAndRefusesItsLimits) {
  const ops::Target &t = ops::cudaTarget();
  ops::KernelSpec tr = makeSpec("Transpose", {{8, 16, 2, 16}}, {{8, 2, 16, 16}});
  tr.attrs["perm"] = std::vector<int64_t>{0, 2, 1, 3};
  EXPECT_TRUE(t.checkKernel(tr).isOk()) << t.checkKernel(tr).message();
  ops::KernelSpec deep =
      makeSpec("Transpose", {std::vector<int64_t>(9, 1)}, {std::vector<int64_t>(9, 1)});
  deep.attrs["perm"] = std::vector<int64_t>{8, 7, 6, 5, 4, 3, 2, 1, 0};
  EXPECT_NE(t.checkKernel(deep).message().find("rank <= 8"), std::string::npos)
      << t.checkKernel(deep).message();
  ops::KernelSpec resize =
      makeSpec("Resize", {{1, 1, 2, 2, 2, 2, 2}, {0}, {7}}, {{1, 1, 4, 4, 4, 4, 4}});
  resize.inputs[1].dtype = ir::DType::kUndefined;
  resize.attrs["mode"] = std::string("linear");
  EXPECT_NE(t.checkKernel(resize).message().find("at most 4"), std::string::npos)
      << t.checkKernel(resize).message();
  ops::KernelSpec cast = makeSpec("Cast", {{4}}, {{4}});
  cast.outputs[0].dtype = ir::DType::kInt32;
  EXPECT_EQ(t.inPlaceInput(cast), 0);
  cast.outputs[0].dtype = ir::DType::kInt64;
  EXPECT_EQ(t.inPlaceInput(cast), -1);
  ops::KernelSpec where = makeSpec("Where", {{1, 4}, {3, 4}, {}}, {{3, 4}});
  where.inputs[0].dtype = ir::DType::kBool;
  EXPECT_EQ(t.inPlaceInput(where), 1);
  EXPECT_FALSE(t.isViewOp("", "Transpose"));
}

} // namespace
} // namespace dtc::gputest
