#include "trainer/util/glob.hpp"

namespace trainer {

namespace {

// The set whose '[' is at pattern[open]: whether `c` is in it, and the index just past its ']'. A '[' without a
// closing ']' is no set (end == 0): it matches a literal '['. As in fnmatch, a ']' right after "[" or "[!" is a
// member, and '\' takes the next character literally.
struct Set {
  bool matches = false;
  size_t end = 0;
};
Set match_set(const std::string& pattern, size_t open, char c) {
  size_t i = open + 1;
  const bool negate = i < pattern.size() && (pattern[i] == '!' || pattern[i] == '^');
  if (negate) ++i;
  const size_t first = i;
  bool found = false;
  auto literal = [&](size_t& at) {  // one member character, escapes resolved
    if (pattern[at] == '\\' && at + 1 < pattern.size()) ++at;
    return pattern[at++];
  };
  while (i < pattern.size() && (pattern[i] != ']' || i == first)) {
    const char low = literal(i);
    char high = low;
    if (i + 1 < pattern.size() && pattern[i] == '-' && pattern[i + 1] != ']') {
      ++i;
      high = literal(i);
    }
    if (low <= c && c <= high) found = true;
  }
  if (i >= pattern.size()) return {};
  return {found != negate, i + 1};
}

}  // namespace

bool glob_match(const std::string& pattern, const std::string& text) {
  // Greedy with one point to return to after the last '*': enough for '*' with single-character wildcards.
  size_t p = 0, t = 0, star_p = std::string::npos, star_t = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star_p = ++p;
      star_t = t;
      continue;
    }
    bool ok = false;
    size_t next = p + 1;
    if (p < pattern.size()) {
      const char c = pattern[p];
      if (c == '?') {
        ok = true;
      } else if (const Set set = c == '[' ? match_set(pattern, p, text[t]) : Set{}; set.end) {
        ok = set.matches;
        next = set.end;
      } else if (c == '\\' && p + 1 < pattern.size()) {
        ok = pattern[p + 1] == text[t];
        next = p + 2;
      } else {
        ok = c == text[t];
      }
    }
    if (ok) {
      p = next;
      ++t;
    } else if (star_p != std::string::npos) {
      p = star_p;  // the last '*' takes one more character
      t = ++star_t;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool glob_match_any(const std::vector<std::string>& patterns, const std::string& text) {
  for (const auto& pattern : patterns)
    if (glob_match(pattern, text)) return true;
  return false;
}

}  // namespace trainer
