// Internal entry points of the .npz reader, for tests and the fuzz_npy target: read an archive
// from bytes in memory (the same member checks readArrays applies to a file on disk).
#pragma once

#include "runtime/io/Npy.h"

#include <string>
#include <string_view>
#include <vector>

namespace dtc::rt {

/// Largest uncompressed .npy member readNpz* accepts (16 GiB), whatever the zip declares.
inline constexpr uint64_t kMaxNpzMemberBytes = uint64_t{16} << 30;

/// Reads every array of a .npz archive held in `bytes`; `where` prefixes error messages exactly
/// as the path does in readArrays ("<where>: array '<name>': ..."). `bytes` is not copied and
/// must stay alive during the call only.
Expected<std::vector<HostArray>> readNpzFromMemory(std::string_view bytes,
                                                   const std::string &where);

} // namespace dtc::rt
