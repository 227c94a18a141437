// CPU kernels of the index gradients ai.dtc.GatherGrad (zero fill, then scatter-add of dY rows:
// repeated indices accumulate), ai.dtc.GatherElementsGrad and ai.dtc.GatherNDGrad (zero fill, then
// scatter-add of dY elements or slices) and ai.dtc.SliceGrad (zero fill, then a strided scatter of
// dY). Hand loops over contiguous rows: GatherGrad of an embedding table (axis 0) adds one d_model
// row of dY per index into the (vocab x d_model) gradient.
#include "ops/cpu/IndexUtil.h"

#include <cstring>

namespace dtc::ops::cpu {

namespace {

const std::vector<ir::DType> kIndexTypes = {ir::DType::kInt32, ir::DType::kInt64};

// dx (outer, dim, inner) = 0; dx[o, idx[j], :] += dy[o, j, :].
class GatherGradKernel : public Kernel {
public:
  GatherGradKernel(const KernelSpec &spec, int64_t axis)
      : where_(spec.where()), axis_(axis), indexType_(spec.inputs[1].dtype),
        numIndices_(spec.inputs[1].numElements()),
        bytes_(static_cast<size_t>(spec.outputs[0].byteSize())) {
    const std::vector<int64_t> &s = spec.outputs[0].shape;
    for (int64_t a = 0; a < axis; ++a)
      outer_ *= s[static_cast<size_t>(a)];
    for (size_t a = static_cast<size_t>(axis) + 1; a < s.size(); ++a)
      inner_ *= s[a];
    dim_ = s[static_cast<size_t>(axis)];
  }

  Status run(const KernelArgs &args) override {
    std::vector<int64_t> idx = readIndexTensor(args.inputs[1], indexType_, numIndices_);
    for (int64_t &v : idx) {
      if (v < -dim_ || v >= dim_)
        return Status::error(where_, "index " + std::to_string(v) + " is out of range for axis " +
                                         std::to_string(axis_) + " of size " +
                                         std::to_string(dim_));
      if (v < 0)
        v += dim_;
    }
    const float *dy = static_cast<const float *>(args.inputs[0]);
    float *dx = static_cast<float *>(args.outputs[0]);
    std::memset(dx, 0, bytes_);
    const int64_t q = numIndices_, inner = inner_;
    for (int64_t o = 0; o < outer_; ++o)
      for (int64_t j = 0; j < q; ++j) {
        float *__restrict dst = dx + (o * dim_ + idx[static_cast<size_t>(j)]) * inner;
        const float *__restrict src = dy + (o * q + j) * inner;
        for (int64_t k = 0; k < inner; ++k)
          dst[k] += src[k];
      }
    return Status::ok();
  }

private:
  std::string where_;
  int64_t axis_;
  ir::DType indexType_;
  int64_t numIndices_;
  size_t bytes_;
  int64_t outer_ = 1, inner_ = 1, dim_ = 0;
};

Expected<int64_t> gatherGradAxis(const KernelSpec &spec) {
  const int64_t rank = static_cast<int64_t>(spec.outputs[0].shape.size());
  int64_t axis = spec.attrInt("axis", 0);
  if (rank == 0)
    return spec.error("output 0 must have rank >= 1");
  if (!normalizeAxisValue(axis, rank))
    return spec.error("axis " + std::to_string(axis) + " is out of range for rank " +
                      std::to_string(rank));
  return axis;
}

// dx = 0; dx[p with coordinate axis replaced by idx[p]] += dy[p] for every element p of dy (in
// order, so repeated indices accumulate in a fixed order). The odometer of GatherElements.
class GatherElementsGradKernel : public Kernel {
public:
  GatherElementsGradKernel(const KernelSpec &spec, int64_t axis)
      : where_(spec.where()), axis_(static_cast<size_t>(axis)), indexType_(spec.inputs[1].dtype),
        dyShape_(spec.inputs[0].shape), dxStrides_(rowMajorStrides(spec.outputs[0].shape)),
        dim_(spec.outputs[0].shape[static_cast<size_t>(axis)]),
        bytes_(static_cast<size_t>(spec.outputs[0].byteSize())) {}

