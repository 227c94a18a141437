// Writing output files so that a failure never leaves a partial file behind (DESIGN.md section
// 9): the bytes go to "<path>.tmp", are synced, and the temporary is renamed over `path`.
#pragma once

#include "compiler/support/Status.h"

#include <string>

namespace dtc {

/// Writes `bytes` to `path` atomically. A path that exists and is not a regular file (a device
/// or a pipe such as /dev/null or /dev/stdout) is written directly, never renamed over.
/// Errors: "<path>: is a directory", "<path>: cannot create <path>.tmp: <reason>", and write,
/// sync, close or rename failures with errno's text; the temporary file is removed on failure.
Status writeFileAtomically(const std::string &path, const std::string &bytes);

} // namespace dtc
