// Tests of compiler/support/FileIO: exclusive temporaries and refused non-regular outputs,
// bounded non-blocking input reads, identity checks, the checked --log writer (a write past
// RLIMIT_FSIZE stands in for a full disk) and the escaping of control characters.
#include "compiler/support/FileIO.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <fcntl.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace dtc {
namespace {

namespace fs = std::filesystem;

class FileIOTest : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dtc-fileio-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string &name) const { return (dir_ / name).string(); }
  static std::string slurp(const std::string &p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  fs::path dir_;
};

TEST_F(FileIOTest, AtomicWriteReplacesRegularFilesAndLeavesNoTemporary) {
  ASSERT_TRUE(writeFileAtomically(path("a"), "one").isOk());
  ASSERT_TRUE(writeFileAtomically(path("a"), "two").isOk());
  EXPECT_EQ(slurp(path("a")), "two");
  int files = 0;
  for (const auto &e : fs::directory_iterator(dir_))
    files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST_F(FileIOTest, PlantedTemporaryNameIsNeverWrittenThrough) {
  std::ofstream(path("victim")) << "precious";
  fs::create_symlink(path("victim"), path("out.tmp"));
  ASSERT_TRUE(writeFileAtomically(path("out"), "new").isOk());
  EXPECT_EQ(slurp(path("victim")), "precious");
  EXPECT_EQ(slurp(path("out")), "new");
  EXPECT_TRUE(fs::is_symlink(path("out.tmp")));
}

TEST_F(FileIOTest, NonRegularTargetsAreRefused) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  Status s = writeFileAtomically(path("fifo"), "x");
  EXPECT_EQ(s.message(), path("fifo") + ": exists and is not a regular file (a device, FIFO or "
                                        "socket); refusing to replace it");
  EXPECT_TRUE(fs::is_fifo(path("fifo")));
  EXPECT_EQ(writeFileAtomically(dir_.string(), "x").message(), dir_.string() + ": is a directory");
  EXPECT_EQ(writeFileAtomically("", "x").message(), "<empty path>: cannot write to an empty path");
  // A symbolic link at the target is replaced, never followed.
  std::ofstream(path("real")) << "real";
  fs::create_symlink(path("real"), path("link"));
  ASSERT_TRUE(writeFileAtomically(path("link"), "via link").isOk());
  EXPECT_EQ(slurp(path("real")), "real");
  EXPECT_FALSE(fs::is_symlink(path("link")));
}

TEST_F(FileIOTest, InputsMustBeRegularAndBounded) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  auto f = readInputFile(path("fifo"), "--config", 100); // must not block
  ASSERT_FALSE(f);
  EXPECT_EQ(f.status().message(), path("fifo") + ": --config is not a regular file (a FIFO, "
                                                 "device or socket); inputs must be regular files");
  auto z = readInputFile("/dev/zero", "--config", 100); // read-only use of a device
  ASSERT_FALSE(z);
  EXPECT_NE(z.status().message().find("is not a regular file"), std::string::npos);
  std::ofstream(path("big")) << std::string(101, 'x');
  auto b = readInputFile(path("big"), "--config", 100);
  ASSERT_FALSE(b);
  EXPECT_EQ(b.status().message(), path("big") + ": --config is 101 bytes, over the 100 byte limit");
  auto ok = readInputFile(path("big"), "--config", 101);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->size(), 101u);
  EXPECT_TRUE(checkInputFile(path("big"), "--data", 1000).isOk());
  auto d = readInputFile(dir_.string(), "", 100);
  EXPECT_EQ(d.status().message(), dir_.string() + ": is a directory, not a file");
}

// A sparse file (holes at the start, between extents and at the end) streams as the bytes it
// reads as: the holes' zeros come from the reader, in chunks of at most 1 MiB, and a file that
// is all hole streams as zeros of its size.
TEST_F(FileIOTest, SparseFilesStreamAsTheirBytes) {
  const std::string p = path("sparse");
  const int fd = ::open(p.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  const uint64_t size = (uint64_t{5} << 20) + 123; // holes are whole file-system blocks
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(size)), 0);
  std::string dense(size, '\0');
  auto put = [&](uint64_t at, const std::string &bytes) {
    ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(at)),
              static_cast<ssize_t>(bytes.size()));
    dense.replace(at, bytes.size(), bytes);
  };
  put((uint64_t{1} << 20) + 5, std::string(70000, 'a'));
  put((uint64_t{3} << 20) + 4096, "extent two");
  ::close(fd);
  auto stream = [&](const std::string &file, uint64_t limit) {
    std::string got;
    size_t largest = 0;
    Status s = streamInputFile(file, "", limit, [&](const char *data, size_t n) {
      got.append(data, n);
      largest = std::max(largest, n);
      return Status::ok();
    });
    EXPECT_TRUE(s.isOk()) << s.message();
    EXPECT_LE(largest, size_t{1} << 20);
    return got;
  };
  EXPECT_TRUE(stream(p, size) == dense);
  Status over = streamInputFile(p, "the data", size - 1, [](const char *, size_t) {
    return Status::ok();
  });
  EXPECT_EQ(over.message(), p + ": the data is " + std::to_string(size) + " bytes, over the " +
                                std::to_string(size - 1) + " byte limit");
  const std::string hole = path("hole");
  std::ofstream(hole).close();
  fs::resize_file(hole, 3000000);
  EXPECT_TRUE(stream(hole, 3000000) == std::string(3000000, '\0'));
}