  Status run(const KernelArgs &args) override {
    float *dx = static_cast<float *>(args.outputs[0]);
    std::memset(dx, 0, bytes_);
    const int64_t n = ir::checkedProduct(dyShape_).value_or(0);
    if (n == 0)
      return Status::ok();
    std::vector<int64_t> idx = readIndexTensor(args.inputs[1], indexType_, n);
    const float *dy = static_cast<const float *>(args.inputs[0]);
    const size_t rank = dyShape_.size();
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
      dx[base + v * dxStrides_[axis_]] += dy[p];
      for (size_t a = rank; a-- > 0;) {
        if (a != axis_)
          base += dxStrides_[a];
        if (++c[a] < dyShape_[a])
          break;
        if (a != axis_)
          base -= dxStrides_[a] * dyShape_[a];
        c[a] = 0;
      }
    }
    return Status::ok();
  }

private:
  std::string where_;
  size_t axis_;
  ir::DType indexType_;
  std::vector<int64_t> dyShape_, dxStrides_;
  int64_t dim_;
  size_t bytes_;
};

// dx = 0; dx[slice of tuple t] += dy[slice t] for every index tuple t, in order.
class GatherNDGradKernel : public Kernel {
public:
  GatherNDGradKernel(const KernelSpec &spec, GatherNDGeometry g)
      : where_(spec.where()), g_(std::move(g)),
        bytes_(static_cast<size_t>(spec.outputs[0].byteSize())) {}

  Status run(const KernelArgs &args) override {
    float *dx = static_cast<float *>(args.outputs[0]);
    std::memset(dx, 0, bytes_);
    const float *dy = static_cast<const float *>(args.inputs[0]);
    const int64_t *idx = static_cast<const int64_t *>(args.inputs[1]);
    for (int64_t t = 0; t < g_.tuples; ++t) {
      int64_t bad = 0;
      const int64_t off = g_.offset(t, idx + t * g_.m, bad);
      if (off < 0)
        return Status::error(where_, g_.rangeError(off, bad));
      float *__restrict dst = dx + off;
      const float *__restrict src = dy + t * g_.slice;
      for (int64_t k = 0; k < g_.slice; ++k)
        dst[k] += src[k];
    }
    return Status::ok();
  }

private:
  std::string where_;
  GatherNDGeometry g_;
  size_t bytes_;
};

// dx = 0; dx[start + k * step] = dy[k] (per axis). Walks dy in order: an odometer over the outer
// axes, a strided inner loop over the last axis.
class SliceGradKernel : public Kernel {
public:
  explicit SliceGradKernel(const KernelSpec &spec)
      : counts_(spec.inputs[0].shape), bytes_(static_cast<size_t>(spec.outputs[0].byteSize())) {
    const std::vector<int64_t> &shape = spec.outputs[0].shape;
    const std::vector<int64_t> starts = spec.attrInts("starts"), steps = spec.attrInts("steps");
    const std::vector<int64_t> strides = rowMajorStrides(shape);
    for (size_t a = 0; a < shape.size(); ++a) {
      base_ += starts[a] * strides[a];
      stepStride_.push_back(steps[a] * strides[a]);
    }
    for (int64_t c : counts_)
      empty_ = empty_ || c == 0;
  }

  Status run(const KernelArgs &args) override {
    const float *dy = static_cast<const float *>(args.inputs[0]);
    float *dx = static_cast<float *>(args.outputs[0]);
    std::memset(dx, 0, bytes_);
    if (empty_)
      return Status::ok();
    const size_t rank = counts_.size();
    if (rank == 0) {
      dx[base_] = dy[0];
      return Status::ok();
    }
    const int64_t n = counts_[rank - 1], st = stepStride_[rank - 1];
    std::vector<int64_t> k(rank - 1, 0);
    int64_t off = base_;
    for (;;) {
      if (st == 1) {
        std::memcpy(dx + off, dy, static_cast<size_t>(n) * sizeof(float));
      } else {
        for (int64_t i = 0; i < n; ++i)
          dx[off + i * st] = dy[i];
      }
      dy += n;
      // Next outer coordinate (odometer, last outer axis fastest).
      size_t a = rank - 1;
      for (;;) {
        if (a == 0)
          return Status::ok();
        --a;
        off += stepStride_[a];
        if (++k[a] < counts_[a])
          break;
        off -= stepStride_[a] * counts_[a];
        k[a] = 0;
      }
    }
  }

private:
  std::vector<int64_t> counts_, stepStride_;
  size_t bytes_;
  int64_t base_ = 0;
  bool empty_ = false;
};

} // namespace

Status checkGatherGrad(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, kIndexTypes));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  DTC_ASSIGN_OR_RETURN(int64_t axis, gatherGradAxis(spec));
  const std::vector<int64_t> &data = spec.outputs[0].shape, &idx = spec.inputs[1].shape;
  if (spec.attrs.count("shape") && spec.attrInts("shape") != data)
    return spec.error("attribute shape " + shapeStr(spec.attrInts("shape")) +
                      " differs from output 0 " + shapeStr(data));
  std::vector<int64_t> dy(data.begin(), data.begin() + axis);
  dy.insert(dy.end(), idx.begin(), idx.end());
  dy.insert(dy.end(), data.begin() + axis + 1, data.end());
  if (spec.inputs[0].shape != dy)
    return spec.error("dy " + shapeStr(spec.inputs[0].shape) + " must have shape " + shapeStr(dy) +
                      " for indices " + shapeStr(idx) + " and data " + shapeStr(data) +
                      " along axis " + std::to_string(axis));
  return Status::ok();
}

