// TensorProto -> ir::TensorData: the in-memory storage forms of the ONNX spec (onnx.proto,
// TensorProto field comments) and external data files, which are checked but not read (the
// bytes load lazily through TensorData::bytes()).
#include "compiler/onnx/TensorImport.h"

#include <onnx/onnx_pb.h>

#include <charconv>
#include <cstring>
#include <filesystem>
#include <limits>

namespace dtc::onnxio {

namespace fs = std::filesystem;

std::string onnxTypeName(int32_t dataType) {
  if (onnx::TensorProto_DataType_IsValid(dataType))
    return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(dataType));
  return "type " + std::to_string(dataType);
}

std::string dimsText(const std::vector<int64_t> &dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    out += (i ? "," : "") + std::to_string(dims[i]);
  return out + "]";
}

namespace {

/// Packs elements [first, first + count) of a repeated proto field into `Dst` elements at `out`
/// (bools become 0/1; host byte order, little-endian on every platform dtc builds for).
template <typename Dst, typename Field>
void pack(const Field &src, int64_t first, int64_t count, char *out) {
  for (int64_t i = 0; i < count; ++i) {
    Dst v;
    if constexpr (std::is_same_v<Dst, bool>)
      v = src.Get(static_cast<int>(first + i)) != 0;
    else
      v = static_cast<Dst>(src.Get(static_cast<int>(first + i)));
    std::memcpy(out + static_cast<size_t>(i) * sizeof(Dst), &v, sizeof(Dst));
  }
}

/// The typed field that holds elements of `t` (ONNX spec), and its name.
const char *typedFieldFor(ir::DType t) {
  switch (t) {
  case ir::DType::kFloat32:
    return "float_data";
  case ir::DType::kFloat64:
    return "double_data";
  case ir::DType::kInt64:
    return "int64_data";
  case ir::DType::kUInt32:
  case ir::DType::kUInt64:
    return "uint64_data";
  default:
    return "int32_data";
  }
}

Expected<int64_t> parseNonNegative(const std::string &where, const std::string &key,
                                   const std::string &text) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v < 0)
    return Status::error(where,
                         "external data " + key + " '" + text + "' is not a non-negative integer");
  return v;
}

/// Resolves `location` against `modelDir`: the checked absolute path and the file's size.
Expected<std::pair<std::string, int64_t>> resolveExternalFile(const std::string &where,
                                                              const std::string &location,
                                                              const std::string &modelDir);

/// Checks the external_data entries of `t` (location, offset, length) and resolves its file:
/// fills the external fields of `src`.
Status inspectExternal(const onnx::TensorProto &t, const std::string &name,
                       const std::string &modelDir, ExternalFileCache *cache, TensorSource &src) {
  std::string where = "tensor '" + name + "'";
  std::string location;
  bool hasLocation = false;
  int64_t offset = 0, length = -1;
  for (const onnx::StringStringEntryProto &e : t.external_data()) {
    if (e.key() == "location") {
      location = e.value();
      hasLocation = true;
    } else if (e.key() == "offset") {
      DTC_ASSIGN_OR_RETURN(offset, parseNonNegative(where, "offset", e.value()));
    } else if (e.key() == "length") {
      DTC_ASSIGN_OR_RETURN(length, parseNonNegative(where, "length", e.value()));
    }
    // "checksum" and other keys carry no information dtc needs.
  }
  if (!hasLocation || location.empty())
    return Status::error(where, "data_location is EXTERNAL but external_data has no 'location'");
  if (location.find('\0') != std::string::npos)
    return Status::error(where, "external data location contains a NUL character");
  std::pair<std::string, int64_t> file;
  auto cached = cache ? cache->find(location) : ExternalFileCache::iterator{};
  if (cache && cached != cache->end()) {
    file = cached->second;
  } else {
    DTC_ASSIGN_OR_RETURN(file, resolveExternalFile(where, location, modelDir));
    if (cache)
      (*cache)[location] = file;
  }
  int64_t fileSize = file.second;
  if (length >= 0 && length != src.byteSize)
    return Status::error(where, "external data length " + std::to_string(length) +
                                    " does not match the " + std::to_string(src.byteSize) +
                                    " bytes of its type and shape " + ir::dtypeName(src.dtype) +
                                    dimsText(src.dims));
  if (length < 0)
    length = src.byteSize;
  if (offset > fileSize || length > fileSize - offset)
    return Status::error(where, "external data offset " + std::to_string(offset) + " + length " +
                                    std::to_string(length) + " is past the end of '" + location +
                                    "' (" + std::to_string(fileSize) + " bytes)");
  src.storage = TensorSource::Storage::kExternal;
  src.externalLocation = location;
  src.externalPath = file.first;
  src.externalOffset = offset;
  return Status::ok();
}

