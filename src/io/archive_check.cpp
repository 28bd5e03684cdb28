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
constexpr size_t kMostRecordBytes = size_t{64} << 20;

// An attribute's type as OutputArchive writes it: a value type, a tuple or list of them (AdamW's betas are a
// Tuple[float, float]), or an archive class (__torch__.___torch_mangle_3.Module).
bool is_attribute_type(std::string_view s, int depth = 0) {
  if (s == "Tensor" || s == "str" || s == "float" || s == "int" || s == "bool") return true;
  for (const std::string_view outer : {"Tuple[", "List[", "Optional["}) {
    if (!starts_with(s, outer) || !ends_with(s, "]") || depth >= 4) continue;
    const std::string_view inner = s.substr(outer.size(), s.size() - outer.size() - 1);
    size_t items = 0, from = 0;
    int level = 0;
    for (size_t i = 0; i <= inner.size(); ++i) {
      if (i < inner.size() && inner[i] == '[') ++level;
      if (i < inner.size() && inner[i] == ']' && --level < 0) return false;
      if (i == inner.size() || (level == 0 && inner.compare(i, 2, ", ") == 0)) {
        if (!is_attribute_type(inner.substr(from, i - from), depth + 1)) return false;
        ++items;
        from = i + 2;
      }
    }
    return level == 0 && (outer == "Tuple[" || items == 1);
  }
  if (!starts_with(s, "__torch__")) return false;
  for (size_t at = 0;;) {
    const size_t dot = s.find('.', at);
    if (!is_identifier(s.substr(at, dot - at))) return false;
    if (dot == std::string_view::npos) return true;
    at = dot + 1;
  }
}

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
    return take_quoted(s) && starts_with(s, "] = ") && is_attribute_type(s.substr(4));
  }
  const size_t colon = s.find(" : ");
  return colon != std::string_view::npos && is_identifier(s.substr(0, colon)) && is_attribute_type(s.substr(colon + 3));
}

bool is_class_line(std::string_view s) {
  return starts_with(s, "class ") && ends_with(s, "(Module):") && is_identifier(s.substr(6, s.size() - 6 - 9));
}

}  // namespace

std::optional<std::string> archive_pickle_problem(const char* data, size_t size) {
  const auto records = zip_records(data, size);
  std::map<std::string, uint64_t, std::less<>> record_sizes;
  for (const ZipRecord& r : records) record_sizes[r.name] = r.inflated_size;
  for (const ZipRecord& r : records) {
    const bool data_pickle = ends_with(r.name, ".pkl");
    if (!data_pickle && !ends_with(r.name, ".debug_pkl")) continue;
    const std::string storage_folder = data_pickle ? r.name.substr(0, r.name.size() - 4) + "/" : std::string();
    const auto record_size = [&](std::string_view key) -> std::optional<uint64_t> {
      if (storage_folder.empty()) return std::nullopt;
      const auto it = record_sizes.find(storage_folder + std::string(key));
      if (it == record_sizes.end()) return std::nullopt;
      return it->second;
    };
    const auto contents = record_contents(r, kMostRecordBytes);
    if (!contents) return "record " + r.name + ": does not inflate to its declared size, or is over 64 MiB";
    if (const auto problem = pickle_tensor_problem(*contents, record_size)) return "record " + r.name + ": " + *problem;
  }
  return std::nullopt;
}

std::optional<std::string> archive_code_problem(const char* data, size_t size) {
  for (const ZipRecord& r : zip_records(data, size)) {
    if (r.name.find("/code/") == std::string::npos || !ends_with(r.name, ".py")) continue;
    const auto source = record_contents(r, kMostRecordBytes);
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
