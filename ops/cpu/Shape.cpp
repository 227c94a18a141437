// CPU kernels of the data-movement ops: the views Flatten, Reshape, Squeeze, Unsqueeze and
// Identity (a byte copy, skipped when the planner aliased output and input), Transpose (oneDNN
// reorder with permuted strides for f32, a loop for other dtypes), DepthToSpace and
// SpaceToDepth (f32: the same reorder over their 6-D views, ops/tensor/SpaceDepthView.h) and
// Concat (memcpy of
// contiguous slabs in memory order; the inputs and the output share one layout, row-major or
// channels-last). Any fixed-size dtype is accepted where only bytes move. Concat does not use
// oneDNN's concat: oneDNN 2.6 picks its "simple:any" code, which measured 12-25x slower than
// memcpy here (1x32x32x32 + 1x16x32x32 f32 on axis 1: 52-98 us vs 4 us in nchw, 13-29 us vs
// 5 us in nhwc).
#include "ops/cpu/OneDnnUtil.h"
#include "ops/tensor/SpaceDepthView.h"

#include <cstring>
#include <numeric>

namespace dtc::ops::cpu {

namespace {

Status checkFixedSize(const KernelSpec &spec, bool input, size_t index) {
  const TensorDesc &t = input ? spec.inputs[index] : spec.outputs[index];
  if (ir::dtypeSize(t.dtype) > 0)
    return Status::ok();
  return spec.error(std::string(input ? "input " : "output ") + std::to_string(index) +
                    " has dtype " + ir::dtypeName(t.dtype) +
                    "; the CPU kernel supports fixed-size dtypes only");
}

class CopyKernel : public Kernel {
public:
  explicit CopyKernel(int64_t bytes) : bytes_(static_cast<size_t>(bytes)) {}
  Status run(const KernelArgs &args) override {
    if (args.outputs[0] != args.inputs[0])
      std::memmove(args.outputs[0], args.inputs[0], bytes_);
    return Status::ok();
  }

private:
  size_t bytes_;
};

std::vector<int64_t> transposePerm(const KernelSpec &spec) {
  size_t rank = spec.inputs[0].shape.size();
  std::vector<int64_t> dflt(rank);
  for (size_t i = 0; i < rank; ++i)
    dflt[i] = static_cast<int64_t>(rank - 1 - i);
  return spec.attrInts("perm", dflt);
}

/// Transpose of any element size: out[i...] = in[perm-mapped index], walking the output.
class TransposeLoop : public Kernel {
public:
  TransposeLoop(const KernelSpec &spec, const std::vector<int64_t> &perm)
      : elem_(static_cast<size_t>(ir::dtypeSize(spec.inputs[0].dtype))),
        shape_(spec.outputs[0].shape) {
    std::vector<int64_t> inStrides = rowMajorStrides(spec.inputs[0].shape);
    for (int64_t p : perm)
      strides_.push_back(inStrides[static_cast<size_t>(p)]);
  }

  Status run(const KernelArgs &args) override {
    const char *in = static_cast<const char *>(args.inputs[0]);
    char *out = static_cast<char *>(args.outputs[0]);
    size_t rank = shape_.size();
    int64_t total = 1;
    for (int64_t d : shape_)
      total *= d;
    std::vector<int64_t> idx(rank, 0);
    int64_t src = 0;
    for (int64_t o = 0; o < total; ++o) {
      std::memcpy(out + static_cast<size_t>(o) * elem_, in + static_cast<size_t>(src) * elem_,
                  elem_);
      for (size_t d = rank; d-- > 0;) {
        src += strides_[d];
        if (++idx[d] < shape_[d])
          break;
        src -= strides_[d] * shape_[d];
        idx[d] = 0;
      }
    }
    return Status::ok();
  }

private:
  size_t elem_;
  std::vector<int64_t> shape_, strides_;
};

int64_t concatAxis(const KernelSpec &spec) {
  int64_t rank = static_cast<int64_t>(spec.inputs[0].shape.size());
  int64_t axis = spec.attrInt("axis", 0);
  return axis < 0 ? axis + rank : axis;
}

/// Concat by row copies: for each index of the dims before `axis`, each input's slab in turn;
/// dims and axis are taken in memory order (physicalShape), so it serves either layout.
class ConcatLoop : public Kernel {
public:
  explicit ConcatLoop(const KernelSpec &spec) {
    const std::vector<int64_t> out = physicalShape(spec.outputs[0]);
    int64_t axis = static_cast<int64_t>(
        physicalAxis(static_cast<size_t>(concatAxis(spec)), spec.outputs[0].layout, out.size()));
    int64_t elem = ir::dtypeSize(spec.outputs[0].dtype);
    outer_ = 1;
    for (int64_t i = 0; i < axis; ++i)
      outer_ *= out[static_cast<size_t>(i)];
    for (const TensorDesc &t : spec.inputs) {
      const std::vector<int64_t> shape = physicalShape(t);
      int64_t slab = elem;
      for (size_t i = static_cast<size_t>(axis); i < shape.size(); ++i)
        slab *= shape[i];
      slabs_.push_back(static_cast<size_t>(slab));
    }
  }

