// CPU kernels of ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
// ReduceLogSumExp and ReduceSumSquare (canonical opset-18 form: data, optional int64 axes
// input; keepdims, noop_with_empty_axes): a oneDNN reduction primitive for float32 (mean, sum,
// max, min, mul, norm_lp_sum with p = 1 and 2, norm_lp_power_p_sum with p = 2), hand loops for
// int64, empty inputs and ReduceLogSumExp (no oneDNN algorithm; max-shifted, two passes). The
// axes arrive at run time; the reduced axes implied by the static shapes are checked against
// them on every run. oneDNN's reduction_max/min skip NaN and start from -FLT_MAX/FLT_MAX (a
// slice of -inf alone, a fully masked attention row, comes out as -FLT_MAX): an f32
// ReduceMax/ReduceMin whose input holds a NaN or an infinity runs the loop, which gives NaN and
// the infinities as numpy's max and min do.
#include "ops/cpu/NanPropagation.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <map>

namespace dtc::ops::cpu {

namespace {

enum class ReduceOp { kMean, kSum, kMax, kMin, kProd, kL1, kL2, kLogSumExp, kSumSquare };

ReduceOp reduceOp(const std::string &op) {
  static const std::pair<const char *, ReduceOp> kOps[] = {
      {"ReduceMean", ReduceOp::kMean},
      {"ReduceSum", ReduceOp::kSum},
      {"ReduceMin", ReduceOp::kMin},
      {"ReduceProd", ReduceOp::kProd},
      {"ReduceL1", ReduceOp::kL1},
      {"ReduceL2", ReduceOp::kL2},
      {"ReduceLogSumExp", ReduceOp::kLogSumExp},
      {"ReduceSumSquare", ReduceOp::kSumSquare},
  };
  for (const auto &[name, value] : kOps)
    if (op == name)
      return value;
  return ReduceOp::kMax;
}

/// Min and Max skip NaN in oneDNN (the kernel then runs the loop).
bool selectsElement(ReduceOp op) { return op == ReduceOp::kMax || op == ReduceOp::kMin; }

bool hasAxesInput(const KernelSpec &spec) {
  return spec.inputs.size() == 2 && spec.inputs[1].present();
}

/// Ways to see `out` as `in` with some axes dropped (keepdims = 0): collects into `sets` the
/// distinct sets of dropped axes of size != 1 (the ones that change values), stopping at two
/// (ambiguous) or when `budget` steps are spent (then two placeholder sets: ambiguous).
void dropEmbeddings(const std::vector<int64_t> &in, const std::vector<int64_t> &out, size_t i,
                    size_t j, std::vector<bool> &cur, std::vector<std::vector<bool>> &sets,
                    int &budget) {
  if (sets.size() > 1)
    return; // ambiguous already
  if (--budget < 0) {
    sets.assign(2, std::vector<bool>());
    return;
  }
  if (j == out.size()) {
    std::vector<bool> s = cur;
    for (size_t k = i; k < in.size(); ++k)
      s[k] = in[k] != 1;
    if (std::find(sets.begin(), sets.end(), s) == sets.end())
      sets.push_back(s);
    return;
  }
  if (in.size() - i < out.size() - j)
    return;
  if (in[i] == out[j])
    dropEmbeddings(in, out, i + 1, j + 1, cur, sets, budget);
  cur[i] = in[i] != 1;
  dropEmbeddings(in, out, i + 1, j, cur, sets, budget);
  cur[i] = false;
}

/// Reduction over the axes flagged in `reduced` (size-1 axes never flagged), for one dtype.
class ReduceImpl {
public:
  virtual ~ReduceImpl() = default;
  virtual void run(const void *in, void *out) = 0;
};

/// a + b; integers wrap around on overflow (two's complement, as numpy does) instead of UB.
template <typename A> A addWrapping(A a, A b) {
  if constexpr (std::is_integral_v<A>)
    return static_cast<A>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else
    return a + b;
}

/// a * b, wrapping like addWrapping.
template <typename A> A mulWrapping(A a, A b) {
  if constexpr (std::is_integral_v<A>)
    return static_cast<A>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else
    return a * b;
}

template <typename T> class ReduceLoop : public ReduceImpl {
public:
  ReduceLoop(ReduceOp op, const std::vector<int64_t> &in, const std::vector<bool> &reduced)
      : op_(op), in_(in) {
    std::vector<int64_t> keep = in;
    for (size_t d = 0; d < in.size(); ++d)
      if (reduced[d])
        keep[d] = 1;
    outStrides_ = rowMajorStrides(keep);
    for (size_t d = 0; d < in.size(); ++d)
      if (reduced[d])
        outStrides_[d] = 0;
    outCount_ = 1;
    inCount_ = 1;
    for (int64_t d : keep)
      outCount_ *= d;
    for (int64_t d : in)
      inCount_ *= d;
  }

  void run(const void *inPtr, void *outPtr) override {
    const T *x = static_cast<const T *>(inPtr);
    T *y = static_cast<T *>(outPtr);
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
    using Lim = std::numeric_limits<Acc>;
    const Acc lowest = Lim::has_infinity ? -Lim::infinity() : Lim::lowest();
    const Acc highest = Lim::has_infinity ? Lim::infinity() : Lim::max();
    const bool fromLowest = op_ == ReduceOp::kMax || op_ == ReduceOp::kLogSumExp;
    const Acc init = fromLowest               ? lowest
                     : op_ == ReduceOp::kMin  ? highest
                     : op_ == ReduceOp::kProd ? Acc(1)
                                              : Acc(0);
    std::vector<Acc> acc(static_cast<size_t>(outCount_), init);
    forEach([&](int64_t i, int64_t o) {
      Acc v = static_cast<Acc>(x[i]);
      Acc &a = acc[static_cast<size_t>(o)];
      switch (op_) {
      case ReduceOp::kMax:
      case ReduceOp::kLogSumExp:
        a = (v > a || v != v) ? v : a; // NaN propagates
        break;
      case ReduceOp::kMin:
        a = (v < a || v != v) ? v : a;
        break;
      case ReduceOp::kProd:
        a = mulWrapping(a, v);
        break;
      case ReduceOp::kL1:
        a = addWrapping(a, v < 0 ? mulWrapping(v, Acc(-1)) : v);
        break;
      case ReduceOp::kL2:
      case ReduceOp::kSumSquare:
        a = addWrapping(a, mulWrapping(v, v));
        break;
      default:
        a = addWrapping(a, v);
      }
    });
    if constexpr (std::is_floating_point_v<T>) {
      if (op_ == ReduceOp::kLogSumExp) {
        // log(sum(exp(x - m))) + m with m the slice's maximum (exact for an infinite or NaN m).
        std::vector<double> sum(acc.size(), 0.0);
        forEach([&](int64_t i, int64_t o) {
          sum[static_cast<size_t>(o)] +=
              std::exp(static_cast<double>(x[i]) - acc[static_cast<size_t>(o)]);
        });
        for (size_t j = 0; j < acc.size(); ++j)
          if (std::isfinite(acc[j]))
            acc[j] += std::log(sum[j]);
      }
    }
    int64_t n = outCount_ ? inCount_ / outCount_ : 0;
    for (int64_t j = 0; j < outCount_; ++j) {
      Acc a = acc[static_cast<size_t>(j)];
      if (op_ == ReduceOp::kMean) {
        if constexpr (std::is_floating_point_v<T>)
          a = n ? a / static_cast<Acc>(n) : std::numeric_limits<Acc>::quiet_NaN();
        else
          a = n ? a / n : 0;
      }
      if constexpr (std::is_floating_point_v<T>)
        if (op_ == ReduceOp::kL2)
          a = std::sqrt(a);
      y[j] = static_cast<T>(a);
    }
  }

private:
  /// Calls fn(i, o) for every input element i (row-major) with o its output element.
  template <typename Fn> void forEach(Fn &&fn) const {
    std::vector<int64_t> idx(in_.size(), 0);
    int64_t o = 0;
    for (int64_t i = 0; i < inCount_; ++i) {
      fn(i, o);
      for (size_t d = in_.size(); d-- > 0;) {
        o += outStrides_[d];
        if (++idx[d] < in_[d])
          break;
        o -= outStrides_[d] * in_[d];
        idx[d] = 0;
      }
    }
  }

  ReduceOp op_;
  std::vector<int64_t> in_, outStrides_;
  int64_t outCount_ = 1, inCount_ = 1;
};

/// f32 sum or mean over one contiguous block of axes: the input viewed as (outer, mid, inner)
/// reduces over mid. Each output row accumulates contiguous input rows in double, a loop the
/// compiler vectorizes; oneDNN 2.6's reduction falls back to its reference code for most such
/// shapes (bias gradients: (N*T, C) -> (C) took milliseconds).
class ReduceBlock : public ReduceImpl {
public:
  ReduceBlock(ReduceOp op, int64_t outer, int64_t mid, int64_t inner)
      : op_(op), outer_(outer), mid_(mid), inner_(inner),
        acc_(static_cast<size_t>(inner)) {}

