#include "trainer/io/archive_check.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <string_view>

#include "trainer/io/pickle_scan.hpp"
#include "trainer/io/zip_records.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

namespace {

// No pickle or source LibTorch writes for a ResNet comes near 64 MiB (a checkpoint's data.pkl is a few kilobytes).
constexpr size_t kMostZipRecordBytes = size_t{64} << 20;

// A quoted name: printable, no quote or backslash (LibTorch's parser reads escapes in strings).
bool take_quoted(std::string_view& s) {
  if (s.empty() || s[0] != '"') return false;
  const size_t end = s.find('"', 1);
  if (end == std::string_view::npos) return false;
  for (const char c : s.substr(1, end - 1))
    if (c < 0x20 || c > 0x7e || c == '\\') return false;
  s.remove_prefix(end + 1);
  return true;
}

// `["a", "b", ]`: the parameter and buffer name lists.
bool is_name_list(std::string_view s) {
  if (!starts_with(s, "[")) return false;
  s.remove_prefix(1);
  while (take_quoted(s)) {
    if (!starts_with(s, ", ")) return false;
    s.remove_prefix(2);
  }
  return s == "]";
}

// One line of a class body, after its two-space indent.
bool is_attribute_line(std::string_view s) {
  for (const std::string_view list : {"__parameters__ = ", "__buffers__ = "})
    if (starts_with(s, list)) return is_name_list(s.substr(list.size()));
  if (s == "__annotations__ = []") return true;
  if (starts_with(s, "__annotations__[")) {
    s.remove_prefix(16);
    return take_quoted(s) && starts_with(s, "] = ") && is_archive_type(s.substr(4));
  }
  const size_t colon = s.find(" : ");
  return colon != std::string_view::npos && is_identifier(s.substr(0, colon)) && is_archive_type(s.substr(colon + 3));
}

bool is_class_line(std::string_view s) {
  return starts_with(s, "class ") && ends_with(s, "(Module):") && is_identifier(s.substr(6, s.size() - 6 - 9));
}

}  // namespace

std::optional<std::string> archive_pickle_problem(const char* data, size_t size) {
  // Names lowered, as LibTorch's reader matches them (zip_records refuses two that fold alike).
  const auto records = zip_records(data, size);
  std::map<std::string, uint64_t, std::less<>> record_sizes;
  for (const ZipRecord& r : records) record_sizes[ascii_lower(r.name)] = r.inflated_size;
  for (const ZipRecord& r : records) {
    const std::string name = ascii_lower(r.name);
    const bool data_pickle = ends_with(name, ".pkl");
    if (!data_pickle && !ends_with(name, ".debug_pkl")) continue;
    const std::string storage_folder = data_pickle ? name.substr(0, name.size() - 4) + "/" : std::string();
    const auto record_size = [&](std::string_view key) -> std::optional<uint64_t> {
      if (storage_folder.empty()) return std::nullopt;
      const auto it = record_sizes.find(storage_folder + ascii_lower(key));
      if (it == record_sizes.end()) return std::nullopt;
      return it->second;
    };
    const auto contents = record_contents(r, kMostZipRecordBytes);
    if (!contents) return "record " + r.name + ": does not inflate to its declared size, or is over 64 MiB";
    if (const auto problem = pickle_tensor_problem(*contents, record_size)) return "record " + r.name + ": " + *problem;
  }
  return std::nullopt;
}

std::optional<std::string> archive_code_problem(const char* data, size_t size) {
  for (const ZipRecord& r : zip_records(data, size)) {
    const std::string name = ascii_lower(r.name);  // as LibTorch's reader matches them
    if (name.find("/code/") == std::string::npos || !ends_with(name, ".py")) continue;
    const auto source = record_contents(r, kMostZipRecordBytes);
    if (!source) return "record " + r.name + ": does not inflate to its declared size, or is over 64 MiB";
    std::string_view rest = *source;
    for (size_t number = 1; !rest.empty(); ++number) {
      const size_t end = rest.find('\n');
      const std::string_view line = rest.substr(0, end);
      rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
      if (line.empty() || is_class_line(line) || (starts_with(line, "  ") && is_attribute_line(line.substr(2))))
        continue;
      return "record " + r.name + ": line " + std::to_string(number) +
             " is not a class attribute as a checkpoint declares it";
    }
  }
  return std::nullopt;
}

}  // namespace trainer
