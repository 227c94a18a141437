// Conversion of ONNX TensorProto (every storage form, and external data) into ir::TensorData,
// used by the importer for initializers, Constant values and tensor attributes. Internal to
// compiler/onnx; errors are "tensor '<name>': <what>".
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

/// ONNX's name of an element type number ("FLOAT", "STRING", "COMPLEX64"), or "type <n>".
std::string onnxTypeName(int32_t dataType);

/// "[2,3]" for messages.
std::string dimsText(const std::vector<int64_t> &dims);

} // namespace dtc::onnxio
