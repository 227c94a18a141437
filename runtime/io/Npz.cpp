// .npz archives through libzip: reading stored and deflated .npy members (from a file or from
// memory, with sizes checked against the zip's records and zip-bomb limits), reading plain .npy
// files, and writing uncompressed .npz files atomically (<path>.tmp, then rename).
#include "runtime/io/NpzInternal.h"

#include <zip.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <memory>
#include <new>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace dtc::rt {
namespace {

/// Deflate cannot expand data by more than about 1032:1 (RFC 1951 blocks); a member declaring
/// more than this from its compressed size is corrupt or a bomb.
constexpr uint64_t kMaxDeflateRatio = 1032;
constexpr uint64_t kReadChunk = uint64_t{1} << 20;

struct ZipArchiveCloser {
  void operator()(zip_t *za) const { zip_discard(za); }
};
using ZipArchive = std::unique_ptr<zip_t, ZipArchiveCloser>;
struct ZipFileCloser {
  void operator()(zip_file_t *zf) const { zip_fclose(zf); }
};
using ZipFile = std::unique_ptr<zip_file_t, ZipFileCloser>;

/// Why zip_open refused an archive; libzip reports duplicate member names as "file exists".
std::string openErrorText(int code) {
  if (code == ZIP_ER_EXISTS)
    return "duplicate member names in the zip archive";
  zip_error_t ze;
  zip_error_init_with_code(&ze, code);
  std::string text = zip_error_strerror(&ze);
  zip_error_fini(&ze);
  return text;
}

std::string zipErrorText(int code) {
  zip_error_t ze;
  zip_error_init_with_code(&ze, code);
  std::string text = zip_error_strerror(&ze);
  zip_error_fini(&ze);
  return text;
}

/// Reads member `index` (uncompressed size `size`) completely, growing the buffer with the data
/// actually read so that a lying size cannot force a huge allocation.
Expected<std::string> readMember(zip_t *za, zip_uint64_t index, uint64_t size,
                                 const std::string &where) {
  ZipFile zf(zip_fopen_index(za, index, 0));
  if (!zf)
    return Status::error(where, std::string("cannot open member: ") + zip_strerror(za));
  std::string data;
  uint64_t got = 0;
  while (got < size) {
    if (data.size() == got)
      data.resize(std::min(size, std::max<uint64_t>(got * 2, kReadChunk)));
    zip_int64_t r = zip_fread(zf.get(), data.data() + got, data.size() - got);
    if (r < 0)
      return Status::error(where,
                           std::string("cannot read member: ") + zip_file_strerror(zf.get()));
    if (r == 0)
      return Status::error(where, "member is truncated: " + std::to_string(got) + " of " +
                                      std::to_string(size) + " bytes");
    got += static_cast<uint64_t>(r);
  }
  // Reading past the end makes libzip check the CRC and reveals data beyond the recorded size.
  char extra = 0;
  zip_int64_t r = zip_fread(zf.get(), &extra, 1);
  if (r < 0)
    return Status::error(where, std::string("cannot read member: ") + zip_file_strerror(zf.get()));
  if (r > 0)
    return Status::error(where,
                         "member holds more than its recorded " + std::to_string(size) + " bytes");
  if (int rc = zip_fclose(zf.release()); rc != 0)
    return Status::error(where, "cannot read member: " + zipErrorText(rc));
  return data;
}

/// Reads every .npy member of an open archive; `where` names the archive in messages.
Expected<std::vector<HostArray>> readArchive(zip_t *za, const std::string &where) {
  zip_int64_t count = zip_get_num_entries(za, 0);
  if (count < 0)
    return Status::error(where, std::string("cannot list the zip archive: ") + zip_strerror(za));
  std::vector<HostArray> arrays;
  std::set<std::string> names;
  for (zip_int64_t i = 0; i < count; ++i) {
    zip_uint64_t index = static_cast<zip_uint64_t>(i);
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(za, index, 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME) || !st.name)
      return Status::error(where, "cannot read zip member #" + std::to_string(i) + ": " +
                                      zip_strerror(za));
    std::string member = st.name;
    const std::string suffix = ".npy";
    if (member.size() <= suffix.size() ||
        member.compare(member.size() - suffix.size(), suffix.size(), suffix) != 0)
      return Status::error(where, "member '" + member +
                                      "' is not a .npy array (an .npz holds only .npy files)");
    std::string name = member.substr(0, member.size() - suffix.size());
    if (!names.insert(name).second)
      return Status::error(where, "duplicate array '" + name + "'");
    std::string arrayWhere = where + ": array '" + name + "'";
    if (!(st.valid & ZIP_STAT_SIZE) || !(st.valid & ZIP_STAT_COMP_SIZE) ||
        !(st.valid & ZIP_STAT_COMP_METHOD))
      return Status::error(arrayWhere, "the zip directory lacks the member's sizes");
    if (st.size > kMaxNpzMemberBytes)
      return Status::error(arrayWhere, "member is " + std::to_string(st.size) +
                                           " bytes uncompressed, over the 16 GiB limit");
    if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE)
      return Status::error(arrayWhere, "encrypted members are not supported");
    if (st.comp_method == ZIP_CM_STORE) {
      if (st.comp_size != st.size)
        return Status::error(arrayWhere, "stored member records " + std::to_string(st.size) +
                                             " bytes but occupies " + std::to_string(st.comp_size));
    } else if (st.comp_method == ZIP_CM_DEFLATE) {
      if (st.size / kMaxDeflateRatio > st.comp_size)
        return Status::error(arrayWhere, "member claims " + std::to_string(st.size) +
                                             " bytes from " + std::to_string(st.comp_size) +
                                             " deflated bytes, more than deflate can produce");
    } else {
      return Status::error(arrayWhere, "zip compression method " + std::to_string(st.comp_method) +
                                           " is not supported (only stored and deflated)");
    }
    DTC_ASSIGN_OR_RETURN(std::string data, readMember(za, index, st.size, arrayWhere));
    DTC_ASSIGN_OR_RETURN(HostArray array, parseNpy(data, arrayWhere));
    array.name = std::move(name);
    arrays.push_back(std::move(array));
  }
  return arrays;
}

