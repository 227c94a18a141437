// Gradient buckets of data parallelism (passes/DataParallel.cpp), shared by the data-parallel
// pass (buckets in backward, launched where backward completes them) and the optimizer pass
// (with gradient accumulation: the accumulated gradients, once per step).
#pragma once

#include "compiler/ir/Graph.h"
#include "compiler/support/Diagnostics.h"
#include "compiler/support/Status.h"

#include <vector>

namespace dtc::passes {

/// Splits `ready` (gradients in the order they become ready; static shapes) into buckets as
/// PyTorch DDP does (Li et al., VLDB 2020): the first at most min(1 MiB, bucketMb MiB), the
/// others at most bucketMb MiB; a gradient larger than the cap gets a bucket of its own; a
/// bucket holds one dtype and, in a pipeline, one stage's gradients. `kinds` (empty, or one per
/// gradient of `ready`): gradients of different kinds never share a bucket (ZeRO on a
/// tensor-parallel mesh keeps the gradients of split and of replicated parameters apart, so that
/// the gradient-norm clip can count the replicated ones once). Errors: a gradient without a
/// static shape.
Expected<std::vector<std::vector<ir::Value *>>>
bucketGradients(const std::vector<ir::Value *> &ready, float bucketMb,
                const std::vector<int> &kinds = {});

/// Adds ai.dtc.AllReduce(bucket...) {op = "mean", group = "dp", bucket = index} named
/// "dp/bucket<index>/AllReduce" before `before` (appended when null), in `phase`, with output i
/// the reduced value of bucket[i] ("<name>/all-reduced"); infers its types.
Expected<ir::Node *> addBucketAllReduce(ir::Graph &graph, const std::vector<ir::Value *> &bucket,
                                        size_t index, ir::Node *before, ir::Phase phase,
                                        Diagnostics &diags);

/// ZeRO (Rajbhandari et al. 2020): the elements of `values` (static shapes) in total, rounded
/// up to a multiple of `parts` (the flat bucket is zero-padded to it; never truncated).
int64_t paddedBucketSize(const std::vector<ir::Value *> &values, int64_t parts);

/// ZeRO: the flat bucket [padded]: every value of `values` (static shapes, one dtype) reshaped to
/// one dimension and concatenated in order, then zeros up to `padded` elements (>= their total).
/// Nodes named "<prefix>/..." (output "<prefix>") are inserted before `before` (appended when
/// null) in `phase` and the stage of values[0]'s producer; their types are inferred.
Expected<ir::Value *> flattenBucket(ir::Graph &graph, const std::vector<ir::Value *> &values,
                                    int64_t padded, const std::string &prefix, ir::Node *before,
                                    ir::Phase phase, Diagnostics &diags);

/// ZeRO stage 2: flattenBucket(bucket, paddedBucketSize(bucket, parts)) reduced by
/// ai.dtc.ReduceScatter {op = "mean", group = "dp", parts, bucket = index} named
/// "dp/bucket<index>/ReduceScatter": returns this rank's shard f32[padded / parts] (block r for
/// dp rank r of the mean over the group).
Expected<ir::Value *> addBucketReduceScatter(ir::Graph &graph,
                                             const std::vector<ir::Value *> &bucket, size_t index,
                                             int64_t parts, ir::Node *before, ir::Phase phase,
                                             Diagnostics &diags);

} // namespace dtc::passes
