#include "fuzz/fuzz_support.hpp"

#include <fstream>
#include <random>

namespace trainer::fuzz {

ScratchDir::ScratchDir() {
  std::random_device random;
  path_ =
      std::filesystem::temp_directory_path() / ("trainer-fuzz-" + std::to_string(random()) + std::to_string(random()));
  std::filesystem::create_directories(path_);
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::filesystem::path ScratchDir::write(const std::string& name, const std::string& bytes) const {
  const std::filesystem::path file = path_ / name;
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return file;
}

const ScratchDir& scratch() {
  static const ScratchDir dir;  // one per process, for as long as it runs
  return dir;
}

std::vector<std::string> split(const uint8_t* data, size_t size, char separator, size_t count) {
  const std::string all(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  size_t at = 0;
  while (parts.size() + 1 < count) {
    const size_t end = all.find(separator, at);
    if (end == std::string::npos) break;
    parts.push_back(all.substr(at, end - at));
    at = end + 1;
  }
  parts.push_back(all.substr(at));
  return parts;
}

}  // namespace trainer::fuzz
