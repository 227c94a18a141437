// CPU kernels of ScatterElements and ScatterND (f32, f64, i32, i64; int32/int64 indices for
// ScatterElements, int64 tuples for ScatterND; negative indices from the back, checked at run
// time): the output starts as a copy of data (nothing to copy in place), then every update is
// combined into its destination in order by `reduction` (none, add, mul, min, max).
#include "ops/cpu/IndexUtil.h"

namespace dtc::ops::cpu {

namespace {

enum class Red { kNone, kAdd, kMul, kMin, kMax };

Expected<Red> reduction(const KernelSpec &spec) {
  const std::string r = spec.attrString("reduction", "none");
  if (!spec.attrKindError.empty())
    return spec.error(spec.attrKindError);
  if (r == "none")
    return Red::kNone;
  if (r == "add")
    return Red::kAdd;
  if (r == "mul")
    return Red::kMul;
  if (r == "min")
    return Red::kMin;
  if (r == "max")
    return Red::kMax;
  return spec.error("attribute 'reduction' must be none, add, mul, min or max, got '" + r + "'");
}

template <typename T> void combine(Red r, T &d, T u) {
  switch (r) {
  case Red::kAdd:
    d = static_cast<T>(d + u);
    break;
  case Red::kMul:
    d = static_cast<T>(d * u);
    break;
  case Red::kMin:
    d = u < d ? u : d;
    break;
  case Red::kMax:
    d = u > d ? u : d;
    break;
  default:
    d = u;
  }
}

const std::vector<ir::DType> kScatterTypes = {ir::DType::kFloat32, ir::DType::kFloat64,
                                              ir::DType::kInt32, ir::DType::kInt64};

/// Calls fn.template operator()<T>() for the element type T of `t`.
template <typename Fn> Status withScatterType(ir::DType t, Fn &&fn) {
  switch (t) {
  case ir::DType::kFloat64:
    return fn(double{});
  case ir::DType::kInt32:
    return fn(int32_t{});
  case ir::DType::kInt64:
    return fn(int64_t{});
  default:
    return fn(float{});
  }
}

class ScatterElementsKernel : public Kernel {
public:
  ScatterElementsKernel(const KernelSpec &spec, int64_t axis, Red red)
      : where_(spec.where()), axis_(static_cast<size_t>(axis)), red_(red),
        dtype_(spec.inputs[0].dtype), indexType_(spec.inputs[1].dtype),
        idxShape_(spec.inputs[1].shape), strides_(rowMajorStrides(spec.inputs[0].shape)),
        dim_(spec.inputs[0].shape[static_cast<size_t>(axis)]),
        bytes_(static_cast<size_t>(spec.inputs[0].byteSize())) {}

  Status run(const KernelArgs &args) override {
    if (args.outputs[0] != args.inputs[0])
      std::memcpy(args.outputs[0], args.inputs[0], bytes_);
    const int64_t n = ir::checkedProduct(idxShape_).value_or(0);
    if (n == 0)
      return Status::ok();
    std::vector<int64_t> idx = readIndexTensor(args.inputs[1], indexType_, n);
    return withScatterType(dtype_, [&](auto tag) -> Status {
      using T = decltype(tag);
      T *y = static_cast<T *>(args.outputs[0]);
      const T *u = static_cast<const T *>(args.inputs[2]);
      const size_t rank = idxShape_.size();
      std::vector<int64_t> c(rank, 0);
      int64_t base = 0;
      for (int64_t p = 0; p < n; ++p) {
        int64_t v = idx[static_cast<size_t>(p)];
        if (v < -dim_ || v >= dim_)
          return Status::error(where_, "index " + std::to_string(v) + " is out of range for axis " +
                                           std::to_string(axis_) + " of size " +
                                           std::to_string(dim_));
        if (v < 0)
          v += dim_;
        combine(red_, y[base + v * strides_[axis_]], u[p]);
        for (size_t a = rank; a-- > 0;) {
          if (a != axis_)
            base += strides_[a];
          if (++c[a] < idxShape_[a])
            break;
          if (a != axis_)
            base -= strides_[a] * idxShape_[a];
          c[a] = 0;
        }
      }
      return Status::ok();
    });
  }

private:
  std::string where_;
  size_t axis_;
  Red red_;
  ir::DType dtype_, indexType_;
  std::vector<int64_t> idxShape_, strides_;
  int64_t dim_;
  size_t bytes_;
};

class ScatterNDKernel : public Kernel {
public:
  ScatterNDKernel(const KernelSpec &spec, GatherNDGeometry g, Red red)
      : where_(spec.where()), g_(std::move(g)), red_(red), dtype_(spec.inputs[0].dtype),
        bytes_(static_cast<size_t>(spec.inputs[0].byteSize())) {}

