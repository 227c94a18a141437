// The .npy format by hand: magic, version, a Python-dict-literal header (a small strict parser
// for exactly the form numpy writes), then raw little-endian C-order data. Format reference:
// numpy/lib/format.py (versions 1.0, 2.0 and 3.0). Every size computation is overflow-checked.
#include "runtime/io/Npy.h"

#include <bit>
#include <cstring>
#include <optional>
#include <utility>

namespace dtc::rt {

static_assert(std::endian::native == std::endian::little,
              "dtc assumes a little-endian host ('=' descrs and raw array bytes)");

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
/// Largest header accepted (numpy itself refuses headers over 10000 bytes by default).
constexpr uint64_t kMaxHeaderLen = 64 * 1024;
/// Largest rank accepted (NumPy 2's NPY_MAXDIMS).
constexpr size_t kMaxRank = 64;

/// A supported dtype: its descr without the byte-order mark, and its DType.
struct DescrInfo {
  const char *code;
  ir::DType dtype;
};
constexpr DescrInfo kDescrs[] = {
    {"f2", ir::DType::kFloat16}, {"f4", ir::DType::kFloat32}, {"f8", ir::DType::kFloat64},
    {"i1", ir::DType::kInt8},    {"i2", ir::DType::kInt16},   {"i4", ir::DType::kInt32},
    {"i8", ir::DType::kInt64},   {"u1", ir::DType::kUInt8},   {"u2", ir::DType::kUInt16},
    {"u4", ir::DType::kUInt32},  {"u8", ir::DType::kUInt64},  {"b1", ir::DType::kBool},
};

/// The descr numpy writes for `t` ("<f4", "|u1", "|b1"); nullopt when NumPy has no such dtype.
std::optional<std::string> descrFor(ir::DType t) {
  for (const DescrInfo &d : kDescrs)
    if (d.dtype == t)
      return std::string(ir::dtypeSize(t) == 1 ? "|" : "<") + d.code;
  return std::nullopt;
}

/// Maps a descr string to a DType, or explains why it is not supported.
Expected<ir::DType> dtypeForDescr(const std::string &descr) {
  const std::string supported = "supported: <f2 <f4 <f8 |i1 <i2 <i4 <i8 |u1 <u2 <u4 <u8 |b1";
  if (descr.size() >= 2 &&
      (descr[0] == '<' || descr[0] == '>' || descr[0] == '|' || descr[0] == '=')) {
    std::string code = descr.substr(1);
    for (const DescrInfo &d : kDescrs) {
      if (code != d.code)
        continue;
      bool oneByte = ir::dtypeSize(d.dtype) == 1;
      if (oneByte || descr[0] == '<' || descr[0] == '=')
        return d.dtype;
      if (descr[0] == '>')
        return Status::error("big-endian dtype '" + descr +
                             "' is not supported; convert with arr.astype('<" + code + "')");
      return Status::error("dtype '" + descr + "' has no byte order ('|') for a " +
                           std::to_string(ir::dtypeSize(d.dtype)) + "-byte type");
    }
    char kind = descr[1];
    const char *what = kind == 'O'                    ? " (Python objects)"
                       : kind == 'S'                  ? " (byte strings)"
                       : kind == 'U'                  ? " (unicode strings)"
                       : kind == 'c'                  ? " (complex numbers)"
                       : kind == 'V'                  ? " (raw void records)"
                       : (kind == 'M' || kind == 'm') ? " (datetimes)"
                                                      : "";
    return Status::error("unsupported dtype '" + descr + "'" + what + "; " + supported);
  }
  return Status::error("unsupported dtype '" + descr + "'; " + supported);
}

/// Strict parser for the header dict numpy writes:
///   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
/// Keys may come in any order, whitespace and a trailing comma are allowed; nothing else is.
class HeaderParser {
public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  struct Header {
    std::string descr;
    bool fortranOrder = false;
    std::vector<int64_t> shape;
  };

