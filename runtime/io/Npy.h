// NumPy array files: .npy (one array; format spec in numpy/lib/format.py, versions 1.0-3.0) and
// .npz (a zip of .npy members, stored or deflated, read and written through libzip). dtc-run
// reads inputs and datasets from them and writes outputs to them.
#pragma once

#include "compiler/ir/Types.h"
#include "compiler/support/Status.h"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace dtc::rt {

/// One array in host memory: dense, C order, little-endian.
struct HostArray {
  std::string name;
  ir::DType dtype = ir::DType::kUndefined;
  std::vector<int64_t> shape;
  std::string bytes; ///< numElements * dtypeSize(dtype) bytes

  /// Product of the shape; -1 on overflow or a negative dim.
  int64_t numElements() const;
};

/// Parses a whole .npy file. Supported descrs: <f4 <f8 <f2 <i1 <i2 <i4 <i8 |u1 <u2 <u4 <u8 |b1
/// (and '|' or '=' byte-order marks where unambiguous); fortran_order must be False. Errors name
/// `where` and the problem (bad magic, header too long, unsupported dtype, big-endian data,
/// Fortran order, data shorter or longer than the shape needs, size overflow).
Expected<HostArray> parseNpy(std::string_view bytes, const std::string &where);
/// The header of a .npy file: dtype, shape, the bytes before the data (magic, version, header)
/// and the data bytes the shape needs. parseNpyHeader needs only the file's first headerBytes
/// (at most 64 KiB + 12); errors as parseNpy's, without the data size check.
struct NpyHeader {
  ir::DType dtype = ir::DType::kUndefined;
  std::vector<int64_t> shape;
  std::string descr;
  uint64_t headerBytes = 0;
  uint64_t dataBytes = 0;
};
Expected<NpyHeader> parseNpyHeader(std::string_view bytes, const std::string &where);
/// Error unless `dataBytes` is what the header's shape needs ("<where>: data is N bytes, ...").
Status checkNpyDataSize(const NpyHeader &header, uint64_t dataBytes, const std::string &where);

/// Serializes one array as a version 1.0 .npy file (header padded to 64 bytes). The array must
/// be valid (a dtype numpy has, bytes matching the shape): an invalid one is an internal error.
std::string serializeNpy(const HostArray &array);

/// Decides, from a member's .npy header alone (before its data is read or inflated), whether
/// the array is wanted: true reads it, false skips it, an error stops the read.
using ArrayFilter = std::function<Expected<bool>(const std::string &name, ir::DType dtype,
                                                 const std::vector<int64_t> &shape)>;

/// Reads every array of a .npz file (members up to 16 GiB each) (or the single array of a .npy
/// file, named after the file stem). Member names drop their ".npy" suffix. `path` must be a
/// regular file (opened without blocking: a FIFO is refused). Each member's declared size is
/// checked against its compressed size (deflate's ratio), its .npy header and `filter` before
/// its data is inflated, and the arrays read must fit in physical memory; data is streamed into
/// place (never copied twice). Errors: "<path>: ..." and, for a bad member,
/// "<path>: array '<name>': ...".
Expected<std::vector<HostArray>> readArrays(const std::string &path,
                                            const ArrayFilter &filter = nullptr);
/// Writes arrays as an uncompressed .npz (what numpy.savez writes), atomically.
Status writeNpz(const std::string &path, const std::vector<HostArray> &arrays);

} // namespace dtc::rt