TEST_F(FileIOTest, DistinctFilesComparesIdentityNotNames) {
  std::ofstream(path("model.onnx")) << "m";
  fs::create_hard_link(path("model.onnx"), path("hard"));
  fs::create_symlink(path("model.onnx"), path("soft"));
  EXPECT_EQ(
      checkDistinctFiles({{"--log", path("hard")}}, {{"the model", path("model.onnx")}}).message(),
      "--log " + path("hard") + ": is the same file as the model " + path("model.onnx") +
          "; refusing to overwrite an input");
  EXPECT_FALSE(
      checkDistinctFiles({{"-o", path("soft")}}, {{"the model", path("model.onnx")}}).isOk());
  EXPECT_FALSE(
      checkDistinctFiles({{"--log", path("model.onnx")}, {"--trace", path("soft")}}, {}).isOk());
  EXPECT_TRUE(checkDistinctFiles({{"--log", path("new")}, {"--trace", ""}},
                                 {{"the model", path("model.onnx")}, {"--data", ""}})
                  .isOk());
}

/// Runs `fn` in a child process with RLIMIT_FSIZE = `limit` bytes (writes past it fail with
/// EFBIG, as on a full disk; SIGXFSZ ignored) and returns its exit status.
int inChildWithFileSizeLimit(rlim_t limit, const std::function<int()> &fn) {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {limit, limit};
    ::setrlimit(RLIMIT_FSIZE, &rl);
    ::_exit(fn());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

TEST_F(FileIOTest, FailedLogWritesAreErrors) {
  const std::string log = path("metrics.jsonl");
  int rc = inChildWithFileSizeLimit(64, [&] {
    CheckedAppendFile f;
    if (!f.open(log, false).isOk())
      return 1;
    if (!f.write(std::string(40, 'a') + "\n").isOk())
      return 2; // fits
    Status s = f.write(std::string(40, 'b') + "\n");
    if (s.isOk())
      return 3; // past the limit: must fail
    if (s.message().rfind(log + ": cannot write: ", 0) != 0)
      return 4;
    return f.close().isOk() ? 0 : 5;
  });
  EXPECT_EQ(rc, 0);
  // The same for an atomic output: the write fails and no temporary stays behind.
  rc = inChildWithFileSizeLimit(64, [&] {
    Status s = writeFileAtomically(path("out"), std::string(1000, 'x'));
    return s.isOk() ? 1 : 0;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_FALSE(fs::exists(path("out")));
  for (const auto &e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find("out.tmp"), std::string::npos) << e.path();
}

TEST_F(FileIOTest, AppendFileRefusesNonRegularAndSymlinks) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  CheckedAppendFile f;
  EXPECT_FALSE(f.open(path("fifo"), false).isOk());
  std::ofstream(path("victim")) << "keep";
  fs::create_symlink(path("victim"), path("log"));
  CheckedAppendFile g;
  EXPECT_FALSE(g.open(path("log"), true).isOk());
  EXPECT_EQ(slurp(path("victim")), "keep");
  CheckedAppendFile h;
  ASSERT_TRUE(h.open(path("ok.jsonl"), false).isOk());
  ASSERT_TRUE(h.write("{}\n").isOk());
  ASSERT_TRUE(h.close().isOk());
  CheckedAppendFile again;
  ASSERT_TRUE(again.open(path("ok.jsonl"), true).isOk());
  ASSERT_TRUE(again.write("{}\n").isOk());
  ASSERT_TRUE(again.close().isOk());
  EXPECT_EQ(slurp(path("ok.jsonl")), "{}\n{}\n");
}

TEST(EscapeControl, ControlCharactersCannotStartALine) {
  EXPECT_EQ(escapeControl("node 'a\nerror: forged'"), "node 'a\\nerror: forged'");
  EXPECT_EQ(escapeControl("\r\t\x1b[31m\x7f"), "\\r\\t\\x1b[31m\\x7f");
  EXPECT_EQ(escapeControl("caf\xc3\xa9 \\ ok"), "caf\xc3\xa9 \\ ok");
}

} // namespace
} // namespace dtc