  /// The (outer, mid, inner) view when the reduced axes are one contiguous block; false
  /// otherwise.
  static bool view(const std::vector<int64_t> &in, const std::vector<bool> &reduced,
                   int64_t &outer, int64_t &mid, int64_t &inner) {
    size_t first = in.size(), last = 0;
    for (size_t d = 0; d < in.size(); ++d)
      if (reduced[d]) {
        first = std::min(first, d);
        last = d;
      }
    if (first == in.size())
      return false;
    outer = mid = inner = 1;
    for (size_t d = 0; d < in.size(); ++d) {
      if (d >= first && d <= last && !reduced[d] && in[d] != 1)
        return false; // a kept axis inside the block
      (d < first ? outer : d <= last ? mid : inner) *= in[d];
    }
    return true;
  }

  void run(const void *inPtr, void *outPtr) override {
    const float *x = static_cast<const float *>(inPtr);
    float *y = static_cast<float *>(outPtr);
    const double scale = op_ == ReduceOp::kMean ? 1.0 / static_cast<double>(mid_) : 1.0;
    double *acc = acc_.data();
    for (int64_t o = 0; o < outer_; ++o) {
      std::fill(acc_.begin(), acc_.end(), 0.0);
      const float *base = x + o * mid_ * inner_;
      if (inner_ == 1) {
        double a = 0.0;
        for (int64_t m = 0; m < mid_; ++m)
          a += base[m];
        acc[0] = a;
      } else {
        for (int64_t m = 0; m < mid_; ++m) {
          const float *row = base + m * inner_;
          for (int64_t i = 0; i < inner_; ++i)
            acc[i] += row[i];
        }
      }
      float *out = y + o * inner_;
      for (int64_t i = 0; i < inner_; ++i)
        out[i] = static_cast<float>(acc[i] * scale);
    }
  }

private:
  ReduceOp op_;
  int64_t outer_, mid_, inner_;
  std::vector<double> acc_;
};

class ReducePrimitive : public ReduceImpl {
public:
  ReducePrimitive(ReduceOp op, const std::vector<int64_t> &in, const std::vector<bool> &reduced,
                  CpuContext &ctx)
      : ctx_(ctx) {
    std::vector<int64_t> keep = in;
    for (size_t d = 0; d < in.size(); ++d)
      if (reduced[d])
        keep[d] = 1;
    dnnl::algorithm alg = dnnl::algorithm::reduction_max;
    float p = 0.f;
    switch (op) {
    case ReduceOp::kMean:
      alg = dnnl::algorithm::reduction_mean;
      break;
    case ReduceOp::kSum:
      alg = dnnl::algorithm::reduction_sum;
      break;
    case ReduceOp::kMin:
      alg = dnnl::algorithm::reduction_min;
      break;
    case ReduceOp::kProd:
      alg = dnnl::algorithm::reduction_mul;
      break;
    case ReduceOp::kL1: // (sum |x|^p + eps)^(1/p), p = 1, eps = 0
    case ReduceOp::kL2:
      alg = dnnl::algorithm::reduction_norm_lp_sum;
      p = op == ReduceOp::kL1 ? 1.f : 2.f;
      break;
    case ReduceOp::kSumSquare: // sum |x|^p + eps, p = 2, eps = 0
      alg = dnnl::algorithm::reduction_norm_lp_power_p_sum;
      p = 2.f;
      break;
    default:
      break;
    }
    dnnl::memory::desc src = plainDesc(in), dst = plainDesc(keep);
    dnnl::reduction::desc d(alg, src, dst, p, 0.f);
    dnnl::reduction::primitive_desc pd(d, ctx.engine);
    prim_ = dnnl::reduction(pd);
    src_ = dnnl::memory(src, ctx.engine, DNNL_MEMORY_NONE);
    dst_ = dnnl::memory(dst, ctx.engine, DNNL_MEMORY_NONE);
  }
  void run(const void *in, void *out) override {
    src_.set_data_handle(const_cast<void *>(in));
    dst_.set_data_handle(out);
    prim_.execute(ctx_.stream, {{DNNL_ARG_SRC, src_}, {DNNL_ARG_DST, dst_}});
    ctx_.stream.wait();
  }

private:
  CpuContext &ctx_;
  dnnl::reduction prim_;
  dnnl::memory src_, dst_;
};

class ReduceKernel : public Kernel {
public:
  ReduceKernel(const KernelSpec &spec, CpuContext &ctx)
      : where_(spec.where()), ctx_(ctx), op_(reduceOp(spec.op)), dtype_(spec.inputs[0].dtype),
        in_(spec.inputs[0].shape), out_(spec.outputs[0].shape),
        keepdims_(spec.attrInt("keepdims", 1) != 0),
        noop_(spec.attrInt("noop_with_empty_axes", 0) != 0), hasAxes_(hasAxesInput(spec)),
        numAxes_(hasAxes_ ? spec.inputs[1].numElements() : 0),
        bytes_(static_cast<size_t>(spec.outputs[0].byteSize())),
        inCount_(spec.inputs[0].numElements()) {}

