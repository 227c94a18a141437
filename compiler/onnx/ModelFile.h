// Reading an ONNX model file into a ModelProto: binary protobuf (up to 2 GiB) or ONNX text
// syntax, with specific errors for the usual wrong files (empty, Git LFS pointer, prototxt,
// truncated or random bytes, a directory). Internal to compiler/onnx.
#pragma once

#include "compiler/support/Status.h"

#include <string>

namespace onnx {
class ModelProto;
}

namespace dtc::onnxio {

/// Parses the model at `path` into `model`. The format is chosen by content (ONNX text syntax
/// when the file is text starting with `<` or a graph header `name (...)`; binary otherwise);
/// `.onnxtxt` / `.onnxtext` files always parse as text. Errors are "<path>: <what>".
Status readModelFile(const std::string &path, onnx::ModelProto &model);

/// Parses ONNX text syntax; errors are "<displayName>: <what>" with line and column.
Status parseModelText(const std::string &text, const std::string &displayName,
                      onnx::ModelProto &model);

} // namespace dtc::onnxio
