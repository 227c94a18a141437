// Node attributes: the ONNX attribute kinds dtc supports (int, float, string, their lists,
// and tensors). Graph-valued attributes (If/Loop bodies) are rejected at import.
#pragma once

#include "compiler/ir/TensorData.h"

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace dtc::ir {

enum class AttrKind { kInt, kFloat, kString, kInts, kFloats, kStrings, kTensor };

const char *attrKindName(AttrKind k);

class Attribute {
public:
  Attribute() : value_(int64_t{0}) {}
  Attribute(int64_t v) : value_(v) {}
  Attribute(int v) : value_(int64_t{v}) {}
  Attribute(float v) : value_(v) {}
  Attribute(std::string v) : value_(std::move(v)) {}
  Attribute(const char *v) : value_(std::string(v)) {}
  Attribute(std::vector<int64_t> v) : value_(std::move(v)) {}
  Attribute(std::vector<float> v) : value_(std::move(v)) {}
  Attribute(std::vector<std::string> v) : value_(std::move(v)) {}
  Attribute(TensorDataPtr v) : value_(std::move(v)) {}

  AttrKind kind() const { return static_cast<AttrKind>(value_.index()); }
  int64_t i() const { return std::get<int64_t>(value_); }
  float f() const { return std::get<float>(value_); }
  const std::string &s() const { return std::get<std::string>(value_); }
  const std::vector<int64_t> &ints() const { return std::get<std::vector<int64_t>>(value_); }
  const std::vector<float> &floats() const { return std::get<std::vector<float>>(value_); }
  const std::vector<std::string> &strings() const {
    return std::get<std::vector<std::string>>(value_);
  }
  const TensorDataPtr &t() const { return std::get<TensorDataPtr>(value_); }

  /// Deterministic text: 3, 0.5, "s", [1,2], tensor<f32[2,2]>.
  std::string str() const;
  bool operator==(const Attribute &o) const;

private:
  std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>,
               std::vector<std::string>, TensorDataPtr>
      value_;
};

} // namespace dtc::ir