/// A file descriptor closed on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0)
      ::close(fd);
  }
};

/// Reads up to `n` bytes at the start of an open file; retries short reads.
Expected<std::string> readPrefix(int fd, uint64_t n, const std::string &path) {
  std::string out(n, '\0');
  uint64_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, out.data() + got, std::min<uint64_t>(n - got, 1u << 30));
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return Status::error(path, std::string("cannot read: ") + std::strerror(errno));
    if (r == 0)
      break;
    got += static_cast<uint64_t>(r);
  }
  out.resize(got);
  return out;
}

Expected<std::vector<HostArray>> readArraysImpl(const std::string &path) {
  Fd file;
  file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file.fd < 0)
    return Status::error(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat sb;
  if (::fstat(file.fd, &sb) != 0)
    return Status::error(path, std::string("cannot open: ") + std::strerror(errno));
  if (!S_ISREG(sb.st_mode))
    return Status::error(path, "cannot open: not a regular file");
  uint64_t fileSize = static_cast<uint64_t>(sb.st_size);
  DTC_ASSIGN_OR_RETURN(std::string head, readPrefix(file.fd, 6, path));
  std::filesystem::path fsPath(path);
  bool isNpy = head == "\x93NUMPY" || fsPath.extension() == ".npy";
  if (isNpy) {
    if (fileSize > kMaxNpzMemberBytes + (1u << 20))
      return Status::error(path,
                           "file is " + std::to_string(fileSize) + " bytes, over the 16 GiB limit");
    DTC_ASSIGN_OR_RETURN(
        std::string rest,
        readPrefix(file.fd, fileSize - std::min<uint64_t>(fileSize, head.size()), path));
    DTC_ASSIGN_OR_RETURN(HostArray array, parseNpy(head + rest, path));
    array.name = fsPath.stem().string();
    std::vector<HostArray> arrays;
    arrays.push_back(std::move(array));
    return arrays;
  }
  int code = 0;
  ZipArchive za(zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code));
  if (!za)
    return Status::error(path, "not a readable .npz (zip) file: " + openErrorText(code));
  return readArchive(za.get(), path);
}

/// Validates an array before writing: a name, a NumPy dtype, bytes matching the shape.
Status checkWritable(const HostArray &a, const std::string &path) {
  if (a.name.empty())
    return Status::error(path, "an array has an empty name");
  if (a.name.find('\0') != std::string::npos)
    return Status::error(path, "array name contains a NUL byte");
  std::string where = path + ": array '" + a.name + "'";
  int64_t itemSize = ir::dtypeSize(a.dtype);
  if (itemSize == 0 || a.dtype == ir::DType::kBFloat16)
    return Status::error(where, std::string("dtype ") + ir::dtypeName(a.dtype) +
                                    " has no NumPy equivalent");
  int64_t elements = a.numElements();
  int64_t nbytes = 0;
  if (elements < 0 || __builtin_mul_overflow(elements, itemSize, &nbytes))
    return Status::error(where, "shape has a negative dimension or overflows");
  if (static_cast<uint64_t>(nbytes) != a.bytes.size())
    return Status::error(where, "holds " + std::to_string(a.bytes.size()) +
                                    " bytes, its shape needs " + std::to_string(nbytes));
  return Status::ok();
}

