// Attribute printing and comparison.
#include "compiler/ir/Attribute.h"

#include <cstdio>
#include <cstdlib>

namespace dtc::ir {

const char *attrKindName(AttrKind k) {
  switch (k) {
  case AttrKind::kInt: return "int";
  case AttrKind::kFloat: return "float";
  case AttrKind::kString: return "string";
  case AttrKind::kInts: return "ints";
  case AttrKind::kFloats: return "floats";
  case AttrKind::kStrings: return "strings";
  case AttrKind::kTensor: return "tensor";
  }
  return "?";
}

/// Shortest decimal that reads back as the same float (0.9f prints "0.9", not "0.899999976").
static std::string floatStr(float f) {
  char buf[32];
  for (int precision = 6; precision <= 9; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f)
      break;
  }
  return buf;
}

static std::string quoted(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string Attribute::str() const {
  switch (kind()) {
  case AttrKind::kInt: return std::to_string(i());
  case AttrKind::kFloat: return floatStr(f());
  case AttrKind::kString: return quoted(s());
  case AttrKind::kInts: {
    std::string out = "[";
    for (size_t k = 0; k < ints().size(); ++k)
      out += (k ? "," : "") + std::to_string(ints()[k]);
    return out + "]";
  }
  case AttrKind::kFloats: {
    std::string out = "[";
    for (size_t k = 0; k < floats().size(); ++k)
      out += (k ? "," : "") + floatStr(floats()[k]);
    return out + "]";
  }
  case AttrKind::kStrings: {
    std::string out = "[";
    for (size_t k = 0; k < strings().size(); ++k)
      out += (k ? "," : "") + quoted(strings()[k]);
    return out + "]";
  }
  case AttrKind::kTensor:
    return "tensor<" + TensorType{t()->dtype(), Shape::ofStatic(t()->dims())}.str() + ">";
  }
  return "?";
}

bool Attribute::operator==(const Attribute &o) const {
  if (kind() != o.kind())
    return false;
  if (kind() == AttrKind::kTensor)
    return t() == o.t();
  return value_ == o.value_;
}

} // namespace dtc::ir
