// shards.json, written by `trainer shards make` beside the shards it packs: the class names, and per split the
// shards in order with their sample counts, sizes and labels, so a run finds its shards and labels without reading
// every label member (one request per sample when the shards are remote).
//   {"format": "trainer-shards 1", "classes": ["n01440764", ...],
//    "splits": {"train": [{"name": "train-000000.tar", "samples": 1251, "bytes": 268435456, "labels": [0, 0, ...]}]}}
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace trainer {

struct ShardEntry {
  std::string name;  // relative to the summary's folder or address
  uint64_t samples = 0;
  uint64_t bytes = 0;
  std::vector<int64_t> labels;  // one per sample, in shard order
};

struct ShardSummary {
  std::vector<std::string> classes;
  std::map<std::string, std::vector<ShardEntry>> splits;  // "train", "val"
};

inline constexpr const char* kShardSummaryName = "shards.json";

// Throws DataError naming `where` for text that is not such a summary (labels that do not number `samples`, a
// label outside the classes, a name that leaves the folder).
ShardSummary parse_shard_summary(const std::string& text, const std::string& where);
std::string format_shard_summary(const ShardSummary& summary);

}  // namespace trainer