  /// The effective reduced set (size-1 axes never flagged) and whether the op is a plain copy,
  /// from the run-time axes; errors for bad axes or an output shape that does not match.
  Expected<std::vector<bool>> reducedAxes(const int64_t *axes, bool &copy) const {
    int64_t rank = static_cast<int64_t>(in_.size());
    std::vector<bool> named(in_.size(), false);
    copy = false;
    if (numAxes_ == 0) {
      if (noop_) {
        copy = true;
      } else {
        named.assign(in_.size(), true);
      }
    } else {
      for (int64_t i = 0; i < numAxes_; ++i) {
        int64_t a = axes[i];
        if (a < -rank || a >= rank)
          return Status::error(where_, "axes value " + std::to_string(a) +
                                           " is out of range for rank " + std::to_string(rank));
        if (a < 0)
          a += rank;
        if (named[static_cast<size_t>(a)])
          return Status::error(where_, "axes names axis " + std::to_string(a) + " twice");
        named[static_cast<size_t>(a)] = true;
      }
    }
    std::vector<int64_t> expected;
    std::vector<bool> eff(in_.size(), false);
    for (size_t d = 0; d < in_.size(); ++d) {
      if (!named[d] || copy)
        expected.push_back(in_[d]);
      else if (keepdims_)
        expected.push_back(1);
      eff[d] = named[d] && !copy && in_[d] != 1;
    }
    if (expected != out_)
      return Status::error(where_, "the run-time axes give output shape " + shapeStr(expected) +
                                       " but the plan has " + shapeStr(out_));
    return eff;
  }

