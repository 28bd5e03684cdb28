// Packs samples into WebDataset shards of about a target size: SPLIT-000000.tar, SPLIT-000001.tar, ... each with
// its index (SPLIT-000000.idx, DALI's format) and, once every split is written, shards.json (shard_summary.hpp).
// A sample is "KEY.EXT" (the image's bytes as they are) and "KEY.cls" (its class index as text); the headers carry
// no time or owner, so the same samples make the same bytes. Each file is written to a temporary name and moved
// into place whole.
//   ShardWriter writer(dest, /*target_bytes=*/256 << 20);
//   writer.begin_split("train");
//   writer.add("000000001", "jpg", bytes, label);  ...
//   writer.finish(class_names);
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "trainer/data/sources/shard_index.hpp"
#include "trainer/data/sources/shard_summary.hpp"
#include "trainer/platform/files.hpp"

namespace trainer {

class ShardWriter {
 public:
  ShardWriter(std::filesystem::path dest, uint64_t target_bytes);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  void begin_split(const std::string& split);
  // Throws WriteError naming the shard when it cannot be written.
  void add(const std::string& key, const std::string& ext, const std::vector<uint8_t>& image, int64_t label);
  // Closes the last shard and writes shards.json.
  void finish(const std::vector<std::string>& class_names);

  // What has been written so far (for progress lines).
  const ShardSummary& summary() const { return summary_; }
  uint64_t bytes_written() const { return total_bytes_; }

 private:
  void close_shard();
  void write(const void* data, size_t size);

  std::filesystem::path dest_;
  uint64_t target_bytes_;
  std::string split_;
  ShardSummary summary_;
  OutputFile out_;
  bool open_ = false;
  std::filesystem::path partial_;
  uint64_t shard_bytes_ = 0, total_bytes_ = 0;
  std::vector<IndexedSample> samples_;
};

}  // namespace trainer
