// CPU kernels of the comparisons Equal (f32, f64, every integer type, bool), Less, Greater,
// LessOrEqual and GreaterOrEqual (f32, f64, every integer type) with numpy broadcasting and a bool
// output (one byte, 0 or 1), the logical And, Or, Xor (bool, broadcasting) and Not (bool), IsNaN
// and IsInf (f32, f64), and Where (bool condition; f32, i64, i32 or bool branches; three-way numpy
// broadcasting). Hand loops: oneDNN has no i64 data type, and one loop serves every dtype.
// Comparisons with NaN are false (Equal too).
#include "ops/cpu/BroadcastUtil.h"

#include <cmath>

namespace dtc::ops::cpu {

namespace {

enum class CmpOp { kEqual, kLess, kGreater, kLessOrEqual, kGreaterOrEqual };

CmpOp cmpOp(const std::string &op) {
  if (op == "Equal")
    return CmpOp::kEqual;
  if (op == "Less")
    return CmpOp::kLess;
  if (op == "LessOrEqual")
    return CmpOp::kLessOrEqual;
  if (op == "GreaterOrEqual")
    return CmpOp::kGreaterOrEqual;
  return CmpOp::kGreater;
}

/// u8 elements, told apart from bool bytes (uint8_t) in CompareKernel::compare.
struct Byte {
  uint8_t v;
  bool operator==(Byte o) const { return v == o.v; }
  bool operator<(Byte o) const { return v < o.v; }
  bool operator>(Byte o) const { return v > o.v; }
  bool operator<=(Byte o) const { return v <= o.v; }
  bool operator>=(Byte o) const { return v >= o.v; }
};

/// Every dtype the comparisons take (Equal also takes bool).
const std::vector<ir::DType> kCompareTypes = {
    ir::DType::kFloat32, ir::DType::kFloat64, ir::DType::kInt8,  ir::DType::kInt16,
    ir::DType::kInt32,   ir::DType::kInt64,   ir::DType::kUInt8, ir::DType::kUInt16,
    ir::DType::kUInt32,  ir::DType::kUInt64};

class CompareKernel : public Kernel {
public:
  explicit CompareKernel(const KernelSpec &spec)
      : op_(cmpOp(spec.op)), dtype_(spec.inputs[0].dtype),
        loop_(spec.outputs[0].shape, {spec.inputs[0].shape, spec.inputs[1].shape}) {}

  Status run(const KernelArgs &args) override {
    switch (dtype_) {
    case ir::DType::kFloat32:
      return compare<float>(args);
    case ir::DType::kFloat64:
      return compare<double>(args);
    case ir::DType::kInt8:
      return compare<int8_t>(args);
    case ir::DType::kInt16:
      return compare<int16_t>(args);
    case ir::DType::kInt32:
      return compare<int32_t>(args);
    case ir::DType::kInt64:
      return compare<int64_t>(args);
    case ir::DType::kUInt16:
      return compare<uint16_t>(args);
    case ir::DType::kUInt32:
      return compare<uint32_t>(args);
    case ir::DType::kUInt64:
      return compare<uint64_t>(args);
    case ir::DType::kUInt8:
      return compare<Byte>(args);
    default: // bool, read as bytes (any nonzero byte is true)
      return compare<uint8_t>(args);
    }
  }

private:
  template <typename T> Status compare(const KernelArgs &args) {
    const T *a = static_cast<const T *>(args.inputs[0]);
    const T *b = static_cast<const T *>(args.inputs[1]);
    uint8_t *out = static_cast<uint8_t *>(args.outputs[0]);
    auto apply = [&](auto fn) {
      loop_.run([&](int64_t o, const std::array<int64_t, 2> &i) {
        out[o] = fn(a[i[0]], b[i[1]]) ? 1 : 0;
      });
    };
    if constexpr (std::is_same_v<T, uint8_t>)
      apply([](T x, T y) { return (x != 0) == (y != 0); });
    else if (op_ == CmpOp::kEqual)
      apply([](T x, T y) { return x == y; });
    else if (op_ == CmpOp::kLess)
      apply([](T x, T y) { return x < y; });
    else if (op_ == CmpOp::kLessOrEqual)
      apply([](T x, T y) { return x <= y; });
    else if (op_ == CmpOp::kGreaterOrEqual)
      apply([](T x, T y) { return x >= y; });
    else
      apply([](T x, T y) { return x > y; });
    return Status::ok();
  }