  Status run(const KernelArgs &args) override {
    bool copy = false;
    DTC_ASSIGN_OR_RETURN(
        std::vector<bool> eff,
        reducedAxes(hasAxes_ ? static_cast<const int64_t *>(args.inputs[1]) : nullptr, copy));
    if (copy || std::none_of(eff.begin(), eff.end(), [](bool b) { return b; })) {
      // Nothing reduced, or only size-1 axes: every slice holds one element, whose value is
      // unchanged except for L1 and L2 (|x|) and SumSquare (x^2), as the ONNX reference.
      if (args.outputs[0] != args.inputs[0])
        std::memmove(args.outputs[0], args.inputs[0], bytes_);
      if (op_ == ReduceOp::kL1 || op_ == ReduceOp::kL2 || op_ == ReduceOp::kSumSquare) {
        if (dtype_ == ir::DType::kInt64)
          singleElementSlices(static_cast<int64_t *>(args.outputs[0]));
        else
          singleElementSlices(static_cast<float *>(args.outputs[0]));
      }
      return Status::ok();
    }
    auto it = impls_.find(eff);
    if (it == impls_.end()) {
      DTC_ASSIGN_OR_RETURN(std::unique_ptr<ReduceImpl> impl, makeImpl(eff));
      it = impls_.emplace(eff, std::move(impl)).first;
    }
    ReduceImpl *impl = it->second.get();
    if (selectsElement(op_) && dtype_ == ir::DType::kFloat32 &&
        anyNonFinite(static_cast<const float *>(args.inputs[0]), inCount_)) {
      auto &loop = nanLoops_[eff];
      if (!loop)
        loop = std::make_unique<ReduceLoop<float>>(op_, in_, eff);
      impl = loop.get();
    }
    try {
      impl->run(args.inputs[0], args.outputs[0]);
    } catch (const dnnl::error &e) {
      return Status::error(where_, std::string("oneDNN: ") + e.what());
    }
    return Status::ok();
  }

