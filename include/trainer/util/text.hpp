// Small string helpers shared by the config reader and the error messages.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace trainer {

// "a, b, c"
std::string join(const std::vector<std::string>& items, const std::string& separator = ", ");

// The candidate closest to `word` by edit distance, or "" when none is plausibly a typo of it.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

// A number as the shortest text that reads back to the same double ("0.1", "1e-05").
std::string format_number(double value);

// Whether `text` is well-formed UTF-8 (JSON's strings must be; a --set value from a shell may not be).
bool is_utf8(const std::string& text);

// Whether `text` begins, or ends, with `part` (C++20's starts_with and ends_with).
inline bool starts_with(std::string_view text, std::string_view part) { return text.substr(0, part.size()) == part; }
inline bool ends_with(std::string_view text, std::string_view part) {
  return text.size() >= part.size() && text.substr(text.size() - part.size()) == part;
}

// Whether `text` is an ASCII Python identifier (letters, digits, '_'; not starting with a digit): TorchScript's
// attribute names.
bool is_identifier(std::string_view text);

// `text` with A-Z lowered and every other byte kept: how miniz (LibTorch's zip reader) compares record names, and
// how file extensions compare. Not locale-dependent, unlike std::tolower.
std::string ascii_lower(std::string_view text);

// The text up to its first newline: the one-line form of an exception message (LibTorch's carry a backtrace).
std::string first_line(const std::string& text);

}  // namespace trainer