Expected<std::pair<std::string, int64_t>> resolveExternalFile(const std::string &where,
                                                              const std::string &location,
                                                              const std::string &modelDir) {
  fs::path loc(location);
  if (loc.is_absolute() || loc.has_root_directory() || loc.has_root_name())
    return Status::error(where, "external data location '" + location +
                                    "' is an absolute path; it must be relative to the model's "
                                    "folder");
  std::error_code ec;
  fs::path dir = fs::absolute(modelDir.empty() ? fs::path(".") : fs::path(modelDir), ec);
  if (ec)
    return Status::error(where,
                         "cannot resolve the model folder '" + modelDir + "': " + ec.message());
  fs::path base = fs::weakly_canonical(dir, ec);
  if (ec)
    return Status::error(where,
                         "cannot resolve the model folder '" + dir.string() + "': " + ec.message());
  fs::path target = fs::weakly_canonical(base / loc, ec);
  if (ec)
    return Status::error(where, "cannot resolve external data location '" + location +
                                    "': " + ec.message());
  fs::path rel = target.lexically_relative(base);
  if (rel.empty() || *rel.begin() == ".." || rel == ".")
    return Status::error(where, "external data location '" + location + "' resolves to '" +
                                    target.string() + "', outside the model's folder '" +
                                    base.string() + "' (through '..' or a symbolic link)");
  fs::file_status st = fs::status(target, ec);
  if (!fs::exists(st))
    return Status::error(where, "external data file '" + location +
                                    "' does not exist (looked for '" + target.string() + "')");
  if (!fs::is_regular_file(st))
    return Status::error(where, "external data location '" + location + "' ('" + target.string() +
                                    "') is not a regular file");
  uintmax_t fileSizeU = fs::file_size(target, ec);
  if (ec)
    return Status::error(where, "cannot get the size of external data file '" + target.string() +
                                    "': " + ec.message());
  int64_t fileSize = fileSizeU > static_cast<uintmax_t>(std::numeric_limits<int64_t>::max())
                         ? std::numeric_limits<int64_t>::max()
                         : static_cast<int64_t>(fileSizeU);
  return std::make_pair(target.string(), fileSize);
}

} // namespace

Expected<TensorSource> inspectTensor(const onnx::TensorProto &t, const std::string &name,
                                     const std::string &modelDir, ExternalFileCache *cache) {
  std::string where = "tensor '" + name + "'";
  int32_t dt = t.data_type();
  if (dt == 0)
    return Status::error(where, "has no data_type");
  if (!ir::isKnownDType(dt) || dt == static_cast<int32_t>(ir::DType::kString))
    return Status::error(where, "element type " + onnxTypeName(dt) + " is not supported");
  TensorSource src;
  src.dtype = static_cast<ir::DType>(dt);
  if (t.has_segment())
    return Status::error(where, "segmented tensors are not supported");
  src.dims.assign(t.dims().begin(), t.dims().end());
  for (int64_t d : src.dims)
    if (d < 0)
      return Status::error(where, "has a negative dimension " + std::to_string(d) + " in dims " +
                                      dimsText(src.dims));
  std::optional<int64_t> count = ir::checkedProduct(src.dims);
  if (!count)
    return Status::error(where,
                         "dims " + dimsText(src.dims) + " have more elements than fit in int64");
  int64_t elemSize = ir::dtypeSize(src.dtype);
  if (*count > std::numeric_limits<int64_t>::max() / elemSize)
    return Status::error(where, "dims " + dimsText(src.dims) + " of " + ir::dtypeName(src.dtype) +
                                    " take more bytes than fit in int64");
  src.numElements = *count;
  src.byteSize = *count * elemSize;
  std::string typeText = std::string(ir::dtypeName(src.dtype)) + dimsText(src.dims);

  if (t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) {
    DTC_RETURN_IF_ERROR(inspectExternal(t, name, modelDir, cache, src));
    return src;
  }

  // Which storage fields hold data.
  std::vector<std::string> used;
  if (t.has_raw_data())
    used.push_back("raw_data");
  if (t.float_data_size())
    used.push_back("float_data");
  if (t.int32_data_size())
    used.push_back("int32_data");
  if (t.int64_data_size())
    used.push_back("int64_data");
  if (t.double_data_size())
    used.push_back("double_data");
  if (t.uint64_data_size())
    used.push_back("uint64_data");
  if (t.string_data_size())
    used.push_back("string_data");
  if (used.size() > 1)
    return Status::error(where, "holds data in both " + used[0] + " and " + used[1]);
  if (used.empty()) {
    if (src.byteSize != 0)
      return Status::error(where, "has no data (" + typeText + " needs " +
                                      std::to_string(src.byteSize) + " bytes)");
    src.storage = TensorSource::Storage::kEmpty;
    return src;
  }
  const std::string &field = used[0];
  if (field == "raw_data") {
    if (static_cast<int64_t>(t.raw_data().size()) != src.byteSize)
      return Status::error(where, "raw_data has " + std::to_string(t.raw_data().size()) +
                                      " bytes, but " + typeText + " needs " +
                                      std::to_string(src.byteSize));
    src.storage = TensorSource::Storage::kRaw;
    return src;
  }
  if (field != typedFieldFor(src.dtype))
    return Status::error(where, std::string(ir::dtypeName(src.dtype)) + " values must be in " +
                                    typedFieldFor(src.dtype) + " or raw_data, but " + field +
                                    " is used");
  int64_t n = 0;
  switch (src.dtype) {
  case ir::DType::kFloat32:
    n = t.float_data_size();
    break;
  case ir::DType::kFloat64:
    n = t.double_data_size();
    break;
  case ir::DType::kInt64:
    n = t.int64_data_size();
    break;
  case ir::DType::kUInt32:
  case ir::DType::kUInt64:
    n = t.uint64_data_size();
    break;
  default:
    n = t.int32_data_size();
    break;
  }
  if (n != *count)
    return Status::error(where, field + " has " + std::to_string(n) + " values, but " + typeText +
                                    " needs " + std::to_string(*count));
  switch (src.dtype) {
  case ir::DType::kFloat32:
  case ir::DType::kFloat64:
  case ir::DType::kInt64:
  case ir::DType::kUInt32:
  case ir::DType::kUInt64:
  case ir::DType::kInt32:
  case ir::DType::kInt16:
  case ir::DType::kInt8:
  case ir::DType::kUInt8:
  case ir::DType::kBool:
  case ir::DType::kUInt16:
  case ir::DType::kFloat16:
  case ir::DType::kBFloat16:
    break;
  default:
    return Status::error(where, "element type " + onnxTypeName(dt) + " is not supported");
  }
  src.storage = TensorSource::Storage::kTyped;
  return src;
}