  /// L1, L2 and SumSquare of one-element slices, in place over the copied values.
  template <typename T> void singleElementSlices(T *y) const {
    for (int64_t i = 0; i < inCount_; ++i)
      y[i] = op_ == ReduceOp::kSumSquare ? mulWrapping(y[i], y[i])
                                         : (y[i] < 0 ? mulWrapping(y[i], T(-1)) : y[i]);
  }

  Expected<std::unique_ptr<ReduceImpl>> makeImpl(const std::vector<bool> &eff) {
    bool empty = std::find(in_.begin(), in_.end(), 0) != in_.end();
    if (dtype_ == ir::DType::kInt64)
      return std::unique_ptr<ReduceImpl>(std::make_unique<ReduceLoop<int64_t>>(op_, in_, eff));
    if (empty || in_.size() > 12 || op_ == ReduceOp::kLogSumExp)
      return std::unique_ptr<ReduceImpl>(std::make_unique<ReduceLoop<float>>(op_, in_, eff));
    int64_t outer = 1, mid = 1, inner = 1;
    if ((op_ == ReduceOp::kSum || op_ == ReduceOp::kMean) &&
        ReduceBlock::view(in_, eff, outer, mid, inner))
      return std::unique_ptr<ReduceImpl>(std::make_unique<ReduceBlock>(op_, outer, mid, inner));
    try {
      return std::unique_ptr<ReduceImpl>(std::make_unique<ReducePrimitive>(op_, in_, eff, ctx_));
    } catch (const dnnl::error &e) {
      return Status::error(where_, std::string("oneDNN: ") + e.what());
    }
  }

