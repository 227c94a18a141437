// Element types, dimensions (static, symbolic or unknown), shapes and tensor types of the IR.
// DType values equal ONNX TensorProto.DataType numbers (onnx.proto3), so conversion is a cast.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtc::ir {

/// Element type; the numbers are ONNX's TensorProto.DataType values.
enum class DType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kBFloat16 = 16,
};

/// Short name used by the printer and messages: f32, i64, bool, ...
const char *dtypeName(DType t);
/// Parses a short name back (f32, i64, ...); nullopt when unknown.
std::optional<DType> dtypeFromName(const std::string &name);
/// True for the DType numbers above (and false for any other ONNX number, e.g. complex).
bool isKnownDType(int32_t onnxNumber);
/// Size of one element in bytes (0 for string and undefined).
int64_t dtypeSize(DType t);
bool isFloat(DType t);
bool isInteger(DType t); ///< signed or unsigned integers, not bool

/// One dimension: a static size, a symbolic size `coeff * s1 * s2 ...` (a monomial over named
/// symbols such as the batch `N`), or unknown. Monomials keep Flatten/Reshape of a symbolic
/// batch exact: [N,3,4] flattened at axis 2 is [3*N,4].
class Dim {
public:
  Dim() = default; ///< unknown
  static Dim fixed(int64_t value) { return Dim(value, {}); }
  static Dim symbol(const std::string &name) { return Dim(1, {name}); }
  static Dim unknown() { return Dim(); }

  bool isUnknown() const { return unknown_; }
  bool isStatic() const { return !unknown_ && symbols_.empty(); }
  bool isSymbolic() const { return !unknown_ && !symbols_.empty(); }
  /// The static size; only valid when isStatic().
  int64_t value() const { return coeff_; }
  int64_t coefficient() const { return coeff_; }
  const std::vector<std::string> &symbols() const { return symbols_; }

  /// Product; unknown if either is unknown; unknown on int64 overflow.
  Dim operator*(const Dim &other) const;
  /// Exact quotient when `other` divides this monomial; nullopt otherwise.
  std::optional<Dim> dividedBy(const Dim &other) const;
  /// Sum; exact for static dims and like monomials (N + N = 2*N), unknown otherwise.
  Dim operator+(const Dim &other) const;

  bool operator==(const Dim &other) const {
    return unknown_ == other.unknown_ && coeff_ == other.coeff_ && symbols_ == other.symbols_;
  }
  bool operator!=(const Dim &other) const { return !(*this == other); }
  /// "3", "N", "2*N", "?".
  std::string str() const;

private:
  Dim(int64_t coeff, std::vector<std::string> symbols);
  bool unknown_ = true;
  int64_t coeff_ = 0;
  std::vector<std::string> symbols_; // sorted
};

/// A shape: a list of dims, or "rank unknown".
class Shape {
public:
  Shape() = default; ///< rank unknown
  explicit Shape(std::vector<Dim> dims) : dims_(std::move(dims)) {}
  static Shape ofStatic(const std::vector<int64_t> &sizes);
  static Shape unknownRank() { return Shape(); }

  bool hasRank() const { return dims_.has_value(); }
  size_t rank() const { return dims_ ? dims_->size() : 0; }
  const std::vector<Dim> &dims() const { return *dims_; }
  std::vector<Dim> &dims() { return *dims_; }
  const Dim &operator[](size_t i) const { return (*dims_)[i]; }
  Dim &operator[](size_t i) { return (*dims_)[i]; }
  /// True when the rank is known and every dim is static.
  bool isStatic() const;
  /// The static sizes; only valid when isStatic().
  std::vector<int64_t> staticSizes() const;
  /// Element count when static; nullopt when not static or when it overflows int64.
  std::optional<int64_t> numElements() const;
  /// Product of all dims as a Dim (symbolic monomial allowed), unknown when rank unknown.
  Dim product() const;
  bool operator==(const Shape &o) const { return dims_ == o.dims_; }
  bool operator!=(const Shape &o) const { return !(*this == o); }
  /// "[N,3,32,32]", "[]" for scalars, "[*]" for unknown rank.
  std::string str() const;

private:
  std::optional<std::vector<Dim>> dims_;
};

/// The type of a tensor value: element type and shape (either may be unknown).
struct TensorType {
  DType dtype = DType::kUndefined;
  Shape shape;
  bool operator==(const TensorType &o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const TensorType &o) const { return !(*this == o); }
  /// "f32[N,10]".
  std::string str() const;
};

/// Multiplies sizes with overflow detection; nullopt on overflow or negative sizes.
std::optional<int64_t> checkedProduct(const std::vector<int64_t> &sizes);

} // namespace dtc::ir