  Status run(const KernelArgs &args) override {
    char *out = static_cast<char *>(args.outputs[0]);
    for (int64_t o = 0; o < outer_; ++o)
      for (size_t i = 0; i < slabs_.size(); ++i) {
        if (slabs_[i] == 0)
          continue;
        std::memcpy(out, static_cast<const char *>(args.inputs[i]) + o * slabs_[i], slabs_[i]);
        out += slabs_[i];
      }
    return Status::ok();
  }

private:
  int64_t outer_ = 1;
  std::vector<size_t> slabs_;
};

} // namespace

// ---- views -------------------------------------------------------------------------------------

Status checkView(const KernelSpec &spec) {
  if (spec.op == "Reshape")
    DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1));
  else if (spec.op == "Squeeze" || spec.op == "Unsqueeze")
    DTC_RETURN_IF_ERROR(checkArity(spec, 1, 2, 1));
  else
    DTC_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1));
  DTC_RETURN_IF_ERROR(checkFixedSize(spec, true, 0));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {spec.inputs[0].dtype}));
  if (spec.inputs.size() == 2 && spec.inputs[1].present())
    DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, {ir::DType::kInt64}));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  if (spec.inputs[0].numElements() != spec.outputs[0].numElements())
    return spec.error("output " + spec.outputs[0].str() + " and input " + spec.inputs[0].str() +
                      " have different element counts");
  return Status::ok();
}

Expected<KernelPtr> createView(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<CopyKernel>(spec.outputs[0].byteSize()));
}

// ---- Transpose ---------------------------------------------------------------------------------

Status checkTranspose(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1));
  DTC_RETURN_IF_ERROR(checkFixedSize(spec, true, 0));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {spec.inputs[0].dtype}));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  const auto &in = spec.inputs[0].shape;
  std::vector<int64_t> perm = transposePerm(spec);
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(in.size());
  std::iota(iota.begin(), iota.end(), 0);
  if (sorted != iota)
    return spec.error("perm " + shapeStr(perm) + " is not a permutation of the " +
                      std::to_string(in.size()) + " axes");
  std::vector<int64_t> out;
  for (int64_t p : perm)
    out.push_back(in[static_cast<size_t>(p)]);
  return checkOutputShape(spec, out);
}

namespace {

/// f32 input 0 read row-major as `view` and written to output 0 transposed by `perm` (output 0's
/// bytes are the permuted view, row-major): one oneDNN reorder with permuted strides.
Expected<KernelPtr> permuteF32(const KernelSpec &spec, CpuContext &ctx,
                               const std::vector<int64_t> &view, const std::vector<int64_t> &perm) {
  return buildKernel(spec, [&]() -> KernelPtr {
    std::vector<int64_t> inStrides = rowMajorStrides(view);
    dnnl::memory::dims strides, out;
    for (int64_t p : perm) {
      strides.push_back(inStrides[static_cast<size_t>(p)]);
      out.push_back(view[static_cast<size_t>(p)]);
    }
    dnnl::memory::desc src(out, dnnl::memory::data_type::f32, strides);
    dnnl::memory::desc dst = plainDesc(std::vector<int64_t>(out.begin(), out.end()));
    dnnl::reorder::primitive_desc pd(ctx.engine, src, ctx.engine, dst);
    PrimitiveRunner r(dnnl::reorder(pd), ctx);
    r.input(DNNL_ARG_FROM, src, 0);
    r.output(DNNL_ARG_TO, dst, 0);
    return std::make_unique<SinglePrimitiveKernel>(spec, ctx, std::move(r));
  });
}

/// The 6-D view of a DepthToSpace / SpaceToDepth kernel (shapes checked by checkSpaceDepth).
SpaceDepthView spaceDepthView(const KernelSpec &spec) {
  const std::vector<int64_t> &x = spec.inputs[0].shape;
  const int64_t b = spec.attrInt("blocksize", 1);
  if (spec.op == "DepthToSpace")
    return depthToSpaceView(x[0], x[1], x[2], x[3], b, spec.attrString("mode", "DCR") == "CRD");
  return spaceToDepthView(x[0], x[1], x[2], x[3], b);
}

} // namespace

