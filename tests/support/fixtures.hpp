// Test fixtures built by the tests themselves: temporary folders, MNIST-format IDX files with a learnable
// pattern, and a runner for the trainer binary.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <sys/wait.h>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace trainer::testing {

namespace fs = std::filesystem;

// The message of the E that f() throws, or "no error".
template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "no error";
}

// Waits (a hang guard, not a timing assertion) until `done` holds.
template <class F>
bool eventually(F done) {
  for (int i = 0; i < 30000 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return done();
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "trainer-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

inline void write_bytes(const fs::path& path, const std::vector<uint8_t>& bytes, bool gzip) {
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
}

inline void put_u32(std::vector<uint8_t>& b, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<uint8_t>(v >> shift));
}

inline std::vector<uint8_t> idx_images(const std::vector<uint8_t>& labels, uint32_t rows, uint32_t cols,
                                       uint32_t classes, uint32_t seed) {
  std::vector<uint8_t> b;
  put_u32(b, 2051);
  put_u32(b, static_cast<uint32_t>(labels.size()));
  put_u32(b, rows);
  put_u32(b, cols);
  uint32_t state = seed * 2654435761u + 1;
  for (size_t i = 0; i < labels.size(); ++i)
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t c = 0; c < cols; ++c) {
        state = state * 1664525u + 1013904223u;
        // A bright band of rows per class over noise: learnable in a few steps.
        const bool band = r * classes / rows == labels[i];
        b.push_back(static_cast<uint8_t>((band ? 140 : 0) + ((state >> 24) % 100)));
      }
  return b;
}

inline std::vector<uint8_t> idx_labels(const std::vector<uint8_t>& labels) {
  std::vector<uint8_t> b;
  put_u32(b, 2049);
  put_u32(b, static_cast<uint32_t>(labels.size()));
  b.insert(b.end(), labels.begin(), labels.end());
  return b;
}

inline std::vector<uint8_t> make_labels(size_t n, uint32_t classes, uint32_t seed) {
  std::vector<uint8_t> labels(n);
  uint32_t state = seed + 7;
  for (auto& l : labels) {
    state = state * 1103515245u + 12345u;
    l = static_cast<uint8_t>((state >> 16) % classes);
  }
  return labels;
}

// train-*/t10k-* IDX files (gzip when asked) in `dir`, 28x28, `classes` classes.
inline void write_mnist_dir(const fs::path& dir, size_t train, size_t test, uint32_t classes = 10, bool gzip = true) {
  fs::create_directories(dir);
  const std::string ext = gzip ? ".gz" : "";
  const auto train_labels = make_labels(train, classes, 1), test_labels = make_labels(test, classes, 2);
  write_bytes(dir / ("train-images-idx3-ubyte" + ext), idx_images(train_labels, 28, 28, classes, 1), gzip);
  write_bytes(dir / ("train-labels-idx1-ubyte" + ext), idx_labels(train_labels), gzip);
  write_bytes(dir / ("t10k-images-idx3-ubyte" + ext), idx_images(test_labels, 28, 28, classes, 2), gzip);
  write_bytes(dir / ("t10k-labels-idx1-ubyte" + ext), idx_labels(test_labels), gzip);
}

// A listening loopback socket on a port the kernel picked: it holds the port while it lives (a port in use),
// and leaves a free one behind when it closes (a master port for a data-parallel test).
struct LoopbackListener {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int port = 0;
  LoopbackListener() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof(a);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd, 1) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &size) != 0)
      throw std::runtime_error("no loopback port");
    port = ntohs(a.sin_port);
  }
  ~LoopbackListener() { ::close(fd); }
  LoopbackListener(const LoopbackListener&) = delete;
  LoopbackListener& operator=(const LoopbackListener&) = delete;
};

inline int free_loopback_port() { return LoopbackListener().port; }

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

inline CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed: " + command);
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// A path's UTF-8 text as a std::string, in C++17 (where u8string() is one) and C++20 (a std::u8string) alike.
inline std::string utf8(const fs::path& path) {
  const auto text = path.u8string();
  return std::string(text.begin(), text.end());
}

inline std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

}  // namespace trainer::testing