  Expected<Header> parse() {
    Header h;
    bool haveDescr = false, haveFortran = false, haveShape = false;
    skipSpace();
    if (!consume('{'))
      return fail("header is not a dict literal: expected '{'");
    skipSpace();
    while (!peekIs('}')) {
      DTC_ASSIGN_OR_RETURN(std::string key, parseString("a key"));
      skipSpace();
      if (!consume(':'))
        return fail("expected ':' after key '" + key + "'");
      skipSpace();
      if (key == "descr") {
        if (haveDescr)
          return fail("duplicate key 'descr'");
        haveDescr = true;
        if (peekIs('['))
          return fail("structured (record) dtypes are not supported");
        DTC_ASSIGN_OR_RETURN(h.descr, parseString("a string for 'descr'"));
      } else if (key == "fortran_order") {
        if (haveFortran)
          return fail("duplicate key 'fortran_order'");
        haveFortran = true;
        DTC_ASSIGN_OR_RETURN(h.fortranOrder, parseBool());
      } else if (key == "shape") {
        if (haveShape)
          return fail("duplicate key 'shape'");
        haveShape = true;
        DTC_ASSIGN_OR_RETURN(h.shape, parseShape());
      } else {
        return fail("unknown key '" + key + "' (expected 'descr', 'fortran_order', 'shape')");
      }
      skipSpace();
      if (consume(',')) {
        skipSpace();
        continue;
      }
      if (!peekIs('}'))
        return fail("expected ',' or '}' after the value of '" + key + "'");
    }
    ++pos_; // '}'
    skipSpace();
    if (pos_ != text_.size())
      return fail("unexpected text after the header dict");
    if (!haveDescr)
      return Status::error("header lacks the 'descr' key");
    if (!haveFortran)
      return Status::error("header lacks the 'fortran_order' key");
    if (!haveShape)
      return Status::error("header lacks the 'shape' key");
    return h;
  }

private:
  Status fail(const std::string &what) const {
    return Status::error("malformed header at byte " + std::to_string(pos_) + ": " + what);
  }
  bool peekIs(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
  bool consume(char c) {
    if (!peekIs(c))
      return false;
    ++pos_;
    return true;
  }
  bool consumeWord(std::string_view w) {
    if (text_.substr(pos_, w.size()) != w)
      return false;
    pos_ += w.size();
    return true;
  }
  void skipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  static bool isDigit(char c) { return c >= '0' && c <= '9'; }

  /// A quoted string without escapes: 'abc' or "abc".
  Expected<std::string> parseString(const std::string &what) {
    if (!peekIs('\'') && !peekIs('"'))
      return fail("expected " + what + " (a quoted string)");
    char quote = text_[pos_++];
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      char c = text_[pos_];
      if (c == '\\' || c == '\n' || static_cast<unsigned char>(c) < 0x20 ||
          static_cast<unsigned char>(c) >= 0x7f)
        return fail("unsupported character in a string");
      out += c;
      ++pos_;
    }
    if (!consume(quote))
      return fail("unterminated string");
    return out;
  }

  Expected<bool> parseBool() {
    if (consumeWord("True"))
      return true;
    if (consumeWord("False"))
      return false;
    return fail("expected True or False for 'fortran_order'");
  }

  /// A non-negative decimal integer (Python 2's 'L' suffix allowed) that fits int64.
  Expected<int64_t> parseDim() {
    if (peekIs('-'))
      return fail("negative dimension in 'shape'");
    if (pos_ >= text_.size() || !isDigit(text_[pos_]))
      return fail("expected a dimension (a non-negative integer) in 'shape'");
    if (text_[pos_] == '0' && pos_ + 1 < text_.size() && isDigit(text_[pos_ + 1]))
      return fail("dimension with a leading zero in 'shape'");
    int64_t v = 0;
    while (pos_ < text_.size() && isDigit(text_[pos_])) {
      if (__builtin_mul_overflow(v, int64_t{10}, &v) ||
          __builtin_add_overflow(v, int64_t{text_[pos_] - '0'}, &v))
        return fail("dimension in 'shape' does not fit in 64 bits");
      ++pos_;
    }
    consume('L');
    return v;
  }

