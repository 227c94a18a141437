// Constant tensor contents (initializers, Constant values, tensor attributes). Bytes are either
// held in memory or live in an external-data file that is read only when first needed, so
// compiling a model does not read its weights (DESIGN.md section 3).
#pragma once

#include "compiler/ir/Types.h"
#include "compiler/support/Status.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace dtc::ir {

/// Immutable tensor contents, shared between values and attributes. Layout: dense, row-major,
/// little-endian, `dtypeSize(dtype)` bytes per element (bool: one byte, 0 or 1).
class TensorData {
public:
  /// In-memory contents; `bytes.size()` must equal numElements * dtypeSize (checked by callers
  /// through `validate()`).
  static std::shared_ptr<TensorData> fromBytes(std::string name, DType dtype,
                                               std::vector<int64_t> dims, std::string bytes);
  /// Contents in `path` (absolute, already checked against escapes) at [offset, offset+length).
  static std::shared_ptr<TensorData> fromExternal(std::string name, DType dtype,
                                                  std::vector<int64_t> dims, std::string path,
                                                  int64_t offset, int64_t length);
  /// All-zero contents that hold no memory until bytes() is first called (optimizer state:
  /// the runtime zero-fills its buffers, so a training compile never materializes them).
  static std::shared_ptr<TensorData> zeros(std::string name, DType dtype,
                                           std::vector<int64_t> dims);
  /// Small helpers for passes that create constants.
  static std::shared_ptr<TensorData> fromInt64s(std::string name, std::vector<int64_t> dims,
                                                const std::vector<int64_t> &values);
  static std::shared_ptr<TensorData> fromFloats(std::string name, std::vector<int64_t> dims,
                                                const std::vector<float> &values);

  const std::string &name() const { return name_; }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t> &dims() const { return dims_; }
  int64_t numElements() const { return numElements_; }
  int64_t byteSize() const { return numElements_ * dtypeSize(dtype_); }

  bool isExternal() const { return !externalPath_.empty(); }
  /// Made by zeros(): every byte is 0.
  bool isZeros() const { return zeros_; }
  bool isLoaded() const;
  const std::string &externalPath() const { return externalPath_; }
  int64_t externalOffset() const { return externalOffset_; }

  /// The raw bytes (byteSize() of them). Reads the external file on first use; errors name the
  /// tensor and the file (missing file, range past its end).
  Expected<const std::string *> bytes() const;
  /// Element values widened to int64 (integer and bool dtypes) or double (float dtypes);
  /// errors for other dtypes. Meant for small constants (shapes, axes).
  Expected<std::vector<int64_t>> toInt64s() const;
  Expected<std::vector<double>> toDoubles() const;

private:
  TensorData() = default;
  std::string name_;
  DType dtype_ = DType::kUndefined;
  std::vector<int64_t> dims_;
  int64_t numElements_ = 0;
  std::string externalPath_;
  int64_t externalOffset_ = 0;
  int64_t externalLength_ = 0;
  mutable std::mutex mutex_;
  mutable std::string bytes_;
  mutable bool loaded_ = false;
  bool zeros_ = false;
};

using TensorDataPtr = std::shared_ptr<const TensorData>;

} // namespace dtc::ir
