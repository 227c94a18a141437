// .npz archives through libzip: reading stored and deflated .npy members (from a file or from
// memory; sizes checked against the zip's records, the .npy header, a caller's filter and
// physical memory before inflating, then streamed into place), reading plain .npy files, and
// writing uncompressed .npz files atomically (an AtomicFile: an O_EXCL|O_NOFOLLOW temporary
// next to the target that libzip writes through a source callback, fsync, rename).
#include "runtime/io/NpzInternal.h"

#include "compiler/support/FileIO.h"

#include <zip.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <functional>
#include <memory>
#include <new>
#include <optional>
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

/// Physical memory in bytes (0 when unknown): the arrays of one read must fit in it.
uint64_t physicalMemoryBytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && pageSize > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(pageSize)
                                   : 0;
}

/// The running total of the data bytes of the arrays read so far, checked against physical
/// memory before each array is allocated.
struct MemoryBudget {
  uint64_t used = 0;
  uint64_t limit = physicalMemoryBytes();
  Status take(uint64_t bytes, const std::string &where) {
    if (limit && (bytes > limit || used > limit - bytes))
      return Status::error(where, "needs " + std::to_string(bytes) + " bytes (" +
                                      std::to_string(used + bytes) +
                                      " with the arrays before it), more than the " +
                                      std::to_string(limit) + " bytes of physical memory");
    used += bytes;
    return Status::ok();
  }
};

/// Where a member's or file's bytes come from: read(buf, n) returns the bytes read (0 at the
/// end) or -1 with `error` set.
struct ByteSource {
  std::function<int64_t(char *, uint64_t)> read;
  std::function<std::string()> error;
  const char *readError = "cannot read: ";
};

/// Reads exactly `n` bytes into `out` (fewer only at the end of the source); returns the count.
Expected<uint64_t> readInto(ByteSource &src, char *out, uint64_t n, const std::string &where) {
  uint64_t got = 0;
  while (got < n) {
    int64_t r = src.read(out + got, std::min<uint64_t>(n - got, kReadChunk * 64));
    if (r < 0)
      return Status::error(where, src.readError + src.error());
    if (r == 0)
      break;
    got += static_cast<uint64_t>(r);
  }
  return got;
}

/// Reads one .npy array of `size` declared bytes from `src`: the header first (filter and
/// memory checks before any data is read), then the data straight into the array's bytes.
/// Returns nullopt when `filter` skips the array.
Expected<std::optional<HostArray>> readNpyStream(ByteSource &src, uint64_t size,
                                                 const std::string &name, const ArrayFilter &filter,
                                                 MemoryBudget &budget, const std::string &where) {
  // The header is at most 64 KiB after a 12-byte preamble.
  std::string head(static_cast<size_t>(std::min<uint64_t>(size, (64u << 10) + 12)), '\0');
  DTC_ASSIGN_OR_RETURN(uint64_t got, readInto(src, head.data(), head.size(), where));
  if (got < head.size())
    return Status::error(where, "member is truncated: " + std::to_string(got) + " of " +
                                    std::to_string(size) + " bytes");
  DTC_ASSIGN_OR_RETURN(NpyHeader h, parseNpyHeader(head, where));
  DTC_RETURN_IF_ERROR(checkNpyDataSize(h, size - std::min(size, h.headerBytes), where));
  if (filter) {
    DTC_ASSIGN_OR_RETURN(bool wanted, filter(name, h.dtype, h.shape));
    if (!wanted)
      return std::optional<HostArray>();
  }
  DTC_RETURN_IF_ERROR(budget.take(h.dataBytes, where));
  HostArray array;
  array.name = name;
  array.dtype = h.dtype;
  array.shape = std::move(h.shape);
  array.bytes.resize(static_cast<size_t>(h.dataBytes));
  const uint64_t inHead = head.size() - h.headerBytes;
  std::memcpy(array.bytes.data(), head.data() + h.headerBytes, inHead);
  DTC_ASSIGN_OR_RETURN(uint64_t rest,
                       readInto(src, array.bytes.data() + inHead, h.dataBytes - inHead, where));
  if (rest < h.dataBytes - inHead)
    return Status::error(where,
                         "member is truncated: " + std::to_string(h.headerBytes + inHead + rest) +
                             " of " + std::to_string(size) + " bytes");
  // Reading past the end makes libzip check the CRC and reveals data beyond the recorded size.
  char extra = 0;
  int64_t r = src.read(&extra, 1);
  if (r < 0)
    return Status::error(where, src.readError + src.error());
  if (r > 0)
    return Status::error(where,
                         "member holds more than its recorded " + std::to_string(size) + " bytes");
  return std::optional<HostArray>(std::move(array));
}

