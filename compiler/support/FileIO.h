// Safe file access for every tool (DESIGN.md section 9): outputs are written to a temporary
// created exclusively next to the target and renamed over it (never over a device, FIFO or
// directory); inputs are regular files of bounded size opened without blocking on FIFOs; files
// are compared by identity (device and inode) so that an output never overwrites an input.
#pragma once

#include "compiler/support/Diagnostics.h"
#include "compiler/support/Status.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <utility>
#include <vector>

namespace dtc {

/// Size limits of the files dtc reads, by kind (bytes).
inline constexpr uint64_t kMaxConfigFileBytes = uint64_t{1} << 20; // --config JSON: 1 MiB
inline constexpr uint64_t kMaxPlanFileBytes = uint64_t{2} << 30;   // protobuf's 2 GiB
inline constexpr uint64_t kMaxModelFileBytes = uint64_t{2} << 30;  // protobuf's 2 GiB
inline constexpr uint64_t kMaxArrayFileBytes = uint64_t{64} << 30; // .npz/.npy: 64 GiB
inline constexpr uint64_t kMaxExternalDataBytes = uint64_t{1} << 40; // ONNX external data: 1 TiB

/// Checks that an output may be written at `path`: not empty, and either absent or a regular
/// file (a symbolic link is replaced, never followed). Errors: "<path>: is a directory",
/// "<path>: exists and is not a regular file (a device, FIFO or socket); refusing to replace
/// it", "<empty path>: ...".
Status checkOutputTarget(const std::string &path);

/// An output file under construction: create() makes "<path>.tmp.XXXXXX" (six random
/// characters) in the target's folder with O_CREAT|O_EXCL|O_NOFOLLOW and mode 0644 less the
/// umask (a planted file or symlink at that name is never opened), write() appends, commit()
/// syncs, closes and renames it over `path`. Destroying an uncommitted file removes the
/// temporary. Errors name `path` and the reason (errno's text).
class AtomicFile {
public:
  static Expected<AtomicFile> create(const std::string &path);
  AtomicFile(AtomicFile &&other) noexcept;
  AtomicFile &operator=(AtomicFile &&other) = delete;
  AtomicFile(const AtomicFile &) = delete;
  ~AtomicFile();

  Status write(std::string_view bytes);
  /// Writes `bytes` at byte `offset` (pwrite; the append position of write() does not move),
  /// for writers that go back to patch a header (libzip's local headers). Errors as write().
  Status writeAt(uint64_t offset, std::string_view bytes);
  /// fsync + close + rename; afterwards the object is empty.
  Status commit();
  const std::string &tempPath() const { return tmp_; }

private:
  AtomicFile(std::string path, std::string tmp, int fd)
      : path_(std::move(path)), tmp_(std::move(tmp)), fd_(fd) {}
  void discard();
  std::string path_, tmp_;
  int fd_ = -1;
};

/// Writes `bytes` to `path` through an AtomicFile (checkOutputTarget first): a failure leaves
/// no partial file and no temporary behind, and an existing non-regular `path` is refused.
Status writeFileAtomically(const std::string &path, const std::string &bytes);

/// Checks that `path` can be read as an input: it is opened with O_NONBLOCK (a FIFO never
/// blocks), must be a regular file, and at most `maxBytes` long. `what` names the input in
/// messages ("--data", "model"). Errors: "<path>: cannot open: <reason>", "<path>: <what> is not
/// a regular file (a FIFO, device or directory)", "<path>: <what> is <n> bytes, over the <m>
/// byte limit".
Status checkInputFile(const std::string &path, const std::string &what, uint64_t maxBytes);

/// Reads a whole input file (checkInputFile's rules, then a read bounded by `maxBytes` even if
/// the file grows); allocation failures are errors ("<path>: out of memory").
Expected<std::string> readInputFile(const std::string &path, const std::string &what,
                                    uint64_t maxBytes);

/// Streams a whole input file (checkInputFile's rules) through `sink` in chunks of at most 1 MiB,
/// never holding the file in memory; reading stops with an error when the file grows past
/// `maxBytes` while being read, or when `sink` fails (its Status is returned).
Status streamInputFile(const std::string &path, const std::string &what, uint64_t maxBytes,
                       const std::function<Status(const char *data, size_t size)> &sink);

/// An input file opened by checkInputFile's rules and kept open (closed by the destructor), for
/// reading ranges of it from several threads at once (pread, never the shared file offset).
class InputFile {
public:
  /// Opens `path` (checkInputFile's rules and errors; `what` names it in them).
  static Expected<InputFile> open(const std::string &path, const std::string &what,
                                  uint64_t maxBytes);
  InputFile(InputFile &&other) noexcept;
  InputFile &operator=(InputFile &&other) noexcept;
  InputFile(const InputFile &) = delete;
  InputFile &operator=(const InputFile &) = delete;
  ~InputFile();

  const std::string &path() const { return path_; }
  /// The file's size in bytes when it was opened.
  uint64_t size() const { return size_; }

  /// Streams bytes [offset, offset + length) through `sink` in chunks of at most 1 MiB. Holes
  /// of a sparse file (SEEK_DATA/SEEK_HOLE) go to the sink as zeros without being read. Safe to
  /// call from several threads at once. Errors: "<path>: cannot read: <reason>", "<path>: shrank
  /// while being read" (end of file before the range's end), or the sink's own.
  Status streamRange(uint64_t offset, uint64_t length,
                     const std::function<Status(const char *data, size_t size)> &sink) const;
  /// True when [offset, offset + length) lies wholly in a hole (reads as zeros); false when it
  /// holds data or the file system does not report holes.
  bool isHole(uint64_t offset, uint64_t length) const;
  /// An error when the file's size now differs from size() ("<path>: changed while being
  /// read").
  Status checkUnchanged() const;

private:
  InputFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

/// Device and inode of the file `path` names (symbolic links followed); nullopt when it does
/// not exist or cannot be stat'ed.
struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const FileId &) const = default;
};
std::optional<FileId> fileIdOf(const std::string &path);

/// An input or output of a run, for checkDistinctFiles: the flag ("--log", "the plan") and the
/// path.
struct NamedPath {
  std::string flag;
  std::string path;
};

/// Fails when an output names the same file (device and inode) as an input, or as another
/// output: "<out flag> <out path>: is the same file as <in flag> <in path>; refusing to
/// overwrite it". Empty paths and files that do not exist are skipped.
Status checkDistinctFiles(const std::vector<NamedPath> &outputs,
                          const std::vector<NamedPath> &inputs);

/// An append-only text file whose every write, flush and close is checked (--log): a full disk
/// or an I/O error is a Status naming the path, never a silently short file.
class CheckedAppendFile {
public:
  CheckedAppendFile() = default;
  CheckedAppendFile(const CheckedAppendFile &) = delete;
  CheckedAppendFile &operator=(const CheckedAppendFile &) = delete;
  ~CheckedAppendFile();
  /// Opens `path` for appending (truncated first unless `append`); refuses a non-regular file
  /// and does not follow a symbolic link at `path`.
  Status open(const std::string &path, bool append);
  bool isOpen() const { return fd_ >= 0; }
  /// Writes `bytes` completely (retrying short writes); errors: "<path>: cannot write: <reason>".
  Status write(std::string_view bytes);
  /// fsync + close; errors: "<path>: cannot sync/close: <reason>". Safe to call when not open.
  Status close();

private:
  std::string path_;
  int fd_ = -1;
};

} // namespace dtc
