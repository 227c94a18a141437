// The cost facet of an operator (DESIGN.md sections 4 and 6a): FLOPs, bytes read and bytes
// written by one node whose input and output shapes are static, for roofline estimates, the
// balancing of pipeline stages and the `auto` strategy. Each op file sets OpDef::cost to one of
// the shared helpers below or to its own formula; nodeCost / graphCost look the op up and sum.
#pragma once

#include "compiler/ir/Graph.h"
#include "compiler/support/Status.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dtc::ops {

/// The cost of one node (or a sum over nodes). Units:
///  - flops: arithmetic operations on elements, float or integer, a multiply-add counting 2
///    (the roofline convention: Williams, Waterman, Patterson, "Roofline", CACM 2009). An
///    elementwise op counts 1 per output element, transcendental ones (Exp, Log, Erf, Tanh,
///    Sigmoid, Sqrt, Gelu, ...) included; comparisons and selections count 1; pure data
///    movement (copies, transposes, gathers, casts) counts 0.
///  - bytesRead: the bytes (elements * ir::dtypeSize) of every present input, read once in full
///    (an upper bound for Slice/Gather, which touch only part of their data);
///  - bytesWritten: the bytes of every present output.
/// Exceptions, each documented where it is set: views (Reshape, Flatten, Squeeze, Unsqueeze,
/// Identity) alias their input and cost 0 bytes; Shape reads no tensor data; ZeroGradient does
/// not read its inputs. Doubles: exact for integer counts below 2^53, no overflow on big models.
struct Cost {
  double flops = 0;
  double bytesRead = 0;
  double bytesWritten = 0;

  double bytes() const { return bytesRead + bytesWritten; }
  /// FLOPs per byte moved (the roofline's arithmetic intensity); 0 when no bytes move.
  double intensity() const { return bytes() > 0 ? flops / bytes() : 0; }
  Cost &operator+=(const Cost &o) {
    flops += o.flops;
    bytesRead += o.bytesRead;
    bytesWritten += o.bytesWritten;
    return *this;
  }
  bool operator==(const Cost &o) const = default;
};

/// What a cost function sees: a node whose present inputs and outputs all have a known dtype
/// and a static shape (checked by make()), with their sizes.
class CostContext {
public:
  /// Checks that every present input and output of `node` has a static shape and a known dtype;
  /// otherwise an error naming the node and the value ("cost needs static shapes: input 0 'x'
  /// has type f32[N,3]").
  static Expected<CostContext> make(const ir::Node &node);

  const ir::Node &node() const { return *node_; }
  size_t numInputs() const { return node_->numInputs(); }
  size_t numOutputs() const { return node_->numOutputs(); }
  bool hasInput(size_t i) const { return node_->input(i) != nullptr; }
  bool hasOutput(size_t i) const { return node_->output(i) != nullptr; }
  /// Static sizes of input / output i; empty for an omitted one (check hasInput) or a scalar.
  const std::vector<int64_t> &inputDims(size_t i) const;
  const std::vector<int64_t> &outputDims(size_t i) const;
  /// Element counts (0 for an omitted value, 1 for a scalar).
  double inputElements(size_t i) const;
  double outputElements(size_t i) const;
  /// Bytes of input / output i (0 when omitted).
  double inputBytes(size_t i) const;
  double outputBytes(size_t i) const;
  /// Sums over every present input / output.
  double totalInputBytes() const;
  double totalOutputBytes() const;
  /// {flops, totalInputBytes(), totalOutputBytes()}: the cost of an op that reads every input
  /// and writes every output once.
  Cost withFlops(double flops) const { return {flops, totalInputBytes(), totalOutputBytes()}; }
  /// "node 'x' (Op): cost: <what>".
  Status error(const std::string &what) const;

private:
  explicit CostContext(const ir::Node &node) : node_(&node) {}
  const ir::Node *node_;
  std::vector<std::vector<int64_t>> inputDims_, outputDims_;
};

/// The cost facet: returns the node's cost, or an error naming the node (a malformed node).
using CostFn = std::function<Expected<Cost>(const CostContext &)>;

// Shared cost functions for the op files to opt into.

/// Elementwise ops (unary, binary with broadcasting, Where, activations): `flopsPerElement`
/// per element of output 0; bytes of all inputs (before broadcasting) and outputs.
CostFn elementwiseCost(double flopsPerElement = 1);
/// Data movement (Transpose, Concat, Split, Slice, Gather, Expand, Pad, Tile, Cast, copies and
/// collectives): 0 FLOPs, every input read and every output written.
CostFn dataMovementCost();
/// Views (Reshape, Flatten, Squeeze, Unsqueeze, Identity): the output aliases input 0 (the CPU
/// and CUDA targets run them as views, ops/cpu isViewOp), so 0 FLOPs and 0 bytes.
CostFn viewCost();
/// Ops that write their outputs without reading tensor data (Shape reads only metadata,
/// ZeroGradient overwrites): 0 FLOPs, 0 bytes read, the outputs' bytes written.
CostFn writeOnlyCost();
/// Reductions over input 0 (ReduceSum, ReduceMax, SumSquares-like): `flopsPerInputElement` per
/// element of input 0 plus `flopsPerOutputElement` per element of output 0 (ReduceMean's
/// divide). A reduction of n elements to one takes n - 1 adds; counted as n (the accumulator
/// starts at the identity), as usual.
CostFn reductionCost(double flopsPerInputElement = 1, double flopsPerOutputElement = 0);

/// Convolution FLOPs (roofline convention; e.g. the Conv row of fvcore's and ptflops' counters):
///   2 * N * Cout * prod(out spatial) * (Cin / group) * prod(kernel)
/// given N * Cout * prod(out spatial) = `outputElements` and Cin / group * prod(kernel) =
/// `weightElements / Cout` (W is [Cout, Cin/group, k1..kn]).
double convFlops(double outputElements, const std::vector<int64_t> &weightDims);

/// The cost of one node: looks up its op (ops/Ops.def) and calls the op's cost facet. Errors
/// name the node: an unregistered op, an op without a cost facet, a shape that is not static
/// (symbolic or unknown dims are not guessed: bind the dims first), an unknown dtype.
Expected<Cost> nodeCost(const ir::Node &node);
/// The sum of nodeCost over every node of `graph`; the first error is returned.
Expected<Cost> graphCost(const ir::Graph &graph);

} // namespace dtc::ops
