// Which shards a split reads (data.shards.train / val): a brace pattern as webdataset and DALI write them
// ("train-{000000..001023}.tar", "{a,b}-{0..9}.tar"), a .txt file with one shard per line, or a folder of .tar
// files; each relative to data.root (a folder or an http(s) address) unless it is absolute or an address itself.
// "pipe:CMD" stands for commands whose output is a shard, one per name its braces expand to (pipe_shard.hpp).
//   auto shards = list_shards("https://host/imagenet", "train-{0000..0127}.tar");
#pragma once

#include <string>
#include <vector>

namespace trainer {

// Every name the pattern stands for, in order. Throws ConfigError naming the pattern for unbalanced braces, a
// range whose ends are not numbers, or more than a million names.
std::vector<std::string> expand_braces(const std::string& pattern);

// `name` under `root` ("" or "." leaves it as it is): a path joined as paths are, an address with one slash.
std::string shard_location(const std::string& root, const std::string& name);

// The shards of `spec` under `root`, as locations (paths or addresses). Throws DataError for a list file or folder
// that cannot be read or names no shard.
std::vector<std::string> list_shards(const std::string& root, const std::string& spec);

}  // namespace trainer