void packTypedRange(const onnx::TensorProto &t, ir::DType dtype, int64_t first, int64_t count,
                    char *out) {
  switch (dtype) {
  case ir::DType::kFloat32:
    return pack<float>(t.float_data(), first, count, out);
  case ir::DType::kFloat64:
    return pack<double>(t.double_data(), first, count, out);
  case ir::DType::kInt64:
    return pack<int64_t>(t.int64_data(), first, count, out);
  case ir::DType::kUInt32:
    return pack<uint32_t>(t.uint64_data(), first, count, out);
  case ir::DType::kUInt64:
    return pack<uint64_t>(t.uint64_data(), first, count, out);
  case ir::DType::kInt32:
    return pack<int32_t>(t.int32_data(), first, count, out);
  case ir::DType::kInt16:
    return pack<int16_t>(t.int32_data(), first, count, out);
  case ir::DType::kInt8:
    return pack<int8_t>(t.int32_data(), first, count, out);
  case ir::DType::kUInt8:
    return pack<uint8_t>(t.int32_data(), first, count, out);
  case ir::DType::kBool:
    return pack<bool>(t.int32_data(), first, count, out);
  default: // uint16, float16, bfloat16 (inspectTensor admits no other type here)
    return pack<uint16_t>(t.int32_data(), first, count, out);
  }
}

Expected<ir::TensorDataPtr> importTensor(onnx::TensorProto &t, const std::string &name,
                                         const std::string &modelDir, ExternalFileCache *cache) {
  DTC_ASSIGN_OR_RETURN(TensorSource src, inspectTensor(t, name, modelDir, cache));
  std::string bytes;
  switch (src.storage) {
  case TensorSource::Storage::kExternal:
    return ir::TensorDataPtr(ir::TensorData::fromExternal(
        name, src.dtype, std::move(src.dims), src.externalPath, src.externalOffset, src.byteSize));
  case TensorSource::Storage::kEmpty:
    break;
  case TensorSource::Storage::kRaw:
    bytes.swap(*t.mutable_raw_data()); // no copy of the weights
    break;
  case TensorSource::Storage::kTyped:
    bytes.resize(static_cast<size_t>(src.byteSize));
    packTypedRange(t, src.dtype, 0, src.numElements, bytes.data());
    break;
  }
  return ir::TensorDataPtr(
      ir::TensorData::fromBytes(name, src.dtype, std::move(src.dims), std::move(bytes)));
}

} // namespace dtc::onnxio