Expected<KernelPtr> createTranspose(const KernelSpec &spec, CpuContext &ctx) {
  std::vector<int64_t> perm = transposePerm(spec);
  if (spec.inputs[0].dtype != ir::DType::kFloat32 || perm.size() > 12 || perm.empty())
    return KernelPtr(std::make_unique<TransposeLoop>(spec, perm));
  return permuteF32(spec, ctx, spec.inputs[0].shape, perm);
}

// ---- DepthToSpace, SpaceToDepth ----------------------------------------------------------------

Status checkSpaceDepth(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  const std::vector<int64_t> &x = spec.inputs[0].shape;
  const int64_t b = spec.attrInt("blocksize", 0);
  const std::string mode = spec.attrString("mode", "DCR");
  if (x.size() != 4 || b <= 0 || (mode != "DCR" && mode != "CRD"))
    return spec.error("expected a rank-4 input, blocksize > 0 and mode DCR or CRD; got " +
                      shapeStr(x) + ", blocksize " + std::to_string(b) + ", mode " + mode);
  const bool toSpace = spec.op == "DepthToSpace";
  if (toSpace ? x[1] % (b * b) != 0 : (x[2] % b != 0 || x[3] % b != 0))
    return spec.error("input " + shapeStr(x) + " does not divide into blocks of " +
                      std::to_string(b));
  std::vector<int64_t> out = toSpace
                                 ? std::vector<int64_t>{x[0], x[1] / (b * b), x[2] * b, x[3] * b}
                                 : std::vector<int64_t>{x[0], x[1] * b * b, x[2] / b, x[3] / b};
  return checkOutputShape(spec, out);
}

Expected<KernelPtr> createSpaceDepth(const KernelSpec &spec, CpuContext &ctx) {
  const SpaceDepthView v = spaceDepthView(spec);
  return permuteF32(spec, ctx, v.dims, v.perm);
}

// ---- Concat ------------------------------------------------------------------------------------

Status checkConcat(const KernelSpec &spec) {
  if (spec.inputs.empty())
    return spec.error("expected at least 1 input, got 0");
  DTC_RETURN_IF_ERROR(checkArity(spec, spec.inputs.size(), spec.inputs.size(), 1));
  DTC_RETURN_IF_ERROR(checkFixedSize(spec, true, 0));
  for (size_t i = 1; i < spec.inputs.size(); ++i)
    DTC_RETURN_IF_ERROR(checkDType(spec, true, i, {spec.inputs[0].dtype}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {spec.inputs[0].dtype}));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  int64_t rank = static_cast<int64_t>(spec.inputs[0].shape.size());
  int64_t axis = spec.attrInt("axis", 0);
  if (rank == 0 || axis < -rank || axis >= rank)
    return spec.error("axis " + std::to_string(axis) + " is out of range for rank " +
                      std::to_string(rank));
  axis = concatAxis(spec);
  std::vector<int64_t> out = spec.inputs[0].shape;
  out[static_cast<size_t>(axis)] = 0;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const auto &s = spec.inputs[i].shape;
    bool ok = static_cast<int64_t>(s.size()) == rank;
    for (size_t d = 0; ok && d < s.size(); ++d)
      ok = d == static_cast<size_t>(axis) || s[d] == out[d];
    if (!ok)
      return spec.error("input " + std::to_string(i) + " has shape " + shapeStr(s) +
                        ", which does not match input 0 " + shapeStr(spec.inputs[0].shape) +
                        " outside axis " + std::to_string(axis));
    out[static_cast<size_t>(axis)] += s[static_cast<size_t>(axis)];
    DTC_RETURN_IF_ERROR(checkSameLayout(spec, true, i, false, 0));
  }
  return checkOutputShape(spec, out);
}

Expected<KernelPtr> createConcat(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<ConcatLoop>(spec));
}

} // namespace dtc::ops::cpu