  CmpOp op_;
  ir::DType dtype_;
  BroadcastLoop<2> loop_;
};

/// And, Or, Xor over bool bytes (any nonzero byte is true) with numpy broadcasting. Reads both
/// operands of element o before writing it: correct in place on an operand of the output's shape.
class LogicalKernel : public Kernel {
public:
  explicit LogicalKernel(const KernelSpec &spec)
      : op_(spec.op), loop_(spec.outputs[0].shape, {spec.inputs[0].shape, spec.inputs[1].shape}) {}

  Status run(const KernelArgs &args) override {
    const uint8_t *a = static_cast<const uint8_t *>(args.inputs[0]);
    const uint8_t *b = static_cast<const uint8_t *>(args.inputs[1]);
    uint8_t *out = static_cast<uint8_t *>(args.outputs[0]);
    auto apply = [&](auto fn) {
      loop_.run([&](int64_t o, const std::array<int64_t, 2> &i) {
        out[o] = fn(a[i[0]] != 0, b[i[1]] != 0) ? 1 : 0;
      });
    };
    if (op_ == "And")
      apply([](bool x, bool y) { return x && y; });
    else if (op_ == "Or")
      apply([](bool x, bool y) { return x || y; });
    else
      apply([](bool x, bool y) { return x != y; });
    return Status::ok();
  }

private:
  std::string op_;
  BroadcastLoop<2> loop_;
};

/// IsNaN, and IsInf with its detect_positive / detect_negative attributes (default 1 each), over
/// f32 or f64 elements; bool output of the input's shape.
class FloatClassKernel : public Kernel {
public:
  explicit FloatClassKernel(const KernelSpec &spec)
      : isNaN_(spec.op == "IsNaN"), pos_(spec.attrInt("detect_positive", 1) != 0),
        neg_(spec.attrInt("detect_negative", 1) != 0), dtype_(spec.inputs[0].dtype),
        n_(spec.inputs[0].numElements()) {}

  Status run(const KernelArgs &args) override {
    if (dtype_ == ir::DType::kFloat64)
      classify(static_cast<const double *>(args.inputs[0]), args);
    else
      classify(static_cast<const float *>(args.inputs[0]), args);
    return Status::ok();
  }

private:
  template <typename T> void classify(const T *x, const KernelArgs &args) const {
    uint8_t *y = static_cast<uint8_t *>(args.outputs[0]);
    if (isNaN_) {
      for (int64_t i = 0; i < n_; ++i)
        y[i] = std::isnan(x[i]) ? 1 : 0;
      return;
    }
    for (int64_t i = 0; i < n_; ++i)
      y[i] = std::isinf(x[i]) && (x[i] > 0 ? pos_ : neg_) ? 1 : 0;
  }

  bool isNaN_, pos_, neg_;
  ir::DType dtype_;
  int64_t n_;
};

class NotKernel : public Kernel {
public:
  explicit NotKernel(const KernelSpec &spec) : n_(spec.inputs[0].numElements()) {}
  Status run(const KernelArgs &args) override {
    const uint8_t *x = static_cast<const uint8_t *>(args.inputs[0]);
    uint8_t *y = static_cast<uint8_t *>(args.outputs[0]);
    for (int64_t i = 0; i < n_; ++i)
      y[i] = x[i] == 0 ? 1 : 0;
    return Status::ok();
  }

private:
  int64_t n_;
};

/// Where: out[o] = cond[ic(o)] ? x[ix(o)] : y[iy(o)], copying elements as raw words of the
/// dtype's size (1, 4 or 8 bytes). Reads before it writes element o: correct in place on a
/// branch of the output's shape.
class WhereKernel : public Kernel {
public:
  explicit WhereKernel(const KernelSpec &spec)
      : size_(ir::dtypeSize(spec.outputs[0].dtype)),
        loop_(spec.outputs[0].shape,
              {spec.inputs[0].shape, spec.inputs[1].shape, spec.inputs[2].shape}) {}

