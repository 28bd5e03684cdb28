// Shell-style wildcard matching, as POSIX fnmatch(3) with no flags does it, on every platform: '*' any run of
// characters (dots included), '?' one character, "[abc]" / "[a-z]" / "[!a-z]" one of (or none of) a set, and '\'
// taking the next character literally. POSIX's classes inside sets ("[[:digit:]]") are not
// supported.
//   glob_match("layer4.*.bn?.*", "layer4.0.bn1.weight")  // true
#pragma once

#include <string>
#include <vector>

namespace trainer {

bool glob_match(const std::string& pattern, const std::string& text);

// Whether any of `patterns` matches `text` (model.freeze, a model row's head).
bool glob_match_any(const std::vector<std::string>& patterns, const std::string& text);

}  // namespace trainer
