// Training data for dtc-run --data / --val-data (DESIGN.md section 8): a .npz file with one
// array per data input of the plan (named after the input, or as the plan's data bindings say)
// plus the label; axis 0 counts samples. Batches are gathered in a deterministic per-epoch
// order; the last partial batch of an epoch is dropped.
#pragma once

#include "compiler/plan/Plan.h"
#include "runtime/io/Npy.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dtc::rt {

/// One array of the dataset and the plan input it feeds.
struct DataInput {
  /// Array name in the .npz file.
  std::string array;
  /// Graph input name (the name of the batches made from it).
  std::string input;
  ir::DType dtype = ir::DType::kUndefined;
  /// The plan input's shape: [batch, per-sample dims...].
  std::vector<int64_t> shape;
};

/// The inputs of rank `rank` fed from the dataset: every input binding except the runtime-fed
/// lr/step/rng inputs of plan.training, in binding order. The array name comes from the plan's
/// data_bindings when one names the input, else it is the input's name. Errors: an input
/// without a batch axis.
Expected<std::vector<DataInput>> dataInputsOf(const plan::Plan &plan, int rank = 0);

/// The order samples [0, n) are visited in during `epoch` (0-based). Without shuffling:
/// 0, 1, ..., n-1. With shuffling: a Fisher-Yates shuffle (Knuth, TAOCP vol. 2, 3.4.2,
/// algorithm P) of 0..n-1 driven by std::mt19937_64 seeded with
/// std::seed_seq{lo32(seed), hi32(seed), lo32(epoch), hi32(epoch)}: for i = n-1 down to 1,
/// j = uniform(0..i) drawn by rejection (redraw x while x < 2^64 mod (i+1), j = x mod (i+1)),
/// then swap(order[i], order[j]). Every piece is fully specified by the C++ standard, so the
/// order is the same on every platform and standard library.
std::vector<int64_t> epochOrder(int64_t n, uint64_t seed, int64_t epoch, bool shuffle);

class Dataset {
public:
  /// Reads `path` and checks it against `inputs`: every array present (else an error listing
  /// the file's arrays), at least one dimension, the same sample count in every array (else an
  /// error naming each array and its count), per-sample shape and dtype equal to the input's
  /// (an error naming the array, expected vs got). Integer arrays may be int32 or int64 for an
  /// int32 or int64 input and are converted (a value out of int32's range is an error). Arrays
  /// of the file that feed no input are ignored. Errors are "<path>: array 'x': ...".
  static Expected<Dataset> load(const std::string &path, const std::vector<DataInput> &inputs);

  int64_t samples() const { return samples_; }
  const std::string &path() const { return path_; }
  const std::vector<DataInput> &inputs() const { return inputs_; }

  /// The batch made of samples order[first], ..., order[first + B - 1] (B = the inputs' batch
  /// size): one array per input, named after the input, with the input's shape. `first + B`
  /// must not exceed order.size().
  std::vector<HostArray> batch(const std::vector<int64_t> &order, int64_t first) const;

  /// A 64-bit FNV-1a hash of the sample count, the arrays' names and shapes and the bytes of up
  /// to 256 evenly spaced samples of every array: cheap on any size, enough for data-parallel
  /// ranks to notice that they opened different files.
  uint64_t fingerprint() const;

  /// The name of the first f32 or f64 array holding a NaN or an infinity, or "" when every value
  /// is finite (a full scan: for error messages, not for every step).
  std::string nonFiniteArray() const;

private:
  std::string path_;
  std::vector<DataInput> inputs_;
  std::vector<HostArray> arrays_; // same order as inputs_, already in the input's dtype
  int64_t samples_ = 0;
};

} // namespace dtc::rt
