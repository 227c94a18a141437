// CPU kernels of SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss (forward only; hand loops
// over (N, C, D) with D = d1 * ... * dk). Semantics of onnx/reference/ops/op_softmax_cross_
// entropy_loss.py and op_negative_log_likelihood_loss.py: per-sample loss -w[label] * logp[label],
// 0 for labels equal to ignore_index; "mean" divides by the sum of the applied weights. Also
// ai.dtc.CheckLabels (the vocabulary-parallel loss's label check), with the same error.
#include "ops/cpu/OneDnnUtil.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace dtc::ops::cpu {

namespace {

/// The error for a label outside [0, C) at sample n (the index along axis 0).
Status labelRangeError(const std::string &where, int64_t label, int64_t n, int64_t c,
                       bool hasIgnore) {
  return Status::error(where, "label " + std::to_string(label) + " at sample " + std::to_string(n) +
                                  " is out of range [0, " + std::to_string(c) + ")" +
                                  (hasIgnore ? " and is not ignore_index" : ""));
}

class LossKernel : public Kernel {
public:
  explicit LossKernel(const KernelSpec &spec)
      : where_(spec.where()), softmax_(spec.op == "SoftmaxCrossEntropyLoss"),
        reduction_(spec.attrString("reduction", "mean")),
        hasIgnore_(spec.attrs.count("ignore_index") > 0), ignore_(spec.attrInt("ignore_index", 0)),
        labels32_(spec.inputs[1].dtype == ir::DType::kInt32),
        hasWeights_(spec.inputs.size() == 3 && spec.inputs[2].present()) {
    const auto &s = spec.inputs[0].shape;
    n_ = s[0];
    c_ = s[1];
    for (size_t i = 2; i < s.size(); ++i)
      d_ *= s[i];
    if (softmax_)
      rowLogp_.resize(static_cast<size_t>(c_));
  }

  Status run(const KernelArgs &args) override {
    const float *x = static_cast<const float *>(args.inputs[0]);
    const float *w = hasWeights_ ? static_cast<const float *>(args.inputs[2]) : nullptr;
    float *loss = static_cast<float *>(args.outputs[0]);
    float *logProb = args.numOutputs > 1 ? static_cast<float *>(args.outputs[1]) : nullptr;
    double sum = 0.0, weightSum = 0.0;
    for (int64_t n = 0; n < n_; ++n)
      for (int64_t j = 0; j < d_; ++j) {
        const float *col = x + n * c_ * d_ + j; // class c at col[c * d_]
        const float *lp = col;
        int64_t step = d_;
        if (softmax_) {
          // Numerically stable log-softmax over the class axis.
          float mx = -std::numeric_limits<float>::infinity();
          for (int64_t c = 0; c < c_; ++c)
            mx = std::max(mx, col[c * d_]);
          double se = 0.0;
          for (int64_t c = 0; c < c_; ++c)
            se += std::exp(static_cast<double>(col[c * d_]) - mx);
          double lse = static_cast<double>(mx) + std::log(se);
          for (int64_t c = 0; c < c_; ++c) {
            float v = static_cast<float>(static_cast<double>(col[c * d_]) - lse);
            rowLogp_[static_cast<size_t>(c)] = v;
            if (logProb)
              logProb[n * c_ * d_ + c * d_ + j] = v;
          }
          lp = rowLogp_.data();
          step = 1;
        }
        int64_t i = n * d_ + j;
        int64_t label = labels32_ ? static_cast<const int32_t *>(args.inputs[1])[i]
                                  : static_cast<const int64_t *>(args.inputs[1])[i];
        double l = 0.0, wt = 0.0;
        if (!(hasIgnore_ && label == ignore_)) {
          if (label < 0 || label >= c_)
            return labelRangeError(where_, label, n, c_, hasIgnore_);
          wt = w ? w[label] : 1.0;
          l = -wt * static_cast<double>(lp[label * step]);
        }
        if (reduction_ == "none")
          loss[i] = static_cast<float>(l);
        sum += l;
        weightSum += wt;
      }
    if (reduction_ == "sum")
      loss[0] = static_cast<float>(sum);
    else if (reduction_ == "mean")
      loss[0] = static_cast<float>(sum / weightSum); // 0/0 (all ignored) is NaN, as in ONNX
    return Status::ok();
  }

private:
  std::string where_;
  bool softmax_;
  std::string reduction_;
  bool hasIgnore_;
  int64_t ignore_;
  bool labels32_, hasWeights_;
  int64_t n_ = 0, c_ = 0, d_ = 1;
  std::vector<float> rowLogp_;
};

/// CheckLabels: labels (N, d1..dk) against [0, classes) except ignore_index; the output is a
/// view of the input (copied only when the planner did not alias them).
class CheckLabelsKernel : public Kernel {
public:
  explicit CheckLabelsKernel(const KernelSpec &spec)
      : where_(spec.where()), classes_(spec.attrInt("classes", 0)),
        hasIgnore_(spec.attrs.count("ignore_index") > 0), ignore_(spec.attrInt("ignore_index", 0)),
        labels32_(spec.inputs[0].dtype == ir::DType::kInt32), count_(spec.inputs[0].numElements()),
        bytes_(static_cast<size_t>(spec.inputs[0].byteSize())) {
    const auto &s = spec.inputs[0].shape;
    perSample_ = s.empty() || s[0] == 0 ? 1 : count_ / s[0];
  }