  /// Builds the implementation the static shapes imply, when they imply one.
  Status prebuild() {
    std::vector<std::vector<bool>> sets;
    if (!hasAxes_ || numAxes_ == 0) {
      if (noop_)
        return Status::ok(); // a copy
      std::vector<bool> s(in_.size());
      for (size_t d = 0; d < in_.size(); ++d)
        s[d] = in_[d] != 1;
      sets.push_back(s);
    } else if (keepdims_) {
      std::vector<bool> s(in_.size());
      for (size_t d = 0; d < in_.size(); ++d)
        s[d] = in_[d] != out_[d];
      sets.push_back(s);
    } else {
      std::vector<bool> cur(in_.size(), false);
      int budget = 10000;
      dropEmbeddings(in_, out_, 0, 0, cur, sets, budget);
    }
    if (sets.size() != 1 || std::none_of(sets[0].begin(), sets[0].end(), [](bool b) { return b; }))
      return Status::ok();
    DTC_ASSIGN_OR_RETURN(std::unique_ptr<ReduceImpl> impl, makeImpl(sets[0]));
    impls_.emplace(sets[0], std::move(impl));
    return Status::ok();
  }

private:
  std::string where_;
  CpuContext &ctx_;
  ReduceOp op_;
  ir::DType dtype_;
  std::vector<int64_t> in_, out_;
  bool keepdims_, noop_, hasAxes_;
  int64_t numAxes_;
  size_t bytes_;
  std::map<std::vector<bool>, std::unique_ptr<ReduceImpl>> impls_;
  /// f32 ReduceMax/ReduceMin loops for inputs holding NaN or an infinity (made on first need).
  std::map<std::vector<bool>, std::unique_ptr<ReduceImpl>> nanLoops_;
  int64_t inCount_ = 0;
};

} // namespace

Status checkReduce(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 1, 2, 1));
  const ReduceOp op = reduceOp(spec.op);
  if (op == ReduceOp::kL2 || op == ReduceOp::kLogSumExp)
    DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32}));
  else
    DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32, ir::DType::kInt64}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {spec.inputs[0].dtype}));
  if (hasAxesInput(spec)) {
    DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, {ir::DType::kInt64}));
    if (spec.inputs[1].shape.size() != 1)
      return spec.error("axes must be a 1-D tensor, got shape " + shapeStr(spec.inputs[1].shape));
  }
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  const auto &in = spec.inputs[0].shape, &out = spec.outputs[0].shape;
  bool keepdims = spec.attrInt("keepdims", 1) != 0;
  bool noop = spec.attrInt("noop_with_empty_axes", 0) != 0;
  int64_t numAxes = hasAxesInput(spec) ? spec.inputs[1].numElements() : 0;
  if (numAxes > static_cast<int64_t>(in.size()))
    return spec.error("axes has " + std::to_string(numAxes) + " values for an input of rank " +
                      std::to_string(in.size()));
  if (numAxes == 0) {
    std::vector<int64_t> expected = noop       ? in
                                    : keepdims ? std::vector<int64_t>(in.size(), 1)
                                               : std::vector<int64_t>{};
    return checkOutputShape(spec, expected);
  }
  bool ok;
  if (keepdims) {
    ok = out.size() == in.size();
    for (size_t d = 0; ok && d < in.size(); ++d)
      ok = out[d] == in[d] || out[d] == 1;
  } else {
    // `out` must be a subsequence of `in` (greedy matching decides it).
    ok = out.size() + static_cast<size_t>(numAxes) == in.size();
    size_t j = 0;
    for (size_t d = 0; ok && d < in.size() && j < out.size(); ++d)
      if (in[d] == out[j])
        ++j;
    ok = ok && j == out.size();
  }
  if (!ok)
    return spec.error("output shape " + shapeStr(out) + " is not a reduction of input " +
                      shapeStr(in) + " over " + std::to_string(numAxes) +
                      " axes with keepdims=" + std::to_string(keepdims));
  return Status::ok();
}

Expected<KernelPtr> createReduce(const KernelSpec &spec, CpuContext &ctx) {
  auto k = std::make_unique<ReduceKernel>(spec, ctx);
  DTC_RETURN_IF_ERROR(k->prebuild());
  return KernelPtr(std::move(k));
}

} // namespace dtc::ops::cpu