  Status run(const KernelArgs &args) override {
    if (size_ == 8)
      return select<uint64_t>(args);
    if (size_ == 4)
      return select<uint32_t>(args);
    return select<uint8_t>(args);
  }

private:
  template <typename W> Status select(const KernelArgs &args) {
    const uint8_t *c = static_cast<const uint8_t *>(args.inputs[0]);
    const W *x = static_cast<const W *>(args.inputs[1]);
    const W *y = static_cast<const W *>(args.inputs[2]);
    W *out = static_cast<W *>(args.outputs[0]);
    loop_.run(
        [&](int64_t o, const std::array<int64_t, 3> &i) { out[o] = c[i[0]] ? x[i[1]] : y[i[2]]; });
    return Status::ok();
  }

  int64_t size_;
  BroadcastLoop<3> loop_;
};

/// Errors unless the inputs broadcast to output 0's shape.
Status checkBroadcastOutput(const KernelSpec &spec) {
  std::vector<std::vector<int64_t>> shapes;
  std::string list;
  for (const TensorDesc &t : spec.inputs) {
    shapes.push_back(t.shape);
    list += (list.empty() ? "" : ", ") + shapeStr(t.shape);
  }
  std::vector<int64_t> out;
  if (!broadcastAll(shapes, out))
    return spec.error("input shapes " + list + " do not broadcast");
  return checkOutputShape(spec, out);
}

} // namespace

Status checkCompare(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1));
  if (cmpOp(spec.op) == CmpOp::kEqual) {
    std::vector<ir::DType> types = kCompareTypes;
    types.push_back(ir::DType::kBool);
    DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, types));
  } else {
    DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, kCompareTypes));
  }
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, {spec.inputs[0].dtype}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kBool}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  return checkBroadcastOutput(spec);
}

Expected<KernelPtr> createCompare(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<CompareKernel>(spec));
}

int inPlaceCompare(const KernelSpec &spec) {
  // Only bool Equal writes elements of its input's size; the loop reads before it writes.
  if (spec.inputs[0].dtype != ir::DType::kBool)
    return -1;
  const auto &out = spec.outputs[0].shape;
  if (spec.inputs[0].shape == out)
    return 0;
  if (spec.inputs[1].shape == out)
    return 1;
  return -1;
}

Status checkLogical(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kBool}));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, {ir::DType::kBool}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kBool}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  return checkBroadcastOutput(spec);
}

Expected<KernelPtr> createLogical(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<LogicalKernel>(spec));
}

int inPlaceLogical(const KernelSpec &spec) {
  const auto &out = spec.outputs[0].shape;
  if (spec.inputs[0].shape == out)
    return 0;
  if (spec.inputs[1].shape == out)
    return 1;
  return -1;
}

Status checkFloatClass(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32, ir::DType::kFloat64}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kBool}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  DTC_RETURN_IF_ERROR(checkOutputShape(spec, spec.inputs[0].shape));
  DTC_RETURN_IF_ERROR(checkFlatLayout(spec));
  (void)spec.attrInt("detect_positive", 1);
  (void)spec.attrInt("detect_negative", 1);
  if (!spec.attrKindError.empty())
    return spec.error(spec.attrKindError);
  return Status::ok();
}

Expected<KernelPtr> createFloatClass(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<FloatClassKernel>(spec));
}

Status checkNot(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kBool}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kBool}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  DTC_RETURN_IF_ERROR(checkOutputShape(spec, spec.inputs[0].shape));
  return checkFlatLayout(spec);
}

Expected<KernelPtr> createNot(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<NotKernel>(spec));
}

int inPlaceNot(const KernelSpec &) { return 0; }

Status checkWhere(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 3, 3, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kBool}));
  DTC_RETURN_IF_ERROR(
      checkDType(spec, true, 1,
                 {ir::DType::kFloat32, ir::DType::kInt64, ir::DType::kInt32, ir::DType::kBool}));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 2, {spec.inputs[1].dtype}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {spec.inputs[1].dtype}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  return checkBroadcastOutput(spec);
}

Expected<KernelPtr> createWhere(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<WhereKernel>(spec));
}

int inPlaceWhere(const KernelSpec &spec) {
  const auto &out = spec.outputs[0].shape;
  if (spec.inputs[1].shape == out)
    return 1;
  if (spec.inputs[2].shape == out)
    return 2;
  return -1;
}

} // namespace dtc::ops::cpu