  /// "()", "(3,)", "(2, 3)", "(2, 3,)"; "(3)" is an int in Python, not a tuple, and is refused.
  Expected<std::vector<int64_t>> parseShape() {
    if (!consume('('))
      return fail("expected a tuple for 'shape'");
    std::vector<int64_t> dims;
    skipSpace();
    if (consume(')'))
      return dims;
    while (true) {
      if (dims.size() >= kMaxRank)
        return fail("shape has more than " + std::to_string(kMaxRank) + " dimensions");
      DTC_ASSIGN_OR_RETURN(int64_t d, parseDim());
      dims.push_back(d);
      skipSpace();
      if (consume(',')) {
        skipSpace();
        if (consume(')'))
          return dims;
        continue;
      }
      if (consume(')')) {
        if (dims.size() == 1)
          return fail("'shape' (n) is not a tuple; a 1-tuple is written (n,)");
        return dims;
      }
      return fail("expected ',' or ')' in 'shape'");
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

std::string shapeRepr(const std::vector<int64_t> &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

uint32_t readLE(std::string_view b, size_t offset, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(b[offset + i])) << (8 * i);
  return v;
}

} // namespace

int64_t HostArray::numElements() const { return ir::checkedProduct(shape).value_or(-1); }

Expected<NpyHeader> parseNpyHeader(std::string_view bytes, const std::string &where) {
  auto err = [&](const std::string &what) { return Status::error(where, what); };
  if (bytes.size() < kMagicLen || bytes.substr(0, kMagicLen) != std::string_view(kMagic))
    return err("bad magic: not a .npy file (expected \\x93NUMPY)");
  if (bytes.size() < kMagicLen + 2)
    return err("truncated: file ends inside the .npy preamble");
  int major = static_cast<unsigned char>(bytes[6]);
  int minor = static_cast<unsigned char>(bytes[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    return err("unsupported .npy format version " + std::to_string(major) + "." +
               std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)");
  size_t lenBytes = major == 1 ? 2 : 4;
  size_t prefix = kMagicLen + 2 + lenBytes;
  if (bytes.size() < prefix)
    return err("truncated: file ends inside the .npy preamble");
  uint64_t headerLen = readLE(bytes, kMagicLen + 2, lenBytes);
  if (headerLen > kMaxHeaderLen)
    return err("header length " + std::to_string(headerLen) + " exceeds the limit of " +
               std::to_string(kMaxHeaderLen) + " bytes");
  if (bytes.size() - prefix < headerLen)
    return err("truncated: header needs " + std::to_string(headerLen) + " bytes, file has " +
               std::to_string(bytes.size() - prefix));
  std::string_view headerText = bytes.substr(prefix, headerLen);
  auto header = HeaderParser(headerText).parse();
  if (!header)
    return header.status().withContext(where);

  NpyHeader out;
  auto dtype = dtypeForDescr(header->descr);
  if (!dtype)
    return dtype.status().withContext(where);
  if (header->fortranOrder)
    return err("Fortran-order arrays are not supported (fortran_order: True); save "
               "np.ascontiguousarray(arr) instead");
  out.dtype = *dtype;
  out.shape = std::move(header->shape);
  out.descr = header->descr;
  std::optional<int64_t> elements = ir::checkedProduct(out.shape);
  int64_t nbytes = 0;
  if (!elements || __builtin_mul_overflow(*elements, ir::dtypeSize(out.dtype), &nbytes))
    return err("shape " + shapeRepr(out.shape) + " is too large: its byte size overflows");
  out.headerBytes = prefix + headerLen;
  out.dataBytes = static_cast<uint64_t>(nbytes);
  return out;
}

Status checkNpyDataSize(const NpyHeader &h, uint64_t dataBytes, const std::string &where) {
  if (dataBytes != h.dataBytes)
    return Status::error(where, "data is " + std::to_string(dataBytes) + " bytes, but shape " +
                                    shapeRepr(h.shape) + " of '" + h.descr + "' needs " +
                                    std::to_string(h.dataBytes) + " bytes");
  return Status::ok();
}

Expected<HostArray> parseNpy(std::string_view bytes, const std::string &where) {
  DTC_ASSIGN_OR_RETURN(NpyHeader h, parseNpyHeader(bytes, where));
  std::string_view data = bytes.substr(h.headerBytes);
  DTC_RETURN_IF_ERROR(checkNpyDataSize(h, data.size(), where));
  HostArray array;
  array.dtype = h.dtype;
  array.shape = std::move(h.shape);
  array.bytes.assign(data.data(), data.size());
  return array;
}

std::string serializeNpy(const HostArray &array) {
  std::optional<std::string> descr = descrFor(array.dtype);
  DTC_CHECK(descr.has_value(), "serializeNpy: dtype without a NumPy descr");
  // Exactly what numpy.lib.format writes: sorted keys, then spare room for the first dim to
  // grow (GROWTH_AXIS_MAX_DIGITS = 21), then spaces and '\n' up to a multiple of 64 bytes.
  std::string shape = shapeRepr(array.shape);
  std::string header =
      "{'descr': '" + *descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  if (!array.shape.empty()) {
    size_t digits = std::to_string(array.shape[0]).size();
    if (digits < 21)
      header.append(21 - digits, ' ');
  }
  // Version 1.0 has a 2-byte header length; headers past 64 KiB (ranks far above any real
  // array) need version 2.0 and its 4-byte length.
  bool v1 = kMagicLen + 2 + 2 + header.size() + 1 + 63 <= 0xffff;
  size_t prefix = kMagicLen + 2 + (v1 ? 2 : 4);
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic, kMagicLen);
  out += static_cast<char>(v1 ? 1 : 2);
  out += '\0';
  for (size_t i = 0; i < (v1 ? 2u : 4u); ++i)
    out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  out += header;
  out += array.bytes;
  return out;
}

} // namespace dtc::rt
