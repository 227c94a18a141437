// Element types, symbolic dimensions and shapes.
#include "compiler/ir/Types.h"

#include <algorithm>
#include <cctype>

namespace dtc::ir {

const char *dtypeName(DType t) {
  switch (t) {
  case DType::kUndefined: return "undef";
  case DType::kFloat32: return "f32";
  case DType::kUInt8: return "u8";
  case DType::kInt8: return "i8";
  case DType::kUInt16: return "u16";
  case DType::kInt16: return "i16";
  case DType::kInt32: return "i32";
  case DType::kInt64: return "i64";
  case DType::kString: return "string";
  case DType::kBool: return "bool";
  case DType::kFloat16: return "f16";
  case DType::kFloat64: return "f64";
  case DType::kUInt32: return "u32";
  case DType::kUInt64: return "u64";
  case DType::kBFloat16: return "bf16";
  }
  return "undef";
}

bool isKnownDType(int32_t n) { return (n >= 0 && n <= 13) || n == 16; }

std::optional<DType> dtypeFromName(const std::string &name) {
  for (int32_t n = 0; n <= 16; ++n)
    if (isKnownDType(n) && name == dtypeName(static_cast<DType>(n)))
      return static_cast<DType>(n);
  return std::nullopt;
}

int64_t dtypeSize(DType t) {
  switch (t) {
  case DType::kFloat32: case DType::kInt32: case DType::kUInt32: return 4;
  case DType::kUInt8: case DType::kInt8: case DType::kBool: return 1;
  case DType::kUInt16: case DType::kInt16: case DType::kFloat16: case DType::kBFloat16: return 2;
  case DType::kInt64: case DType::kFloat64: case DType::kUInt64: return 8;
  case DType::kString: case DType::kUndefined: return 0;
  }
  return 0;
}

bool isFloat(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kFloat64 ||
         t == DType::kBFloat16;
}

bool isInteger(DType t) {
  switch (t) {
  case DType::kUInt8: case DType::kInt8: case DType::kUInt16: case DType::kInt16:
  case DType::kInt32: case DType::kInt64: case DType::kUInt32: case DType::kUInt64: return true;
  default: return false;
  }
}

Dim::Dim(int64_t coeff, std::vector<std::string> symbols)
    : unknown_(false), coeff_(coeff), symbols_(std::move(symbols)) {
  std::sort(symbols_.begin(), symbols_.end());
}

Dim Dim::operator*(const Dim &o) const {
  if (unknown_ || o.unknown_)
    return Dim();
  int64_t c;
  if (__builtin_mul_overflow(coeff_, o.coeff_, &c))
    return Dim();
  if (c == 0)
    return Dim::fixed(0);
  std::vector<std::string> s = symbols_;
  s.insert(s.end(), o.symbols_.begin(), o.symbols_.end());
  return Dim(c, std::move(s));
}

std::optional<Dim> Dim::dividedBy(const Dim &o) const {
  if (unknown_ || o.unknown_ || o.coeff_ == 0 || coeff_ % o.coeff_ != 0)
    return std::nullopt;
  std::vector<std::string> s = symbols_;
  for (const std::string &sym : o.symbols_) {
    auto it = std::find(s.begin(), s.end(), sym);
    if (it == s.end())
      return std::nullopt;
    s.erase(it);
  }
  return Dim(coeff_ / o.coeff_, std::move(s));
}

Dim Dim::operator+(const Dim &o) const {
  if (unknown_ || o.unknown_ || symbols_ != o.symbols_)
    return Dim();
  int64_t c;
  if (__builtin_add_overflow(coeff_, o.coeff_, &c))
    return Dim();
  return Dim(c, symbols_);
}

std::string Dim::str() const {
  if (unknown_)
    return "?";
  if (symbols_.empty())
    return std::to_string(coeff_);
  std::string out = coeff_ == 1 ? "" : std::to_string(coeff_) + "*";
  for (size_t i = 0; i < symbols_.size(); ++i) {
    out += i ? "*" : "";
    // Symbols come from dim_param strings: keep the printed shape on one line and parseable.
    for (char c : symbols_[i])
      out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' ||
              c == ':' || c == '/')
                 ? c
                 : '_';
  }
  return out;
}

Shape Shape::ofStatic(const std::vector<int64_t> &sizes) {
  std::vector<Dim> dims;
  for (int64_t s : sizes)
    dims.push_back(Dim::fixed(s));
  return Shape(std::move(dims));
}

bool Shape::isStatic() const {
  if (!dims_)
    return false;
  return std::all_of(dims_->begin(), dims_->end(), [](const Dim &d) { return d.isStatic(); });
}

std::vector<int64_t> Shape::staticSizes() const {
  std::vector<int64_t> out;
  for (const Dim &d : *dims_)
    out.push_back(d.value());
  return out;
}

std::optional<int64_t> Shape::numElements() const {
  if (!isStatic())
    return std::nullopt;
  return checkedProduct(staticSizes());
}

Dim Shape::product() const {
  if (!dims_)
    return Dim();
  Dim p = Dim::fixed(1);
  for (const Dim &d : *dims_)
    p = p * d;
  return p;
}

std::string Shape::str() const {
  if (!dims_)
    return "[*]";
  std::string out = "[";
  for (size_t i = 0; i < dims_->size(); ++i)
    out += (i ? "," : "") + (*dims_)[i].str();
  return out + "]";
}

std::string TensorType::str() const { return std::string(dtypeName(dtype)) + shape.str(); }

std::optional<int64_t> checkedProduct(const std::vector<int64_t> &sizes) {
  int64_t p = 1;
  for (int64_t s : sizes) {
    if (s < 0 || __builtin_mul_overflow(p, s, &p))
      return std::nullopt;
  }
  return p;
}

} // namespace dtc::ir
