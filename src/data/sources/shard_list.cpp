#include "trainer/data/sources/shard_list.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <system_error>

#include "trainer/data/sources/pipe_shard.hpp"
#include "trainer/platform/files.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/http_range.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxNames = 1000000;

// The alternatives of one brace group's body: "a,b" or "LO..HI" (LO's width, when it has leading zeros, pads).
std::vector<std::string> alternatives(const std::string& body, const std::string& pattern) {
  const size_t dots = body.find("..");
  if (dots != std::string::npos && body.find(',') == std::string::npos) {
    const std::string lo = body.substr(0, dots), hi = body.substr(dots + 2);
    uint64_t a = 0, b = 0;
    const auto number = [](const std::string& s, uint64_t& v) {
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      return !s.empty() && s.size() <= 18 && ec == std::errc() && end == s.data() + s.size();
    };
    if (!number(lo, a) || !number(hi, b))
      throw ConfigError(pattern + ": a brace range is two whole numbers, as {000000..000127}; got {" + body + "}");
    if (b < a) throw ConfigError(pattern + ": the range {" + body + "} runs backwards");
    if (b - a >= kMaxNames) throw ConfigError(pattern + ": {" + body + "} stands for more than a million shards");
    const size_t width = lo.size() > 1 && lo[0] == '0' ? lo.size() : 0;
    std::vector<std::string> out;
    for (uint64_t v = a; v <= b; ++v) {
      std::string s = std::to_string(v);
      if (s.size() < width) s.insert(0, width - s.size(), '0');
      out.push_back(std::move(s));
    }
    return out;
  }
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t comma; (comma = body.find(',', start)) != std::string::npos; start = comma + 1)
    out.push_back(body.substr(start, comma - start));
  out.push_back(body.substr(start));
  return out;
}

}  // namespace

std::vector<std::string> expand_braces(const std::string& pattern) {
  std::vector<std::string> names{""};
  size_t i = 0;
  while (i < pattern.size()) {
    const size_t open = pattern.find('{', i);
    const size_t close_before = pattern.find('}', i);
    if (close_before < open) throw ConfigError(pattern + ": a '}' without its '{'");
    if (open == std::string::npos) {
      for (auto& n : names) n += pattern.substr(i);
      break;
    }
    const size_t close = pattern.find('}', open);
    if (close == std::string::npos) throw ConfigError(pattern + ": a '{' without its '}'");
    const std::string body = pattern.substr(open + 1, close - open - 1);
    if (body.find('{') != std::string::npos) throw ConfigError(pattern + ": braces inside braces are not supported");
    const std::vector<std::string> alts = alternatives(body, pattern);
    if (names.size() * alts.size() > kMaxNames) throw ConfigError(pattern + ": stands for more than a million shards");
    std::vector<std::string> next;
    next.reserve(names.size() * alts.size());
    for (const auto& n : names)
      for (const auto& a : alts) next.push_back(n + pattern.substr(i, open - i) + a);
    names = std::move(next);
    i = close + 1;
  }
  return names;
}

std::string shard_location(const std::string& root, const std::string& name) {
  if (root.empty() || root == "." || is_http_address(name) || is_pipe_address(name) || fs::path(name).is_absolute())
    return name;
  if (is_http_address(root)) return root.back() == '/' ? root + name : root + "/" + name;
  return (fs::path(root) / fs::path(name)).generic_string();
}

std::vector<std::string> list_shards(const std::string& root, const std::string& spec) {
  const std::string where = shard_location(root, spec);
  std::vector<std::string> names;
  std::error_code ec;
  if (is_pipe_address(spec)) {  // a command per shard, its braces expanded as webdataset does
    names = expand_braces(spec);
  } else if (ends_with(spec, ".txt")) {  // one shard per line, relative to the list's own folder or address
    std::vector<uint8_t> bytes;
    if (is_http_address(where)) {
      try {
        http_read(where, 0, 0, bytes);
      } catch (const Error& e) {
        throw DataError(e.message() + " (the shard list)");
      }
    } else if (const std::error_code read = read_file(where, bytes)) {
      throw DataError(where + ": cannot read the shard list: " + read.message());
    }
    const std::string text(bytes.begin(), bytes.end());
    const std::string base = where.substr(0, where.find_last_of('/') == std::string::npos ? 0 : where.rfind('/'));
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      std::string line = text.substr(start, end - start);
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      if (!line.empty() && line[0] != '#') names.push_back(shard_location(base, line));
      start = end + 1;
    }
  } else if (!is_http_address(where) && fs::is_directory(where, ec)) {
    for (const auto& entry : fs::directory_iterator(where, ec))
      if (entry.path().extension() == ".tar") names.push_back(entry.path().generic_string());
    if (ec) throw DataError(where + ": cannot list the folder: " + ec.message());
    std::sort(names.begin(), names.end());
  } else {
    for (const auto& n : expand_braces(spec)) names.push_back(shard_location(root, n));
  }
  if (names.empty()) throw DataError(where + ": names no shard");
  return names;
}

}  // namespace trainer
