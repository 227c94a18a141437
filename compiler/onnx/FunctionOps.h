// Import-time expansion of the opset-23 function operators RMSNormalization, RotaryEmbedding
// and Attention into the primitive operators they are defined by (issue 12). dtc has no kernel,
// gradient, cost or sharding rule of its own for them: after expansion they are ordinary
// MatMul/Softmax/ReduceMean/... nodes, which every later pass already handles.
#pragma once

#include "compiler/support/Status.h"

#include <cstdint>

namespace onnx {
class GraphProto;
}

namespace dtc::onnxio {

/// Replaces, in place and in node-list order, every ai.onnx RMSNormalization, RotaryEmbedding
/// and Attention node of an opset >= 23 `graph` by primitive ai.onnx nodes written in their
/// opset-23 forms (ReduceMean axes as an input, ...). Generated names start with the node's name.
///
///  - RMSNormalization(X, scale; axis = -1, epsilon = 1e-5, stash_type = 1):
///    Y = CastLike(Xs / Sqrt(ReduceMean(Xs * Xs, [axis..-1]) + epsilon), X) * scale with
///    Xs = Cast(X, stash_type) (no casts when X's declared type is the stash type). A
///    non-negative axis needs X's rank.
///  - RotaryEmbedding(X, cos_cache, sin_cache[, position_ids]; interleaved, num_heads,
///    rotary_embedding_dim): X is (B, heads, S, H), or (B, S, heads * H) with num_heads; the
///    first rotary_embedding_dim (default H) features of each head are rotated, in halves or
///    interleaved pairs, by the caches (gathered at position_ids when given). X's rank is the
///    declared one, else 4 when num_heads is absent; rotary_embedding_dim needs H declared.
///  - Attention(Q, K, V[, attn_mask, past_key, past_value]; is_causal, q_num_heads,
///    kv_num_heads, scale, softcap, softmax_precision, qk_matmul_output_mode) -> Y[,
///    present_key, present_value, qk_matmul_output]: 3-D inputs are split into heads; past
///    keys/values are concatenated in front (present_*); K/V heads are repeated for grouped-query
///    attention; Q and K are each scaled by sqrt(scale) (default scale 1/sqrt(head size));
///    softcap c gives c * tanh(QK / c); a bool mask adds 0 / -inf, a float mask adds itself;
///    is_causal adds -inf where key j > query i + past length; a query row masked everywhere
///    gives zeros (the opset-23 errata), not NaN. The rank of Q/K/V is the declared one, else
///    3 when q_num_heads/kv_num_heads are given and 4 otherwise; head counts and sizes not
///    declared are read with Shape at run time (canonicalize folds them once shapes are known).
///    A mask shorter than the keys is padded with -inf when the lengths are declared.
/// What cannot be expanded (an undeclared rank or head size for RotaryEmbedding, an attribute
/// value outside the spec, an integer or undeclared attention mask type) is an error naming
/// the node and the input or attribute.
Status expandFunctionOps(onnx::GraphProto &graph, int64_t opset);

} // namespace dtc::onnxio