/// Reads every .npy member of an open archive; `where` names the archive in messages.
Expected<std::vector<HostArray>> readArchive(zip_t *za, const std::string &where,
                                             const ArrayFilter &filter) {
  zip_int64_t count = zip_get_num_entries(za, 0);
  if (count < 0)
    return Status::error(where, std::string("cannot list the zip archive: ") + zip_strerror(za));
  std::vector<HostArray> arrays;
  std::set<std::string> names;
  MemoryBudget budget;
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
    ZipFile zf(zip_fopen_index(za, index, 0));
    if (!zf)
      return Status::error(arrayWhere, std::string("cannot open member: ") + zip_strerror(za));
    ByteSource src{[&](char *buf, uint64_t n) -> int64_t { return zip_fread(zf.get(), buf, n); },
                   [&] { return std::string(zip_file_strerror(zf.get())); },
                   "cannot read member: "};
    DTC_ASSIGN_OR_RETURN(std::optional<HostArray> array,
                         readNpyStream(src, st.size, name, filter, budget, arrayWhere));
    if (!array)
      continue; // not wanted: its data is never inflated
    if (int rc = zip_fclose(zf.release()); rc != 0)
      return Status::error(arrayWhere, "cannot read member: " + zipErrorText(rc));
    arrays.push_back(std::move(*array));
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

Expected<std::vector<HostArray>> readArraysImpl(const std::string &path,
                                                const ArrayFilter &filter) {
  Fd file;
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
  file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (file.fd < 0)
    return Status::error(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat sb;
  if (::fstat(file.fd, &sb) != 0)
    return Status::error(path, std::string("cannot open: ") + std::strerror(errno));
  if (!S_ISREG(sb.st_mode))
    return Status::error(path, "cannot open: not a regular file (a FIFO, device or folder)");
  if (int flags = ::fcntl(file.fd, F_GETFL); flags >= 0)
    (void)::fcntl(file.fd, F_SETFL, flags & ~O_NONBLOCK);
  uint64_t fileSize = static_cast<uint64_t>(sb.st_size);
  char magic[6] = {};
  ssize_t n = ::pread(file.fd, magic, sizeof magic, 0);
  if (n < 0)
    return Status::error(path, std::string("cannot read: ") + std::strerror(errno));
  std::filesystem::path fsPath(path);
  bool isNpy = (n == 6 && std::memcmp(magic, "\x93NUMPY", 6) == 0) || fsPath.extension() == ".npy";
  if (isNpy) {
    if (fileSize > kMaxNpzMemberBytes + (1u << 20))
      return Status::error(path,
                           "file is " + std::to_string(fileSize) + " bytes, over the 16 GiB limit");
    const int fd = file.fd;
    int lastErrno = 0;
    ByteSource src{[&](char *buf, uint64_t want) -> int64_t {
                     for (;;) {
                       ssize_t r = ::read(fd, buf, std::min<uint64_t>(want, 1u << 30));
                       if (r < 0 && errno == EINTR)
                         continue;
                       lastErrno = errno;
                       return r;
                     }
                   },
                   [&] { return std::string(std::strerror(lastErrno)); }};
    MemoryBudget budget;
    DTC_ASSIGN_OR_RETURN(
        std::optional<HostArray> array,
        readNpyStream(src, fileSize, fsPath.stem().string(), filter, budget, path));
    std::vector<HostArray> arrays;
    if (array)
      arrays.push_back(std::move(*array));
    return arrays;
  }
  int code = 0;
  // zip_fdopen reads the descriptor already checked (never the name again) and owns it on success.
  ZipArchive za(zip_fdopen(file.fd, ZIP_CHECKCONS, &code));
  if (!za)
    return Status::error(path, "not a readable .npz (zip) file: " + openErrorText(code));
  file.fd = -1;
  return readArchive(za.get(), path, filter);
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

/// A libzip write target that writes into an AtomicFile (libzip's own file target writes a fixed
/// "<path>.XXXXXX" and neither syncs nor checks the target): libzip writes sequentially, seeks
/// back to patch local headers, and commits once at the end.
struct AtomicZipTarget {
  AtomicFile *file = nullptr;
  uint64_t pos = 0, size = 0;
  bool committed = false;
  Status failure = Status::ok(); ///< the first AtomicFile error, for the message
  zip_error_t error;

  zip_int64_t fail(int zipCode, int sysCode) {
    zip_error_set(&error, zipCode, sysCode);
    return -1;
  }

  static zip_int64_t callback(void *user, void *data, zip_uint64_t len, zip_source_cmd_t cmd) {
    auto *t = static_cast<AtomicZipTarget *>(user);
    switch (cmd) {
    case ZIP_SOURCE_SUPPORTS:
      return zip_source_make_command_bitmap(
          ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE, ZIP_SOURCE_STAT, ZIP_SOURCE_ERROR,
          ZIP_SOURCE_FREE, ZIP_SOURCE_SEEK, ZIP_SOURCE_TELL, ZIP_SOURCE_SUPPORTS,
          ZIP_SOURCE_BEGIN_WRITE, ZIP_SOURCE_COMMIT_WRITE, ZIP_SOURCE_ROLLBACK_WRITE,
          ZIP_SOURCE_WRITE, ZIP_SOURCE_SEEK_WRITE, ZIP_SOURCE_TELL_WRITE, ZIP_SOURCE_REMOVE, -1);
    case ZIP_SOURCE_STAT:
      // A new archive: "does not exist" (libzip's test is ZIP_ER_READ with ENOENT).
      return t->fail(ZIP_ER_READ, ENOENT);
    case ZIP_SOURCE_ERROR:
      return zip_error_to_data(&t->error, data, len);
    case ZIP_SOURCE_OPEN:
    case ZIP_SOURCE_CLOSE:
    case ZIP_SOURCE_FREE:
    case ZIP_SOURCE_REMOVE:
    case ZIP_SOURCE_READ:
    case ZIP_SOURCE_SEEK:
    case ZIP_SOURCE_TELL:
      return 0; // nothing is read back from a new archive
    case ZIP_SOURCE_BEGIN_WRITE:
      t->pos = t->size = 0;
      return 0;
    case ZIP_SOURCE_WRITE: {
      Status st = t->file->writeAt(t->pos, std::string_view(static_cast<const char *>(data), len));
      if (!st.isOk()) {
        t->failure = st;
        return t->fail(ZIP_ER_WRITE, EIO);
      }
      t->pos += len;
      t->size = std::max(t->size, t->pos);
      return static_cast<zip_int64_t>(len);
    }
    case ZIP_SOURCE_SEEK_WRITE: {
      zip_int64_t to = zip_source_seek_compute_offset(t->pos, t->size, data, len, &t->error);
      if (to < 0)
        return -1;
      t->pos = static_cast<uint64_t>(to);
      return 0;
    }
    case ZIP_SOURCE_TELL_WRITE:
      return static_cast<zip_int64_t>(t->pos);
    case ZIP_SOURCE_COMMIT_WRITE:
      t->committed = true; // the AtomicFile is committed after zip_close (fsync, rename)
      return 0;
    case ZIP_SOURCE_ROLLBACK_WRITE:
      return 0; // the uncommitted AtomicFile removes its temporary when destroyed
    default:
      return t->fail(ZIP_ER_OPNOTSUPP, 0);
    }
  }
};

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
  DTC_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::create(path));
  if (arrays.empty()) {
    // libzip writes no file for an empty archive; an empty zip is its end record alone.
    static const char kEmptyZip[22] = {'P', 'K', 5, 6};
    DTC_RETURN_IF_ERROR(file.write(std::string_view(kEmptyZip, sizeof kEmptyZip)));
    return file.commit();
  }
  AtomicZipTarget target;
  target.file = &file;
  zip_error_init(&target.error);
  struct ErrorFini {
    zip_error_t *e;
    ~ErrorFini() { zip_error_fini(e); }
  } errorFini{&target.error};
  zip_error_t openError;
  zip_error_init(&openError);
  zip_source_t *src = zip_source_function_create(&AtomicZipTarget::callback, &target, &openError);
  zip_t *raw = src ? zip_open_from_source(src, ZIP_CREATE | ZIP_TRUNCATE, &openError) : nullptr;
  if (!raw) {
    std::string why = zip_error_strerror(&openError);
    zip_error_fini(&openError);
    if (src)
      zip_source_free(src);
    return Status::error(path, "cannot start the archive: " + why);
  }
  zip_error_fini(&openError);
  ZipArchive za(raw); // owns src from here on
  // libzip reads the buffers at zip_close; they must live until then.
  std::vector<std::string> buffers;
  buffers.reserve(arrays.size());
  for (const HostArray &a : arrays) {
    buffers.push_back(serializeNpy(a));
    const std::string &buf = buffers.back();
    zip_source_t *member = zip_source_buffer(za.get(), buf.data(), buf.size(), 0);
    if (!member)
      return Status::error(path, std::string("cannot add array '") + a.name +
                                     "': " + zip_strerror(za.get()));
    zip_int64_t index = zip_file_add(za.get(), (a.name + ".npy").c_str(), member, ZIP_FL_ENC_UTF_8);
    if (index < 0) {
      zip_source_free(member);
      return Status::error(path, std::string("cannot add array '") + a.name +
                                     "': " + zip_strerror(za.get()));
    }
    if (zip_set_file_compression(za.get(), static_cast<zip_uint64_t>(index), ZIP_CM_STORE, 0) != 0)
      return Status::error(path, std::string("cannot add array '") + a.name +
                                     "': " + zip_strerror(za.get()));
  }
  if (zip_close(za.get()) != 0) {
    if (!target.failure.isOk())
      return target.failure;
    return Status::error(path, std::string("cannot write the archive: ") + zip_strerror(za.get()));
  }
  (void)za.release(); // zip_close freed it
  if (!target.committed)
    return Status::error(path, "internal error: libzip did not commit the archive");
  return file.commit();
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
    return readArchive(za.get(), where, nullptr);
  } catch (const std::bad_alloc &) {
    return Status::error(where, "out of memory");
  }
}

Expected<std::vector<HostArray>> readArrays(const std::string &path, const ArrayFilter &filter) {
  try {
    return readArraysImpl(path, filter);
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