  Status run(const KernelArgs &args) override {
    if (args.outputs[0] != args.inputs[0])
      std::memcpy(args.outputs[0], args.inputs[0], bytes_);
    const int64_t *idx = static_cast<const int64_t *>(args.inputs[1]);
    return withScatterType(dtype_, [&](auto tag) -> Status {
      using T = decltype(tag);
      T *y = static_cast<T *>(args.outputs[0]);
      const T *u = static_cast<const T *>(args.inputs[2]);
      for (int64_t t = 0; t < g_.tuples; ++t) {
        int64_t bad = 0;
        const int64_t off = g_.offset(t, idx + t * g_.m, bad);
        if (off < 0)
          return Status::error(where_, g_.rangeError(off, bad));
        for (int64_t e = 0; e < g_.slice; ++e)
          combine(red_, y[off + e], u[t * g_.slice + e]);
      }
      return Status::ok();
    });
  }

private:
  std::string where_;
  GatherNDGeometry g_;
  Red red_;
  ir::DType dtype_;
  size_t bytes_;
};

Status checkScatterCommon(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 3, 3, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, kScatterTypes));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 2, {spec.inputs[0].dtype}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {spec.inputs[0].dtype}));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  DTC_RETURN_IF_ERROR(reduction(spec).status());
  return checkOutputShape(spec, spec.inputs[0].shape);
}

Expected<int64_t> scatterAxis(const KernelSpec &spec) {
  const int64_t rank = static_cast<int64_t>(spec.inputs[0].shape.size());
  int64_t axis = spec.attrInt("axis", 0);
  if (rank == 0)
    return spec.error("input 0 must have rank >= 1");
  if (!normalizeAxisValue(axis, rank))
    return spec.error("axis " + std::to_string(axis) + " is out of range for rank " +
                      std::to_string(rank));
  return axis;
}

} // namespace

Status checkScatterElements(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkScatterCommon(spec));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, {ir::DType::kInt32, ir::DType::kInt64}));
  DTC_ASSIGN_OR_RETURN(int64_t axis, scatterAxis(spec));
  const std::vector<int64_t> &data = spec.inputs[0].shape, &idx = spec.inputs[1].shape;
  if (idx.size() != data.size() || spec.inputs[2].shape != idx)
    return spec.error("indices " + shapeStr(idx) + " and updates " +
                      shapeStr(spec.inputs[2].shape) + " must have one shape of the rank of data " +
                      shapeStr(data));
  for (size_t a = 0; a < data.size(); ++a)
    if (static_cast<int64_t>(a) != axis && idx[a] > data[a])
      return spec.error("indices " + shapeStr(idx) + " is larger than data " + shapeStr(data) +
                        " on axis " + std::to_string(a));
  return Status::ok();
}

Expected<KernelPtr> createScatterElements(const KernelSpec &spec, CpuContext &) {
  DTC_ASSIGN_OR_RETURN(int64_t axis, scatterAxis(spec));
  DTC_ASSIGN_OR_RETURN(Red red, reduction(spec));
  return KernelPtr(std::make_unique<ScatterElementsKernel>(spec, axis, red));
}

Status checkScatterND(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkScatterCommon(spec));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, {ir::DType::kInt64}));
  std::vector<int64_t> upd;
  DTC_RETURN_IF_ERROR(
      GatherNDGeometry::make(spec, spec.inputs[0].shape, spec.inputs[1].shape, 0, upd).status());
  if (spec.inputs[2].shape != upd)
    return spec.error("updates " + shapeStr(spec.inputs[2].shape) + " must have shape " +
                      shapeStr(upd));
  return Status::ok();
}

Expected<KernelPtr> createScatterND(const KernelSpec &spec, CpuContext &) {
  std::vector<int64_t> upd;
  DTC_ASSIGN_OR_RETURN(GatherNDGeometry g, GatherNDGeometry::make(spec, spec.inputs[0].shape,
                                                                  spec.inputs[1].shape, 0, upd));
  DTC_ASSIGN_OR_RETURN(Red red, reduction(spec));
  return KernelPtr(std::make_unique<ScatterNDKernel>(spec, std::move(g), red));
}

int inPlaceScatter(const KernelSpec &) { return 0; }

} // namespace dtc::ops::cpu
