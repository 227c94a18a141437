// Conversion of ONNX TensorProto (every storage form, and external data) into ir::TensorData,
// used by the importer for initializers, Constant values and tensor attributes, and the checks
// and element packing the runtime's weight reader (runtime/io/WeightReader.h) shares with it.
// Errors are "tensor '<name>': <what>".
#pragma once

#include "compiler/ir/TensorData.h"
#include "compiler/support/Status.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace onnx {
class TensorProto;
}

namespace dtc::onnxio {

/// Converts `t` into tensor contents named `name`.
///  - raw_data is moved out of `t` (weights are not copied);
///  - float_data / int32_data / int64_data / double_data / uint64_data are packed per the ONNX
///    spec (int32_data holds int32, int16, int8, uint16, uint8, bool, float16 and bfloat16);
///  - external data (data_location EXTERNAL) is resolved against `modelDir`: absolute
///    locations, locations outside that folder (through '..' or symbolic links), missing files
///    and ranges past the end of the file are errors; the bytes are not read.
/// The data size must match dims * element size; string and complex types are errors.
/// External data files already resolved during one import: location -> (checked absolute path,
/// file size). Models keep all weights in one or a few files, so each is resolved (symlinks,
/// escapes, size) once instead of once per tensor.
using ExternalFileCache = std::map<std::string, std::pair<std::string, int64_t>>;

Expected<ir::TensorDataPtr> importTensor(onnx::TensorProto &t, const std::string &name,
                                         const std::string &modelDir,
                                         ExternalFileCache *cache = nullptr);

/// Where the elements of a TensorProto are, as importTensor checks them (nothing is read,
/// copied or converted).
struct TensorSource {
  enum class Storage {
    kEmpty,   ///< no data field (a tensor with no elements)
    kRaw,     ///< raw_data: dense, row-major, little-endian
    kTyped,   ///< the typed field of the element type (float_data, int32_data, ...)
    kExternal ///< externalPath at [externalOffset, externalOffset + byteSize)
  };
  ir::DType dtype = ir::DType::kUndefined;
  std::vector<int64_t> dims;
  int64_t numElements = 0;
  int64_t byteSize = 0;
  Storage storage = Storage::kEmpty;
  std::string externalLocation; ///< kExternal: the location as the model spells it
  std::string externalPath;     ///< kExternal: the checked absolute path
  int64_t externalOffset = 0;   ///< kExternal: byte offset of the first element in the file
};

/// Runs every check of importTensor on `t` (element type, dims, the one data field and its size,
/// the external data entries and file: absolute or escaping locations, missing files, ranges
/// past the end) and says where its elements are. Errors as importTensor's.
Expected<TensorSource> inspectTensor(const onnx::TensorProto &t, const std::string &name,
                                     const std::string &modelDir,
                                     ExternalFileCache *cache = nullptr);

/// Writes elements [first, first + count) of `t`'s typed field (inspectTensor said kTyped, with
/// element type `dtype`) to `out`, packed as dtype (dtypeSize bytes each, host byte order).
void packTypedRange(const onnx::TensorProto &t, ir::DType dtype, int64_t first, int64_t count,
                    char *out);

/// ONNX's name of an element type number ("FLOAT", "STRING", "COMPLEX64"), or "type <n>".
std::string onnxTypeName(int32_t dataType);

/// "[2,3]" for messages.
std::string dimsText(const std::vector<int64_t> &dims);

} // namespace dtc::onnxio