Expected<KernelPtr> createGatherGrad(const KernelSpec &spec, CpuContext &) {
  DTC_ASSIGN_OR_RETURN(int64_t axis, gatherGradAxis(spec));
  return KernelPtr(std::make_unique<GatherGradKernel>(spec, axis));
}

Status checkGatherElementsGrad(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, kIndexTypes));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  DTC_ASSIGN_OR_RETURN(int64_t axis, gatherGradAxis(spec));
  const std::vector<int64_t> &data = spec.outputs[0].shape, &dy = spec.inputs[0].shape;
  if (spec.attrs.count("shape") && spec.attrInts("shape") != data)
    return spec.error("attribute shape " + shapeStr(spec.attrInts("shape")) +
                      " differs from output 0 " + shapeStr(data));
  if (spec.inputs[1].shape != dy || dy.size() != data.size())
    return spec.error("dy " + shapeStr(dy) + " and indices " + shapeStr(spec.inputs[1].shape) +
                      " must have one shape of the rank of output 0 " + shapeStr(data));
  for (size_t a = 0; a < data.size(); ++a)
    if (static_cast<int64_t>(a) != axis && dy[a] > data[a])
      return spec.error("dy " + shapeStr(dy) + " is larger than output 0 " + shapeStr(data) +
                        " on axis " + std::to_string(a));
  return Status::ok();
}

Expected<KernelPtr> createGatherElementsGrad(const KernelSpec &spec, CpuContext &) {
  DTC_ASSIGN_OR_RETURN(int64_t axis, gatherGradAxis(spec));
  return KernelPtr(std::make_unique<GatherElementsGradKernel>(spec, axis));
}

Status checkGatherNDGrad(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, {ir::DType::kInt64}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  const int64_t b = spec.attrInt("batch_dims", 0);
  if (!spec.attrKindError.empty())
    return spec.error(spec.attrKindError);
  std::vector<int64_t> dy;
  DTC_RETURN_IF_ERROR(
      GatherNDGeometry::make(spec, spec.outputs[0].shape, spec.inputs[1].shape, b, dy).status());
  if (spec.inputs[0].shape != dy)
    return spec.error("dy " + shapeStr(spec.inputs[0].shape) + " must have shape " + shapeStr(dy));
  return Status::ok();
}

Expected<KernelPtr> createGatherNDGrad(const KernelSpec &spec, CpuContext &) {
  std::vector<int64_t> dy;
  DTC_ASSIGN_OR_RETURN(GatherNDGeometry g,
                       GatherNDGeometry::make(spec, spec.outputs[0].shape, spec.inputs[1].shape,
                                              spec.attrInt("batch_dims", 0), dy));
  return KernelPtr(std::make_unique<GatherNDGradKernel>(spec, std::move(g)));
}

Status checkSliceGrad(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  const std::vector<int64_t> &shape = spec.outputs[0].shape, &counts = spec.inputs[0].shape;
  const std::vector<int64_t> starts = spec.attrInts("starts"), steps = spec.attrInts("steps");
  if (!spec.attrKindError.empty())
    return spec.error(spec.attrKindError);
  if (starts.size() != shape.size() || steps.size() != shape.size() ||
      counts.size() != shape.size())
    return spec.error("dy " + shapeStr(counts) + ", starts " + shapeStr(starts) + " and steps " +
                      shapeStr(steps) + " must have one entry per axis of output 0 " +
                      shapeStr(shape));
  for (size_t a = 0; a < shape.size(); ++a) {
    if (steps[a] == 0)
      return spec.error("step of axis " + std::to_string(a) + " is 0");
    if (counts[a] == 0)
      continue;
    const int64_t last = starts[a] + (counts[a] - 1) * steps[a];
    if (starts[a] < 0 || starts[a] >= shape[a] || last < 0 || last >= shape[a])
      return spec.error("axis " + std::to_string(a) + ": " + std::to_string(counts[a]) +
                        " elements from " + std::to_string(starts[a]) + " by step " +
                        std::to_string(steps[a]) + " do not fit in dim " +
                        std::to_string(shape[a]));
  }
  return Status::ok();
}

Expected<KernelPtr> createSliceGrad(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<SliceGradKernel>(spec));
}

} // namespace dtc::ops::cpu