  Status run(const KernelArgs &args) override {
    for (int64_t i = 0; i < count_; ++i) {
      const int64_t label = labels32_ ? static_cast<const int32_t *>(args.inputs[0])[i]
                                      : static_cast<const int64_t *>(args.inputs[0])[i];
      if ((label < 0 || label >= classes_) && !(hasIgnore_ && label == ignore_))
        return labelRangeError(where_, label, i / perSample_, classes_, hasIgnore_);
    }
    if (args.outputs[0] != args.inputs[0])
      std::memmove(args.outputs[0], args.inputs[0], bytes_);
    return Status::ok();
  }

private:
  std::string where_;
  int64_t classes_;
  bool hasIgnore_;
  int64_t ignore_;
  bool labels32_;
  int64_t count_, perSample_ = 1;
  size_t bytes_;
};

} // namespace

Status checkCheckLabels(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kInt64, ir::DType::kInt32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {spec.inputs[0].dtype}));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  DTC_RETURN_IF_ERROR(checkOutputShape(spec, spec.inputs[0].shape));
  if (spec.attrInt("classes", 0) < 1)
    return spec.error("classes " + std::to_string(spec.attrInt("classes", 0)) + " is not positive");
  return Status::ok();
}

Expected<KernelPtr> createCheckLabels(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<CheckLabelsKernel>(spec));
}

Status checkLoss(const KernelSpec &spec) {
  bool softmax = spec.op == "SoftmaxCrossEntropyLoss";
  size_t maxOut = softmax ? 2 : 1;
  if (spec.inputs.size() < 2 || spec.inputs.size() > 3 || spec.outputs.empty() ||
      spec.outputs.size() > maxOut)
    return spec.error("expected 2 to 3 inputs and 1 to " + std::to_string(maxOut) +
                      " outputs, got " + std::to_string(spec.inputs.size()) + " and " +
                      std::to_string(spec.outputs.size()));
  if (!spec.inputs[0].present() || !spec.inputs[1].present() || !spec.outputs[0].present())
    return spec.error("inputs 0 and 1 and output 0 are required");
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, {ir::DType::kInt64, ir::DType::kInt32}));
  if (spec.inputs.size() == 3 && spec.inputs[2].present())
    DTC_RETURN_IF_ERROR(checkDType(spec, true, 2, {ir::DType::kFloat32}));
  for (size_t i = 0; i < spec.outputs.size(); ++i)
    if (spec.outputs[i].present())
      DTC_RETURN_IF_ERROR(checkDType(spec, false, i, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  std::string reduction = spec.attrString("reduction", "mean");
  if (reduction != "none" && reduction != "mean" && reduction != "sum")
    return spec.error("reduction must be none, mean or sum, got '" + reduction + "'");
  const auto &s = spec.inputs[0].shape, &l = spec.inputs[1].shape;
  if (s.size() < 2)
    return spec.error("input 0 must have shape (N, C, d1..dk), got " + shapeStr(s));
  std::vector<int64_t> perSample = s;
  perSample.erase(perSample.begin() + 1);
  if (l != perSample)
    return spec.error("labels " + shapeStr(l) + " must have shape " + shapeStr(perSample));
  if (spec.inputs.size() == 3 && spec.inputs[2].present() &&
      spec.inputs[2].shape != std::vector<int64_t>{s[1]})
    return spec.error("weights " + shapeStr(spec.inputs[2].shape) + " must have shape [" +
                      std::to_string(s[1]) + "]");
  DTC_RETURN_IF_ERROR(
      checkOutputShape(spec, reduction == "none" ? perSample : std::vector<int64_t>{}));
  if (spec.outputs.size() == 2 && spec.outputs[1].present() && spec.outputs[1].shape != s)
    return spec.error("output 1 (log_prob) has shape " + shapeStr(spec.outputs[1].shape) +
                      ", expected " + shapeStr(s));
  return Status::ok();
}

Expected<KernelPtr> createLoss(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<LossKernel>(spec));
}

} // namespace dtc::ops::cpu