Status writeNpzImpl(const std::string &path, const std::vector<HostArray> &arrays) {
  std::set<std::string> names;
  for (const HostArray &a : arrays) {
    DTC_RETURN_IF_ERROR(checkWritable(a, path));
    if (!names.insert(a.name).second)
      return Status::error(path, "duplicate array '" + a.name + "'");
  }
  std::error_code ec;
  // The archive replaces `path` by a rename: never do that to a device, FIFO or socket.
  if (std::filesystem::exists(std::filesystem::symlink_status(path, ec)) &&
      !std::filesystem::is_regular_file(path, ec) && !std::filesystem::is_directory(path, ec))
    return Status::error(path, "exists and is not a regular file; refusing to replace it");
  const std::string tmp = path + ".tmp";
  std::filesystem::remove(tmp, ec);
  if (arrays.empty()) {
    // libzip writes no file for an empty archive; an empty zip is its end record alone.
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    static const char kEmptyZip[22] = {'P', 'K', 5, 6};
    if (!out || !out.write(kEmptyZip, sizeof kEmptyZip) || !out.flush())
      return Status::error(path, "cannot write " + tmp);
  } else {
    int code = 0;
    zip_t *raw = zip_open(tmp.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
    if (!raw)
      return Status::error(path, "cannot write " + tmp + ": " + zipErrorText(code));
    ZipArchive za(raw);
    // libzip reads the buffers at zip_close; they must live until then.
    std::vector<std::string> buffers;
    buffers.reserve(arrays.size());
    for (const HostArray &a : arrays) {
      buffers.push_back(serializeNpy(a));
      const std::string &buf = buffers.back();
      zip_source_t *src = zip_source_buffer(za.get(), buf.data(), buf.size(), 0);
      if (!src)
        return Status::error(path, std::string("cannot add array '") + a.name +
                                       "': " + zip_strerror(za.get()));
      zip_int64_t index = zip_file_add(za.get(), (a.name + ".npy").c_str(), src, ZIP_FL_ENC_UTF_8);
      if (index < 0) {
        zip_source_free(src);
        return Status::error(path, std::string("cannot add array '") + a.name +
                                       "': " + zip_strerror(za.get()));
      }
      if (zip_set_file_compression(za.get(), static_cast<zip_uint64_t>(index), ZIP_CM_STORE, 0) !=
          0)
        return Status::error(path, std::string("cannot add array '") + a.name +
                                       "': " + zip_strerror(za.get()));
    }
    if (zip_close(za.get()) != 0) {
      std::string why = zip_strerror(za.get());
      std::filesystem::remove(tmp, ec);
      return Status::error(path, "cannot write " + tmp + ": " + why);
    }
    (void)za.release(); // zip_close freed it
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    const std::string why = ec.message(); // remove() below overwrites ec
    std::filesystem::remove(tmp, ec);
    return Status::error(path, "cannot rename " + tmp + " into place: " + why);
  }
  return Status::ok();
}

} // namespace

Expected<std::vector<HostArray>> readNpzFromMemory(std::string_view bytes,
                                                   const std::string &where) {
  try {
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t *src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &ze);
    if (!src) {
      std::string why = zip_error_strerror(&ze);
      zip_error_fini(&ze);
      return Status::error(where, "cannot read the zip archive: " + why);
    }
    zip_t *raw = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze);
    if (!raw) {
      std::string why = openErrorText(zip_error_code_zip(&ze));
      zip_error_fini(&ze);
      zip_source_free(src);
      return Status::error(where, "not a readable .npz (zip) file: " + why);
    }
    zip_error_fini(&ze);
    ZipArchive za(raw);
    return readArchive(za.get(), where);
  } catch (const std::bad_alloc &) {
    return Status::error(where, "out of memory");
  }
}

Expected<std::vector<HostArray>> readArrays(const std::string &path) {
  try {
    return readArraysImpl(path);
  } catch (const std::bad_alloc &) {
    return Status::error(path, "out of memory");
  } catch (const std::length_error &) {
    return Status::error(path, "out of memory");
  }
}

Status writeNpz(const std::string &path, const std::vector<HostArray> &arrays) {
  try {
    return writeNpzImpl(path, arrays);
  } catch (const std::bad_alloc &) {
    return Status::error(path, "out of memory");
  }
}

} // namespace dtc::rt
