// NaN propagation for the CPU kernels whose oneDNN primitives lose NaN (measured on oneDNN 2.6:
// relu with alpha 0 gives 0, exp gives +inf, max pooling skips it, softmax gives 0 for the rest
// of a row holding one, reduction_max skips it): NaN in an input gives NaN in the outputs it
// reaches, as in the ONNX reference (numpy), onnxruntime and PyTorch. Relu is a hand loop that
// keeps NaN at no extra cost; the others scan for NaN (a branch-free loop split over OpenMP
// threads, one read of the input) and do their fix-up only when there is one. Built with
// OpenMP (DTC_CPU_OPENMP_SOURCES).
#pragma once

#include "ops/cpu/OneDnnUtil.h"

#include <cstdint>
#include <vector>

namespace dtc::ops::cpu {

/// True when any of the `n` floats at `p` is NaN.
bool anyNan(const float *p, int64_t n);

/// True when any of the `n` floats at `p` is NaN or an infinity.
bool anyNonFinite(const float *p, int64_t n);

/// y[i] = x[i] < 0 ? 0 : x[i] for i < n (Relu keeping NaN: NaN < 0 is false); x == y allowed.
/// Vectorized (maxps(0, x) returns x when x is NaN) and split over OpenMP threads.
void reluKeepNan(const float *x, float *y, int64_t n);

/// Sets out[i] = NaN wherever flag[i] != 0, for i < n.
void setNanWhere(float *out, const float *flag, int64_t n);

/// Wraps an elementwise f32 kernel (output 0 element i depends on element i of input 0 only,
/// with output 0's element count `n` and layout) so that output element i is NaN wherever
/// input 0 is NaN. The input is scanned before the inner kernel runs, so the wrapped kernel may
/// run in place; the positions are collected only when the scan finds a NaN.
KernelPtr propagateNanElementwise(KernelPtr inner, int64_t n);

/// Wraps a kernel that normalizes rows of input 0 (row-major, viewed as [outer, len, inner]; a
/// row is the `len` elements at fixed (outer, inner), stride `inner`): Softmax, LogSoftmax. A row
/// holding a NaN or +inf becomes all NaN in output 0 (the reference computes exp(x - max) and
/// the sum over the row, both NaN: inf - inf is NaN; torch.softmax agrees). -inf (a mask) is an
/// ordinary value. Scans before the inner kernel runs (safe in place).
KernelPtr propagateNanRows(KernelPtr inner, int64_t outer, int64_t len, int64_t innerSize);

} // namespace dtc::ops::cpu
