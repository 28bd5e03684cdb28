#include "trainer/util/write_error.hpp"

#include <cerrno>
#include <cstdio>
#include <string>

namespace trainer {

namespace fs = std::filesystem;

std::optional<uint64_t> free_bytes(const fs::path& dir) {
  std::error_code ec;
  const fs::space_info space = fs::space(dir.empty() ? fs::path(".") : dir, ec);
  if (ec) return std::nullopt;
  return static_cast<uint64_t>(space.available);
}

std::string byte_size(uint64_t bytes) {
  char text[32];
  if (bytes >= (uint64_t{1} << 30)) std::snprintf(text, sizeof text, "%.1f GiB", bytes / double(uint64_t{1} << 30));
  else if (bytes >= (uint64_t{1} << 20)) std::snprintf(text, sizeof text, "%.1f MiB", bytes / double(1 << 20));
  else if (bytes >= 1024) std::snprintf(text, sizeof text, "%.0f KiB", bytes / 1024.0);
  else std::snprintf(text, sizeof text, "%llu bytes", static_cast<unsigned long long>(bytes));
  return text;
}

WriteError write_failure(const fs::path& file, const std::error_code& cause, std::optional<uint64_t> needed) {
  std::string message = "cannot write " + file.string() + ": " + cause.message();
  if (needed) {
    message += " (it needs " + byte_size(*needed);
    if (const auto free = free_bytes(file.parent_path())) message += "; " + byte_size(*free) + " free there";
    message += ")";
  }
  return WriteError(message);
}

void check_written(const std::ostream& out, const fs::path& file) {
  if (!out) throw write_failure(file, std::error_code(errno != 0 ? errno : EIO, std::generic_category()));
}

}  // namespace trainer
