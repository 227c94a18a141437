// CPU kernels of the ai.dtc normalization ops of training graphs (ops/training/NNGradNorm.cpp):
// BatchNormTraining and BatchNormGrad (loops over channels: double statistics, vectorizable
// rows; with sync=1 on a data-parallel group their per-channel sums are all-reduced through
// CpuContext::collectives, torch.nn.SyncBatchNorm) and LayerNormGrad (statistics from a oneDNN
// layer_normalization forward_training, then its backward). f32, row-major.
#include "ops/cpu/OneDnnUtil.h"

#include <algorithm>
#include <cmath>
#include <cstring>

// OpenMP over channels for the batch normalization loops (when this file is built with OpenMP: see
// DTC_CPU_OPENMP_SOURCES in ops/cpu/CMakeLists.txt); a plain loop otherwise.
#define DTC_BN_PRAGMA(x) _Pragma(#x)
#ifdef _OPENMP
#define DTC_BN_PARALLEL_FOR_IF(cond) DTC_BN_PRAGMA(omp parallel for if (cond) schedule(static))
#else
#define DTC_BN_PARALLEL_FOR_IF(cond)
#endif

namespace dtc::ops::cpu {

namespace {

using F = dnnl::normalization_flags;

bool present(const std::vector<TensorDesc> &v, size_t i) { return i < v.size() && v[i].present(); }

/// Elements per channel: N * d1 * ... * dk.
int64_t perChannel(const std::vector<int64_t> &x) {
  int64_t n = x[0];
  for (size_t i = 2; i < x.size(); ++i)
    n *= x[i];
  return n;
}

/// Shared checks of BatchNormTraining and BatchNormGrad: f32 operands, X (input xIndex) of rank
/// >= 2 with at least one element per channel, inputs [xIndex + 1, 5) and outputs 1.. of shape
/// [C], output 0 of X's shape.
Status checkBatchNormLike(const KernelSpec &spec, size_t xIndex, size_t maxOutputs) {
  if (spec.inputs.size() != 5 || spec.outputs.empty() || spec.outputs.size() > maxOutputs)
    return spec.error("expected 5 inputs and 1 to " + std::to_string(maxOutputs) +
                      " outputs, got " + std::to_string(spec.inputs.size()) + " and " +
                      std::to_string(spec.outputs.size()));
  for (size_t i = 0; i < 5; ++i) {
    if (!spec.inputs[i].present())
      return spec.error("input " + std::to_string(i) + " is required");
    DTC_RETURN_IF_ERROR(checkDType(spec, true, i, {ir::DType::kFloat32}));
  }
  if (!spec.outputs[0].present())
    return spec.error("output 0 is required");
  for (size_t i = 0; i < spec.outputs.size(); ++i)
    if (spec.outputs[i].present())
      DTC_RETURN_IF_ERROR(checkDType(spec, false, i, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  const auto &x = spec.inputs[xIndex].shape;
  if (x.size() < 2)
    return spec.error("X has rank " + std::to_string(x.size()) + "; expected (N, C, ...)");
  if (x[1] > 0 && perChannel(x) == 0)
    return spec.error("X " + shapeStr(x) +
                      " has no element per channel; batch statistics need "
                      "at least one");
  for (size_t i = 0; i < xIndex; ++i)
    if (spec.inputs[i].shape != x)
      return spec.error("input " + std::to_string(i) + " has shape " +
                        shapeStr(spec.inputs[i].shape) + ", expected " + shapeStr(x));
  const std::vector<int64_t> c = {x[1]};
  for (size_t i = xIndex + 1; i < 5; ++i)
    if (spec.inputs[i].shape != c)
      return spec.error("input " + std::to_string(i) + " has shape " +
                        shapeStr(spec.inputs[i].shape) + ", expected " + shapeStr(c));
  for (size_t i = 1; i < spec.outputs.size(); ++i)
    if (spec.outputs[i].present() && spec.outputs[i].shape != c)
      return spec.error("output " + std::to_string(i) + " has shape " +
                        shapeStr(spec.outputs[i].shape) + ", expected " + shapeStr(c));
  return checkOutputShape(spec, x);
}

// ---------------------------------------------------------------------------------------------
// Batch normalization: shared pieces

/// Parallelize the per-channel loops from this many elements on.
constexpr int64_t kParallelGrain = 1 << 15;

/// X (N, C, d1..dk) as N * C contiguous rows of `spatial` = d1*..*dk elements.
struct ChannelRows {
  int64_t batch = 0, channels = 0, spatial = 1;
  explicit ChannelRows(const std::vector<int64_t> &x) : batch(x[0]), channels(x[1]) {
    for (size_t i = 2; i < x.size(); ++i)
      spatial *= x[i];
  }
  int64_t perChannel() const { return batch * spatial; }
  int64_t elements() const { return batch * channels * spatial; }
  int64_t row(int64_t n, int64_t c) const { return (n * channels + c) * spatial; }
};

/// Mean and M2 = sum((x - mean)^2) of channel c's perChannel() (>= 1) elements, in double from
/// deviations to a shift (the channel's first element), so M2 carries no cancellation.
struct Moments {
  double mean = 0, m2 = 0;
};

Moments channelMoments(const float *x, const ChannelRows &r, int64_t c) {
  const double n = static_cast<double>(r.perChannel());
  const double shift = x[r.row(0, c)];
  double sum = 0, sq = 0;
  for (int64_t b = 0; b < r.batch; ++b) {
    const float *row = x + r.row(b, c);
    // Eight independent lanes: contiguous, vectorizable, and shorter rounding chains.
    double s8[8] = {}, q8[8] = {};
    int64_t i = 0;
    for (; i + 8 <= r.spatial; i += 8)
      for (int j = 0; j < 8; ++j) {
        const double d = static_cast<double>(row[i + j]) - shift;
        s8[j] += d;
        q8[j] += d * d;
      }
    for (; i < r.spatial; ++i) {
      const double d = static_cast<double>(row[i]) - shift;
      sum += d;
      sq += d * d;
    }
    for (int j = 0; j < 8; ++j) {
      sum += s8[j];
      sq += q8[j];
    }
  }
  return {shift + sum / n, std::max(0.0, sq - sum * (sum / n))};
}

/// sum(dY) and sum(dY * (X - mean)) over channel c, in double.
struct GradSums {
  double dy = 0, dyXmu = 0;
};

GradSums channelGradSums(const float *dy, const float *x, const ChannelRows &r, int64_t c,
                         double mean) {
  GradSums s;
  for (int64_t b = 0; b < r.batch; ++b) {
    const float *g = dy + r.row(b, c);
    const float *v = x + r.row(b, c);
    double s8[8] = {}, q8[8] = {};
    int64_t i = 0;
    for (; i + 8 <= r.spatial; i += 8)
      for (int j = 0; j < 8; ++j) {
        const double gj = g[i + j];
        s8[j] += gj;
        q8[j] += gj * (static_cast<double>(v[i + j]) - mean);
      }
    for (; i < r.spatial; ++i) {
      s.dy += g[i];
      s.dyXmu += static_cast<double>(g[i]) * (static_cast<double>(v[i]) - mean);
    }
    for (int j = 0; j < 8; ++j) {
      s.dy += s8[j];
      s.dyXmu += q8[j];
    }
  }
  return s;
}

/// out[i] = (in[i] - m) * a + b for i < len. Blocks of 8 whose loads precede their stores:
/// gcc -O2 vectorizes them (its cheap cost model skips loops of unknown trip count).
void affineRow(const float *in, float *out, int64_t len, float m, float a, float b) {
  int64_t i = 0;
  for (; i + 8 <= len; i += 8) {
    float t[8];
    for (int j = 0; j < 8; ++j)
      t[j] = (in[i + j] - m) * a + b;
    for (int j = 0; j < 8; ++j)
      out[i + j] = t[j];
  }
  for (; i < len; ++i)
    out[i] = (in[i] - m) * a + b;
}

/// out[i] = a * g[i] + bx * (v[i] - m) + d for i < len; `out` may be `g` (same elements).
void gradRow(const float *g, const float *v, float *out, int64_t len, float a, float bx, float m,
             float d) {
  int64_t i = 0;
  for (; i + 8 <= len; i += 8) {
    float t[8];
    for (int j = 0; j < 8; ++j)
      t[j] = a * g[i + j] + bx * (v[i + j] - m) + d;
    for (int j = 0; j < 8; ++j)
      out[i + j] = t[j];
  }
  for (; i < len; ++i)
    out[i] = a * g[i] + bx * (v[i] - m) + d;
}

/// The group's collectives when a sync=1 kernel must synchronize, else null (sync=0, no group,
/// or a group of one: then the kernel skips the all-reduce, the sync=0 code).
KernelCollectives *activeGroup(bool sync, CpuContext &ctx) {
  return sync && ctx.collectives && ctx.collectives->groupSize() > 1 ? ctx.collectives : nullptr;
}

/// Sums `data` over the group; the error names the node (`where`) when the communicator's does
/// not already.
Status groupSum(KernelCollectives &group, std::vector<double> &data, const std::string &where) {
  Status st = group.allReduceSum(data.data(), data.size(), where);
  if (st.isOk() || st.message().find(where) != std::string::npos)
    return st;
  return st.withContext(where);
}

/// The group's total count per channel (slot 0 of a reduced buffer whose ranks each put their
/// local count there): an error unless it is a positive integer.
Expected<double> groupCount(double total, const std::string &where) {
  if (!(total >= 1.0) || total != std::floor(total))
    return Status::error(where, "the data-parallel group's element count per channel is " +
                                    std::to_string(total) + "; expected a positive integer");
  return total;
}

// ---------------------------------------------------------------------------------------------
// BatchNormTraining

/// Y = (X - mean) * scale / sqrt(var + epsilon) + B with the batch's mean and biased variance
/// per channel (saved_mean / saved_var, outputs 3 and 4); running_mean = in_mean * momentum +
/// mean * (1 - momentum) and running_var = in_var * momentum + var * M / (M - 1) *
/// (1 - momentum) (PyTorch's unbiased running variance; var alone for M = 1), M the count per
/// channel. Per channel, in one pass over its rows: mean and M2 in double (channelMoments),
/// then Y while the rows are in cache. oneDNN 2.6's batch_normalization has only a
/// reference-speed kernel for plain NCHW, 3-10x slower than these loops.
///
/// sync=1 on a group of R > 1 ranks: each rank computes its count n_r, mean m_r and M2 q_r; one
/// all-reduce sums [n_r, n_r*m_r (C), q_r + n_r*m_r^2 (C)]; then mean = S1 / M and
/// var = (S2 - S1 * mean) / M. That subtraction cancels only the spread of the R rank means
/// around the global mean: its error is ~1e-16 * mean^2 / var relative to var, below f32
/// resolution unless |mean| > 1e4 * std, where the f32 inputs themselves resolve the deviations
/// to ~1e-3 only.
class BatchNormTrainingKernel : public Kernel {
public:
  BatchNormTrainingKernel(const KernelSpec &spec, CpuContext &ctx)
      : where_(spec.where()), ctx_(ctx), rows_(spec.inputs[0].shape),
        momentum_(spec.attrFloat("momentum", 0.9f)), eps_(spec.attrFloat("epsilon", 1e-5f)),
        sync_(spec.attrInt("sync", 0) != 0) {
    const size_t c = static_cast<size_t>(rows_.channels);
    if (!present(spec.outputs, 3))
      meanScratch_.resize(c);
    if (!present(spec.outputs, 4))
      varScratch_.resize(c);
  }

  Status run(const KernelArgs &args) override {
    Out o;
    o.x = static_cast<const float *>(args.inputs[0]);
    o.scale = static_cast<const float *>(args.inputs[1]);
    o.bias = static_cast<const float *>(args.inputs[2]);
    o.inMean = static_cast<const float *>(args.inputs[3]);
    o.inVar = static_cast<const float *>(args.inputs[4]);
    o.y = static_cast<float *>(args.outputs[0]);
    o.runMean = args.numOutputs > 1 ? static_cast<float *>(args.outputs[1]) : nullptr;
    o.runVar = args.numOutputs > 2 ? static_cast<float *>(args.outputs[2]) : nullptr;
    o.mean = args.numOutputs > 3 && args.outputs[3] ? static_cast<float *>(args.outputs[3])
                                                    : meanScratch_.data();
    o.var = args.numOutputs > 4 && args.outputs[4] ? static_cast<float *>(args.outputs[4])
                                                   : varScratch_.data();
    const ChannelRows r = rows_;
    const int64_t nc = r.channels;
    [[maybe_unused]] const bool parallel = r.elements() >= kParallelGrain;
    KernelCollectives *group = activeGroup(sync_, ctx_);
    if (!group) {
      const double n = static_cast<double>(r.perChannel());
      const double unbias = n > 1 ? n / (n - 1) : 1.0;
      DTC_BN_PARALLEL_FOR_IF(parallel)
      for (int64_t c = 0; c < nc; ++c) {
        const Moments mo = channelMoments(o.x, r, c);
        finishChannel(o, c, mo.mean, mo.m2 / n, unbias);
      }
      return Status::ok();
    }

    std::vector<double> &red = reduce_;
    red.assign(static_cast<size_t>(1 + 2 * nc), 0.0);
    const double n = static_cast<double>(r.perChannel());
    red[0] = n;
    DTC_BN_PARALLEL_FOR_IF(parallel)
    for (int64_t c = 0; c < nc; ++c) {
      const Moments mo = channelMoments(o.x, r, c);
      red[static_cast<size_t>(1 + c)] = n * mo.mean;
      red[static_cast<size_t>(1 + nc + c)] = mo.m2 + n * mo.mean * mo.mean;
    }
    DTC_RETURN_IF_ERROR(groupSum(*group, red, where_));
    DTC_ASSIGN_OR_RETURN(double total, groupCount(red[0], where_));
    // Bessel's correction with the group's count (PyTorch); none for a total of 1.
    const double unbias = total > 1 ? total / (total - 1) : 1.0;
    DTC_BN_PARALLEL_FOR_IF(parallel)
    for (int64_t c = 0; c < nc; ++c) {
      const double s1 = red[static_cast<size_t>(1 + c)];
      const double s2 = red[static_cast<size_t>(1 + nc + c)];
      const double m = s1 / total;
      finishChannel(o, c, m, std::max(0.0, (s2 - s1 * m) / total), unbias);
    }
    return Status::ok();
  }

private:
  /// The operands of one run.
  struct Out {
    const float *x, *scale, *bias, *inMean, *inVar;
    float *y, *runMean, *runVar, *mean, *var;
  };

  /// Channel c with batch mean m and biased variance v: the saved and running statistics, then
  /// its rows of Y (from the saved f32 statistics, as BatchNormGrad sees them).
  void finishChannel(const Out &o, int64_t c, double m, double v, double unbias) const {
    const double keep = momentum_, take = 1.0 - static_cast<double>(momentum_);
    o.mean[c] = static_cast<float>(m);
    o.var[c] = static_cast<float>(v);
    if (o.runMean)
      o.runMean[c] = static_cast<float>(o.inMean[c] * keep + m * take);
    if (o.runVar)
      o.runVar[c] = static_cast<float>(o.inVar[c] * keep + v * unbias * take);
    const float mf = o.mean[c], b = o.bias[c];
    const float a =
        static_cast<float>(static_cast<double>(o.scale[c]) /
                           std::sqrt(static_cast<double>(o.var[c]) + static_cast<double>(eps_)));
    for (int64_t smp = 0; smp < rows_.batch; ++smp)
      affineRow(o.x + rows_.row(smp, c), o.y + rows_.row(smp, c), rows_.spatial, mf, a, b);
  }

  std::string where_;
  CpuContext &ctx_;
  ChannelRows rows_;
  float momentum_, eps_;
  bool sync_;
  std::vector<float> meanScratch_, varScratch_; ///< saved statistics the node does not output
  std::vector<double> reduce_;                  ///< sync=1: the all-reduce buffer
};

// ---------------------------------------------------------------------------------------------
// BatchNormGrad

/// The backward of BatchNormTraining given its saved statistics (Ioffe & Szegedy 2015), with
/// invstd = 1 / sqrt(var + epsilon), M the count per channel, per channel:
///   sum_dy = sum(dY), sum_dy_xmu = sum(dY * (X - mean)) (double),
///   dX = scale * invstd * (dY - sum_dy / M - (X - mean) * invstd^2 * sum_dy_xmu / M),
///   dScale = sum_dy_xmu * invstd, dB = sum_dy,
/// in one pass over the channel's rows for the sums, then dX while they are in cache. dX may
/// overwrite dY (each element is read before it is written).
///
/// sync=1 on a group of R > 1 ranks: one all-reduce of [n_r, sum_dy (C), sum_dy_xmu (C)] (the
/// count too: shards may differ) between the sums and dX, which uses the group's sums and count;
/// dScale and dB stay local (torch.nn.SyncBatchNorm's backward: the data-parallel all-reduce
/// combines the parameter gradients).
class BatchNormGradKernel : public Kernel {
public:
  BatchNormGradKernel(const KernelSpec &spec, CpuContext &ctx)
      : where_(spec.where()), ctx_(ctx), rows_(spec.inputs[1].shape),
        eps_(spec.attrFloat("epsilon", 1e-5f)), sync_(spec.attrInt("sync", 0) != 0) {}

  Status run(const KernelArgs &args) override {
    Args a;
    a.dy = static_cast<const float *>(args.inputs[0]);
    a.x = static_cast<const float *>(args.inputs[1]);
    a.scale = static_cast<const float *>(args.inputs[2]);
    a.mean = static_cast<const float *>(args.inputs[3]);
    a.var = static_cast<const float *>(args.inputs[4]);
    a.dx = static_cast<float *>(args.outputs[0]); // may alias dy (same element only)
    a.dScale = args.numOutputs > 1 ? static_cast<float *>(args.outputs[1]) : nullptr;
    a.dB = args.numOutputs > 2 ? static_cast<float *>(args.outputs[2]) : nullptr;
    const ChannelRows r = rows_;
    const int64_t nc = r.channels;
    [[maybe_unused]] const bool parallel = r.elements() >= kParallelGrain;
    KernelCollectives *group = activeGroup(sync_, ctx_);
    if (!group) {
      const double n = static_cast<double>(r.perChannel());
      DTC_BN_PARALLEL_FOR_IF(parallel)
      for (int64_t c = 0; c < nc; ++c) {
        const GradSums s = localSums(a, c);
        writeDx(a, c, s.dy, s.dyXmu, n);
      }
      return Status::ok();
    }

    std::vector<double> &red = reduce_;
    red.assign(static_cast<size_t>(1 + 2 * nc), 0.0);
    red[0] = static_cast<double>(r.perChannel());
    DTC_BN_PARALLEL_FOR_IF(parallel)
    for (int64_t c = 0; c < nc; ++c) {
      const GradSums s = localSums(a, c);
      red[static_cast<size_t>(1 + c)] = s.dy;
      red[static_cast<size_t>(1 + nc + c)] = s.dyXmu;
    }
    DTC_RETURN_IF_ERROR(groupSum(*group, red, where_));
    DTC_ASSIGN_OR_RETURN(double total, groupCount(red[0], where_));
    DTC_BN_PARALLEL_FOR_IF(parallel)
    for (int64_t c = 0; c < nc; ++c)
      writeDx(a, c, red[static_cast<size_t>(1 + c)], red[static_cast<size_t>(1 + nc + c)], total);
    return Status::ok();
  }

private:
  /// The operands of one run.
  struct Args {
    const float *dy, *x, *scale, *mean, *var;
    float *dx, *dScale, *dB;
  };

  double invstd(const Args &a, int64_t c) const {
    return 1.0 / std::sqrt(static_cast<double>(a.var[c]) + eps_);
  }

  /// Channel c's local sums; writes its dScale and dB.
  GradSums localSums(const Args &a, int64_t c) const {
    const GradSums s = channelGradSums(a.dy, a.x, rows_, c, static_cast<double>(a.mean[c]));
    if (a.dScale)
      a.dScale[c] = static_cast<float>(s.dyXmu * invstd(a, c));
    if (a.dB)
      a.dB[c] = static_cast<float>(s.dy);
    return s;
  }

  /// Channel c's rows of dX from the sums `sdy`, `sdyx` over `total` elements per channel.
  void writeDx(const Args &a, int64_t c, double sdy, double sdyx, double total) const {
    const double is = invstd(a, c);
    const double k = static_cast<double>(a.scale[c]) * is;
    // dX = ka * dY + kb * (X - mean) + kd.
    const float ka = static_cast<float>(k);
    const float kb = static_cast<float>(-k * is * is * sdyx / total);
    const float kd = static_cast<float>(-k * sdy / total);
    const float m = a.mean[c];
    for (int64_t b = 0; b < rows_.batch; ++b) {
      const int64_t o = rows_.row(b, c);
      gradRow(a.dy + o, a.x + o, a.dx + o, rows_.spatial, ka, kb, m, kd);
    }
  }

  std::string where_;
  CpuContext &ctx_;
  ChannelRows rows_;
  double eps_;
  bool sync_;
  std::vector<double> reduce_; ///< sync=1: the all-reduce buffer
};

// ---------------------------------------------------------------------------------------------
// LayerNormGrad

/// For Scale of shape `s` broadcast to `tail`: the source index of each of the tail's elements
/// (row-major).
std::vector<int64_t> broadcastIndex(const std::vector<int64_t> &s,
                                    const std::vector<int64_t> &tail) {
  std::vector<int64_t> padded(tail.size() - s.size(), 1);
  padded.insert(padded.end(), s.begin(), s.end());
  std::vector<int64_t> srcStrides = rowMajorStrides(padded);
  for (size_t d = 0; d < tail.size(); ++d)
    if (padded[d] == 1)
      srcStrides[d] = 0;
  int64_t total = 1;
  for (int64_t d : tail)
    total *= d;
  std::vector<int64_t> index(static_cast<size_t>(total));
  std::vector<int64_t> idx(tail.size(), 0);
  int64_t src = 0;
  for (int64_t o = 0; o < total; ++o) {
    index[static_cast<size_t>(o)] = src;
    for (size_t d = tail.size(); d-- > 0;) {
      src += srcStrides[d];
      if (++idx[d] < tail[d])
        break;
      src -= srcStrides[d] * tail[d];
      idx[d] = 0;
    }
  }
  return index;
}

struct NormShape {
  int64_t axis = 0, outer = 1, inner = 1;
  std::vector<int64_t> tail;
};

NormShape normShape(const std::vector<int64_t> &x, int64_t axis) {
  NormShape n;
  int64_t rank = static_cast<int64_t>(x.size());
  n.axis = axis < 0 ? axis + rank : axis;
  for (int64_t i = 0; i < rank; ++i)
    (i < n.axis ? n.outer : n.inner) *= x[static_cast<size_t>(i)];
  n.tail.assign(x.begin() + n.axis, x.end());
  return n;
}

class LayerNormGradKernel : public Kernel {
public:
  LayerNormGradKernel(const KernelSpec &spec, CpuContext &ctx) : where_(spec.where()), ctx_(ctx) {}

  Status run(const KernelArgs &args) override {
    if (outer_ == 0) { // no rows: the parameter gradients are empty sums
      for (size_t o = 1; o < args.numOutputs; ++o)
        if (args.outputs[o])
          std::fill_n(static_cast<float *>(args.outputs[o]), inner_, 0.f);
      return Status::ok();
    }
    if (!scaleIndex_.empty()) {
      const float *src = static_cast<const float *>(args.inputs[2]);
      float *dst = static_cast<float *>(scaleExpanded_.get_data_handle());
      for (size_t i = 0; i < scaleIndex_.size(); ++i)
        dst[i] = src[scaleIndex_[i]];
    }
    try {
      // Mean and variance of each row (the normalized values go to dX, overwritten next).
      stats_.execute(args);
      backward_.execute(args);
      ctx_.stream.wait();
    } catch (const dnnl::error &e) {
      return Status::error(where_, std::string("oneDNN: ") + e.what());
    }
    return Status::ok();
  }

  std::string where_;
  CpuContext &ctx_;
  PrimitiveRunner stats_, backward_;
  dnnl::memory mean_, var_, scaleExpanded_, diffScaleScratch_;
  std::vector<int64_t> scaleIndex_;
  int64_t outer_ = 0, inner_ = 0;
};

} // namespace

// ---------------------------------------------------------------------------------------------

Status checkBatchNormTraining(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkBatchNormLike(spec, 0, 5));
  float momentum = spec.attrFloat("momentum", 0.9f);
  if (!(momentum >= 0.f && momentum <= 1.f))
    return spec.error("momentum must be in [0, 1], got " + std::to_string(momentum));
  int64_t sync = spec.attrInt("sync", 0);
  if (sync != 0 && sync != 1)
    return spec.error("sync must be 0 or 1, got " + std::to_string(sync));
  return Status::ok();
}

Expected<KernelPtr> createBatchNormTraining(const KernelSpec &spec, CpuContext &ctx) {
  return KernelPtr(std::make_unique<BatchNormTrainingKernel>(spec, ctx));
}

Status checkBatchNormGrad(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkBatchNormLike(spec, 1, 3));
  int64_t sync = spec.attrInt("sync", 0);
  if (sync != 0 && sync != 1)
    return spec.error("sync must be 0 or 1, got " + std::to_string(sync));
  return Status::ok();
}

Expected<KernelPtr> createBatchNormGrad(const KernelSpec &spec, CpuContext &ctx) {
  return KernelPtr(std::make_unique<BatchNormGradKernel>(spec, ctx));
}

/// BatchNormGrad reads each element of dY before it writes that element of dX.
int inPlaceBatchNormGrad(const KernelSpec &spec) {
  return checkBatchNormGrad(spec).isOk() ? 0 : -1;
}

Status checkLayerNormGrad(const KernelSpec &spec) {
  if (spec.inputs.size() != 3 || spec.outputs.size() < 2 || spec.outputs.size() > 3)
    return spec.error("expected 3 inputs and 2 to 3 outputs, got " +
                      std::to_string(spec.inputs.size()) + " and " +
                      std::to_string(spec.outputs.size()));
  for (size_t i = 0; i < 3; ++i) {
    if (!spec.inputs[i].present())
      return spec.error("input " + std::to_string(i) + " is required");
    DTC_RETURN_IF_ERROR(checkDType(spec, true, i, {ir::DType::kFloat32}));
  }
  for (size_t i = 0; i < 2; ++i)
    if (!spec.outputs[i].present())
      return spec.error("output " + std::to_string(i) + " is required");
  for (size_t i = 0; i < spec.outputs.size(); ++i)
    if (spec.outputs[i].present())
      DTC_RETURN_IF_ERROR(checkDType(spec, false, i, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  float eps = spec.attrFloat("epsilon", 1e-5f);
  if (!(eps >= 0.0f) || !std::isfinite(eps))
    return spec.error("epsilon must be finite and >= 0, got " + std::to_string(eps));
  const auto &x = spec.inputs[1].shape;
  int64_t rank = static_cast<int64_t>(x.size());
  int64_t axis = spec.attrInt("axis", -1);
  if (rank == 0)
    return spec.error("X is a scalar; LayerNormalization needs rank >= 1");
  if (axis < -rank || axis >= rank)
    return spec.error("axis " + std::to_string(axis) + " is out of range for rank " +
                      std::to_string(rank));
  if (spec.inputs[0].shape != x)
    return spec.error("dY " + shapeStr(spec.inputs[0].shape) + " and X " + shapeStr(x) + " differ");
  NormShape n = normShape(x, axis);
  std::vector<int64_t> b;
  if (!broadcastShapes(n.tail, spec.inputs[2].shape, b) || b != n.tail)
    return spec.error("Scale " + shapeStr(spec.inputs[2].shape) +
                      " does not broadcast to the normalized shape " + shapeStr(n.tail));
  DTC_RETURN_IF_ERROR(checkOutputShape(spec, x));
  for (size_t i = 1; i < spec.outputs.size(); ++i)
    if (spec.outputs[i].present() && spec.outputs[i].shape != n.tail)
      return spec.error("output " + std::to_string(i) + " has shape " +
                        shapeStr(spec.outputs[i].shape) + ", expected " + shapeStr(n.tail));
  return Status::ok();
}

Expected<KernelPtr> createLayerNormGrad(const KernelSpec &spec, CpuContext &ctx) {
  NormShape n = normShape(spec.inputs[1].shape, spec.attrInt("axis", -1));
  auto k = std::make_unique<LayerNormGradKernel>(spec, ctx);
  k->outer_ = n.outer;
  k->inner_ = n.inner;
  if (n.outer == 0 || n.inner == 0)
    return KernelPtr(std::move(k));
  const bool wantB = present(spec.outputs, 2);
  return buildKernel(spec, [&]() -> KernelPtr {
    const float eps = spec.attrFloat("epsilon", 1e-5f);
    dnnl::memory::desc data = plainDesc({n.outer, n.inner});
    dnnl::memory::desc stat = plainDesc({n.outer});
    dnnl::memory::desc param = plainDesc({n.inner});
    k->mean_ = dnnl::memory(stat, ctx.engine);
    k->var_ = dnnl::memory(stat, ctx.engine);

    using LnFwd = dnnl::layer_normalization_forward;
    using LnBwd = dnnl::layer_normalization_backward;
    LnFwd::primitive_desc statsPd(
        LnFwd::desc(dnnl::prop_kind::forward_training, data, stat, eps, F::none), ctx.engine);
    k->stats_ = PrimitiveRunner(LnFwd(statsPd), ctx);
    k->stats_.input(DNNL_ARG_SRC, data, 1);
    k->stats_.output(DNNL_ARG_DST, data, 0); // dX as scratch
    k->stats_.fixed(DNNL_ARG_MEAN, k->mean_);
    k->stats_.fixed(DNNL_ARG_VARIANCE, k->var_);

    const F flags = wantB ? F::use_scale | F::use_shift : F::use_scale;
    LnFwd::primitive_desc hint(
        LnFwd::desc(dnnl::prop_kind::forward_training, data, stat, eps, flags), ctx.engine);
    LnBwd::primitive_desc pd(LnBwd::desc(dnnl::prop_kind::backward, data, data, stat, eps, flags),
                             ctx.engine, hint);
    k->backward_ = PrimitiveRunner(LnBwd(pd), ctx);
    k->backward_.input(DNNL_ARG_DIFF_DST, data, 0);
    k->backward_.input(DNNL_ARG_SRC, data, 1);
    k->backward_.fixed(DNNL_ARG_MEAN, k->mean_);
    k->backward_.fixed(DNNL_ARG_VARIANCE, k->var_);
    // oneDNN 2.6 refuses to run a use_shift backward without a SHIFT argument, which it does
    // not read (dX does not depend on B): the scale stands in for it.
    std::vector<int> scaleArgs = {DNNL_ARG_SCALE};
    if (wantB)
      scaleArgs.push_back(DNNL_ARG_SHIFT);
    if (spec.inputs[2].numElements() != n.inner) {
      k->scaleIndex_ = broadcastIndex(spec.inputs[2].shape, n.tail);
      k->scaleExpanded_ = dnnl::memory(param, ctx.engine);
    }
    for (int arg : scaleArgs) {
      if (k->scaleIndex_.empty())
        k->backward_.input(arg, param, 2);
      else
        k->backward_.fixed(arg, k->scaleExpanded_);
    }
    k->backward_.output(DNNL_ARG_DIFF_SRC, data, 0);
    k->backward_.output(DNNL_ARG_DIFF_SCALE, param, 1);
    if (wantB)
      k->backward_.output(DNNL_ARG_DIFF_SHIFT, param, 2);
    return KernelPtr(std::move(k));
  });
}

} // namespace dtc::ops::cpu
