// Shared pieces of the per-sample normalizations InstanceNormalization and GroupNormalization:
// shape inference of X (N, C, D1..Dn) with per-channel scale and bias, their gradient rule (one
// ai.dtc.GroupNormGrad node; an instance normalization is a group normalization with one channel
// per group) and their cost.
#pragma once

#include "ops/OpDef.h"

namespace dtc::ops::nn {

/// Checks X (input 0, rank >= 2) and inputs 1 and 2 (scale, bias: [C], C = X.shape[1]) and sets
/// output 0 to X's shape. Returns C (unknown when neither X nor scale/bias tells it).
Expected<ir::Dim> inferChannelNorm(InferenceContext &ctx);

/// The `stash_type` attribute (GroupNormalization-21): a float type (1, 10, 11 or 16). The CPU
/// kernel computes statistics in double whatever it says.
Status checkStashType(InferenceContext &ctx);

/// The gradient rule: dX, dscale and dbias (those asked for) from one
/// ai.dtc.GroupNormGrad(dY, X, scale) with `groups` groups and the node's epsilon.
Status emitGroupNormGrad(GradientContext &ctx, int64_t groups);

/// FLOPs per element of X: 1 for the mean, 3 for the variance (subtract, square, add), 2 to
/// normalize (subtract, multiply by the inverse standard deviation), 2 for scale and bias; per
/// (sample, group): 2 divides and 3 for 1 / sqrt(var + epsilon). The group count is
/// num_groups, or C for InstanceNormalization (no num_groups attribute).
Expected<Cost> groupNormCost(const CostContext &ctx);

} // namespace dtc::ops::nn
