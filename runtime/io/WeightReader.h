// The runtime's weight reader (issue 15): a model's initializers by name, read lazily and only
// in the part a rank needs (a tensor-parallel shard, a parameter server's rows), from raw_data,
// the typed fields or external data files, without importing the model into a graph.
#pragma once

#include "compiler/ir/Sharding.h"
#include "compiler/ir/Types.h"
#include "compiler/support/Status.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
}

namespace dtc::rt {

/// A part of a tensor along one axis: the axis is `blocks` equal blocks laid end to end, and the
/// part is elements [offset, offset + length) of every block, the blocks' parts laid end to end
/// (a fused Q/K/V weight is 3 blocks; tensor-parallel rank r of T takes offset r * n / (3T),
/// length n / (3T) of each). The part's dims are the whole dims with that axis blocks * length.
/// ir::sliceShard's rank `index` of an even split in `parts` is
/// {axis, index * (n / blocks / parts), n / blocks / parts, blocks}.
struct WeightSlice {
  int64_t axis = 0;
  int64_t offset = 0;
  int64_t length = 0;
  int64_t blocks = 1;

  /// Tensor-parallel rank `index`'s slice of an axis of `size` elements split into `parts`
  /// (as ir::sliceShard slices): of `blocks` equal blocks, part `index` of each; unblocked, the
  /// rows ir::splitRange gives rank `index`, so an axis that does not divide is split unevenly
  /// (numpy.array_split: the first size % parts ranks hold one more).
  static WeightSlice tensorParallel(int64_t axis, int64_t size, int64_t parts, int64_t blocks,
                                    int64_t index) {
    if (blocks == 1) {
      const ir::SplitRange r = ir::splitRange(size, parts, index);
      return {axis, r.first, r.length, 1};
    }
    const int64_t part = size / blocks / parts;
    return {axis, index * part, part, blocks};
  }
};

/// What to read: initializer `name`, which must have element type `dtype` and dims `shape` in
/// the model (the whole tensor's), and optionally only a slice of it.
struct WeightRequest {
  std::string name;
  ir::DType dtype = ir::DType::kUndefined;
  std::vector<int64_t> shape;
  std::optional<WeightSlice> slice;
};

/// An initializer's element type and dims.
struct WeightInfo {
  ir::DType dtype = ir::DType::kUndefined;
  std::vector<int64_t> dims;
};

/// Reads initializers from one ONNX model (binary or text, compiler/onnx/ModelFile.h). The file
/// is parsed once at open() (raw_data stays in the parsed message; nothing is converted); each
/// read() checks only the tensor it asks for, with the importer's checks and errors
/// (compiler/onnx/TensorImport.h: data fields and sizes, external data locations that are
/// absolute or escape the model's folder, missing files, ranges past the end), and returns only
/// the bytes of the requested part: a memcpy out of raw_data, the requested elements of a typed
/// field, or pread of just the needed ranges of an external data file (a slice along axis 0 is
/// one range, a slice along a later axis one range per row of the axes before it; nearby ranges
/// are read together). Bytes are ONNX's: dense, row-major, little-endian. Not thread-safe.
class WeightReader {
public:
  struct Options {
    /// Redo --untie-initializers on the model (compiler/onnx/UntieInitializers.h), so the
    /// copies "<name>.untied.<k>" a plan compiled with it names can be read.
    bool untieInitializers = false;
  };

  /// Opens and parses the model at `path`. Errors: the model file's (unreadable, not a
  /// model), an initializer without a name, two initializers with one name.
  static Expected<std::unique_ptr<WeightReader>> open(const std::string &path,
                                                      const Options &options);
  static Expected<std::unique_ptr<WeightReader>> open(const std::string &path) {
    return open(path, Options{});
  }
  ~WeightReader();
  WeightReader(const WeightReader &) = delete;
  WeightReader &operator=(const WeightReader &) = delete;

  const std::string &path() const { return path_; }
  /// Whether the main graph has an initializer `name`.
  bool has(const std::string &name) const { return index_.count(name) != 0; }
  /// Number of initializers of the main graph (untied copies included).
  size_t size() const { return index_.size(); }

  /// The element type and dims of initializer `name` (its storage checked as read() checks it).
  Expected<WeightInfo> info(const std::string &name) const;

  /// The bytes of the requested tensor or slice (dtypeSize(dtype) per element). Errors are
  /// "<model path>: initializer '<name>': <what>" (not found; a dtype or shape other than the
  /// model's; a slice outside the tensor) or "<model path>: tensor '<name>': <what>" for the
  /// importer's storage checks, and name the external data file when reading it fails (a file
  /// truncated since the checks, an I/O error).
  Expected<std::string> read(const WeightRequest &request) const;
  /// The same into `out`, which must hold exactly the requested bytes (`outBytes`).
  Status readInto(const WeightRequest &request, char *out, uint64_t outBytes) const;

  /// Bytes read from external data files so far (what laziness saves, for tests and reports).
  uint64_t externalBytesRead() const { return externalBytesRead_; }

private:
  WeightReader() = default;
  Expected<int> fileDescriptor(const std::string &absolutePath) const;

  std::string path_;
  std::string modelDir_;
  std::unique_ptr<onnx::ModelProto> model_;
  std::map<std::string, int> index_; ///< name -> index in graph.initializer
  /// External data files already resolved (onnxio::ExternalFileCache) and opened.
  mutable std::map<std::string, std::pair<std::string, int64_t>> externalFiles_;
  mutable std::map<std::string, int> descriptors_;
  mutable uint64_t externalBytesRead_ = 0;
};

} // namespace dtc::rt
