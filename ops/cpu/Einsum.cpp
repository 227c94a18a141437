// CPU kernel of Einsum (ops/nn/Einsum.cpp; equation parsing in ops/nn/EinsumEquation.h). Every
// operand is seen through one stride per label (the sum of the strides of its axes carrying that
// label, which walks a diagonal; 0 for a label it lacks or broadcasts), so repeated indices and
// broadcast ellipsis dims need no copies of their own. Operands are contracted left to right:
// each pair is multiplied per batch as [batch, m, k] x [batch, k, n] (oneDNN sgemm for f32, a
// loop for f64), read in place when an operand already has that layout or its transpose, else
// gathered into it (labels an operand alone carries and nothing later needs are summed while
// gathering); the last product is written into the output when its axes are the output's. A
// single operand is gathered straight into the output. f32, f64.
#include "ops/cpu/OneDnnUtil.h"
#include "ops/nn/EinsumEquation.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>

namespace dtc::ops::cpu {

namespace {

using einsum::Equation;

/// An operand seen over all labels: its data and one stride per label (0 where it lacks the label
/// or broadcasts it), and which labels it carries.
template <typename T> struct View {
  const T *data = nullptr;
  std::vector<int64_t> stride;
  std::vector<bool> has;
};

/// Dense row-major tensor whose axes are `labels`.
template <typename T> struct Dense {
  std::vector<T> data;
  std::vector<int> labels;
};

template <typename T>
View<T> viewOf(const T *data, const std::vector<int> &labels, const std::vector<int64_t> &dims,
               const std::vector<int64_t> &sizes) {
  View<T> v;
  v.data = data;
  v.stride.assign(sizes.size(), 0);
  v.has.assign(sizes.size(), false);
  int64_t s = 1;
  for (size_t a = labels.size(); a-- > 0;) {
    const size_t l = static_cast<size_t>(labels[a]);
    if (dims[a] == sizes[l]) // a broadcast (size 1 against n) dim keeps stride 0
      v.stride[l] += s;
    v.has[l] = true;
    s *= dims[a];
  }
  return v;
}

/// out[o] = sum over the `sum` labels of v at (o's `out` labels, the summed ones), o row-major
/// over `out`. Labels v lacks contribute stride 0.
template <typename T>
void gather(const View<T> &v, const std::vector<int> &out, const std::vector<int> &sum,
            const std::vector<int64_t> &sizes, T *dst) {
  int64_t total = 1, inner = 1;
  for (int l : out)
    total *= sizes[static_cast<size_t>(l)];
  for (int l : sum)
    inner *= sizes[static_cast<size_t>(l)];
  std::vector<int64_t> idx(out.size(), 0), sidx(sum.size(), 0);
  int64_t base = 0;
  for (int64_t o = 0; o < total; ++o) {
    T acc = 0;
    int64_t off = base;
    std::fill(sidx.begin(), sidx.end(), 0);
    for (int64_t s = 0; s < inner; ++s) {
      acc += v.data[off];
      for (size_t d = sum.size(); d-- > 0;) {
        const size_t l = static_cast<size_t>(sum[d]);
        off += v.stride[l];
        if (++sidx[d] < sizes[l])
          break;
        off -= v.stride[l] * sizes[l];
        sidx[d] = 0;
      }
    }
    dst[o] = acc;
    for (size_t d = out.size(); d-- > 0;) {
      const size_t l = static_cast<size_t>(out[d]);
      base += v.stride[l];
      if (++idx[d] < sizes[l])
        break;
      base -= v.stride[l] * sizes[l];
      idx[d] = 0;
    }
  }
}

/// C[m, n] = op(A) * op(B), row-major, op = transpose for 'T' (BLAS conventions).
void gemm(char ta, char tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
          const float *b, int64_t ldb, float *c) {
  dnnl_sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
}
void gemm(char ta, char tb, int64_t m, int64_t n, int64_t k, const double *a, int64_t lda,
          const double *b, int64_t ldb, double *c) {
  std::fill(c, c + m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) {
      const double x = ta == 'N' ? a[i * lda + p] : a[p * lda + i];
      for (int64_t j = 0; j < n; ++j)
        c[i * n + j] += x * (tb == 'N' ? b[p * ldb + j] : b[j * ldb + p]);
    }
}

/// Whether v is a dense row-major tensor with axes `order` (a size-1 axis may have any stride),
/// so a gather into that order would copy it unchanged.
template <typename T>
bool denseIn(const View<T> &v, const std::vector<int> &order, const std::vector<int64_t> &sizes) {
  size_t count = 0;
  for (bool h : v.has)
    count += h;
  if (count != order.size())
    return false;
  int64_t expect = 1;
  for (size_t j = order.size(); j-- > 0;) {
    const size_t l = static_cast<size_t>(order[j]);
    if (!v.has[l] || (sizes[l] != 1 && v.stride[l] != expect))
      return false;
    expect *= sizes[l];
  }
  return true;
}

/// `labels` sorted by their first place in `term`.
void sortBy(std::vector<int> &labels, const std::vector<int> &term) {
  auto at = [&](int l) { return std::find(term.begin(), term.end(), l) - term.begin(); };
  std::stable_sort(labels.begin(), labels.end(), [&](int x, int y) { return at(x) < at(y); });
}

std::vector<int> concat(std::initializer_list<const std::vector<int> *> parts) {
  std::vector<int> out;
  for (const std::vector<int> *p : parts)
    out.insert(out.end(), p->begin(), p->end());
  return out;
}

int64_t product(const std::vector<int> &labels, const std::vector<int64_t> &sizes) {
  int64_t p = 1;
  for (int l : labels)
    p *= sizes[static_cast<size_t>(l)];
  return p;
}

template <typename T> class EinsumKernel : public Kernel {
public:
  EinsumKernel(Equation eq, std::vector<int64_t> sizes, std::vector<std::vector<int64_t>> dims)
      : eq_(std::move(eq)), sizes_(std::move(sizes)), dims_(std::move(dims)) {}

  Status run(const KernelArgs &args) override {
    const size_t n = eq_.inputs.size();
    T *y = static_cast<T *>(args.outputs[0]);
    View<T> cur = viewOf(static_cast<const T *>(args.inputs[0]), eq_.inputs[0], dims_[0], sizes_);
    std::vector<int> curTerm = eq_.inputs[0];
    Dense<T> held;
    for (size_t i = 1; i < n; ++i) {
      View<T> next =
          viewOf(static_cast<const T *>(args.inputs[i]), eq_.inputs[i], dims_[i], sizes_);
      // Labels still needed after this pair: the output's and those of later operands.
      std::vector<bool> later(sizes_.size(), false);
      for (int l : eq_.output)
        later[static_cast<size_t>(l)] = true;
      for (size_t j = i + 1; j < n; ++j)
        for (int l : eq_.inputs[j])
          later[static_cast<size_t>(l)] = true;
      std::vector<int> batch, m, nn, k, sumA, sumB;
      for (int l = 0; l < static_cast<int>(sizes_.size()); ++l) {
        const bool a = cur.has[static_cast<size_t>(l)], b = next.has[static_cast<size_t>(l)];
        const bool keep = later[static_cast<size_t>(l)];
        if (a && b)
          (keep ? batch : k).push_back(l);
        else if (a)
          (keep ? m : sumA).push_back(l);
        else if (b)
          (keep ? nn : sumB).push_back(l);
      }
      // Group orders follow the operands' own axis orders, so that an operand often is already
      // [batch, m, k] or [batch, k, m] (A) and [batch, k, n] or [batch, n, k] (B) and is read in
      // place (sgemm's transpose flags), without a gather.
      sortBy(batch, curTerm);
      sortBy(m, curTerm);
      sortBy(k, curTerm);
      sortBy(nn, eq_.inputs[i]);
      const int64_t pb = product(batch, sizes_), pm = product(m, sizes_), pn = product(nn, sizes_),
                    pk = product(k, sizes_);
      std::vector<T> &a = scratchA_, &b = scratchB_;
      const T *pa = cur.data, *pbData = next.data;
      char ta = 'N', tb = 'N';
      int64_t lda = pk, ldb = pn;
      if (sumA.empty() && denseIn(cur, concat({&batch, &k, &m}), sizes_)) {
        ta = 'T';
        lda = pm;
      } else if (!(sumA.empty() && denseIn(cur, concat({&batch, &m, &k}), sizes_))) {
        a.resize(static_cast<size_t>(pb * pm * pk));
        gather(cur, concat({&batch, &m, &k}), sumA, sizes_, a.data());
        pa = a.data();
      }
      if (sumB.empty() && denseIn(next, concat({&batch, &nn, &k}), sizes_)) {
        tb = 'T';
        ldb = pk;
      } else if (!(sumB.empty() && denseIn(next, concat({&batch, &k, &nn}), sizes_))) {
        b.resize(static_cast<size_t>(pb * pk * pn));
        gather(next, concat({&batch, &k, &nn}), sumB, sizes_, b.data());
        pbData = b.data();
      }
      Dense<T> c;
      c.labels = concat({&batch, &m, &nn});
      // The last product lands in the output directly when its axes are the output's.
      const bool direct = i + 1 == n && c.labels == eq_.output;
      T *dst = y;
      if (!direct) {
        c.data.assign(static_cast<size_t>(pb * pm * pn), T(0));
        dst = c.data.data();
      } else if (pk == 0) {
        std::fill(y, y + pb * pm * pn, T(0));
      }
      if (pk > 0 && pm > 0 && pn > 0)
        for (int64_t q = 0; q < pb; ++q)
          gemm(ta, tb, pm, pn, pk, pa + q * pm * pk, lda, pbData + q * pk * pn, ldb,
               dst + q * pm * pn);
      if (direct)
        return Status::ok();
      held = std::move(c);
      std::vector<int64_t> heldDims;
      for (int l : held.labels)
        heldDims.push_back(sizes_[static_cast<size_t>(l)]);
      cur = viewOf<T>(held.data.data(), held.labels, heldDims, sizes_);
      curTerm = held.labels;
    }
    std::vector<int> sum;
    for (int l = 0; l < static_cast<int>(sizes_.size()); ++l)
      if (cur.has[static_cast<size_t>(l)] &&
          std::find(eq_.output.begin(), eq_.output.end(), l) == eq_.output.end())
        sum.push_back(l);
    gather(cur, eq_.output, sum, sizes_, y);
    return Status::ok();
  }

private:
  Equation eq_;
  std::vector<int64_t> sizes_;
  std::vector<std::vector<int64_t>> dims_;
  /// Gathered operands of a pair that cannot be read in place; kept between runs (the shapes
  /// are static) so a step allocates nothing for them after the first.
  std::vector<T> scratchA_, scratchB_;
};

Status parseSpec(const KernelSpec &spec, Equation &eq, std::vector<int64_t> &sizes,
                 std::vector<std::vector<int64_t>> &dims) {
  std::vector<int64_t> ranks;
  for (const TensorDesc &t : spec.inputs) {
    dims.push_back(t.shape);
    ranks.push_back(static_cast<int64_t>(t.shape.size()));
  }
  const std::string text = spec.attrString("equation", "");
  std::string err = einsum::parse(text, ranks, eq);
  if (err.empty())
    err = einsum::labelSizes(eq, dims, sizes);
  if (!err.empty())
    return spec.error("equation '" + text + "': " + err);
  return Status::ok();
}

} // namespace

Status checkEinsum(const KernelSpec &spec) {
  if (spec.inputs.empty() || spec.outputs.size() != 1)
    return spec.error("expected 1 or more inputs and 1 output, got " +
                      std::to_string(spec.inputs.size()) + " and " +
                      std::to_string(spec.outputs.size()));
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    if (!spec.inputs[i].present())
      return spec.error("input " + std::to_string(i) + " is required");
    DTC_RETURN_IF_ERROR(
        checkDType(spec, true, i,
                   {spec.outputs[0].dtype == ir::DType::kFloat64 ? ir::DType::kFloat64
                                                                 : ir::DType::kFloat32}));
  }
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32, ir::DType::kFloat64}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  Equation eq;
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> dims;
  DTC_RETURN_IF_ERROR(parseSpec(spec, eq, sizes, dims));
  std::vector<int64_t> out;
  for (int l : eq.output)
    out.push_back(sizes[static_cast<size_t>(l)]);
  return checkOutputShape(spec, out);
}

Expected<KernelPtr> createEinsum(const KernelSpec &spec, CpuContext &) {
  DTC_RETURN_IF_ERROR(checkEinsum(spec));
  Equation eq;
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> dims;
  DTC_RETURN_IF_ERROR(parseSpec(spec, eq, sizes, dims));
  if (spec.outputs[0].dtype == ir::DType::kFloat64)
    return KernelPtr(
        std::make_unique<EinsumKernel<double>>(std::move(eq), std::move(sizes), std::move(dims)));
  return KernelPtr(
      std::make_unique<EinsumKernel<float>>(std::move(eq), std::move(sizes), std::move(dims)));
}

} // namespace dtc::ops::cpu
