#include "trainer/data/sources/shard_writer.hpp"

#include <cstdio>

#include "trainer/data/sources/tar_members.hpp"
#include "trainer/util/atomic_file.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace fs = std::filesystem;

namespace {

std::string shard_name(const std::string& split, size_t number) {
  char name[64];
  std::snprintf(name, sizeof(name), "%s-%06zu.tar", split.c_str(), number);
  return name;
}

}  // namespace

ShardWriter::ShardWriter(fs::path dest, uint64_t target_bytes) : dest_(std::move(dest)), target_bytes_(target_bytes) {
  std::error_code ec;
  fs::create_directories(dest_, ec);
  if (ec) throw WriteError(dest_.string() + ": cannot create the folder: " + ec.message());
}

ShardWriter::~ShardWriter() {
  if (open_) {  // an unfinished shard (an error on the way) is not left behind under its final name
    out_.close();
    remove_file(partial_);
  }
}

void ShardWriter::begin_split(const std::string& split) {
  close_shard();
  split_ = split;
  summary_.splits[split];
}

void ShardWriter::write(const void* data, size_t size) {
  if (const std::error_code ec = out_.write(data, size))
    throw WriteError("cannot write " + partial_.string() + ": " + ec.message());
  shard_bytes_ += size;
  total_bytes_ += size;
}

void ShardWriter::add(const std::string& key, const std::string& ext, const std::vector<uint8_t>& image,
                      int64_t label) {
  const std::string cls = std::to_string(label);
  const uint64_t sample_bytes = 1024 + image.size() + tar_padding(image.size()) + 512;
  if (open_ && shard_bytes_ + sample_bytes > target_bytes_) close_shard();
  std::vector<ShardEntry>& entries = summary_.splits[split_];
  if (!open_) {
    entries.push_back({shard_name(split_, entries.size()), 0, 0, {}});
    partial_ = dest_ / (entries.back().name + ".partial");
    remove_file(partial_);
    if (const std::error_code ec = out_.create(partial_))
      throw WriteError("cannot create " + partial_.string() + ": " + ec.message());
    open_ = true;
    shard_bytes_ = 0;
    samples_.clear();
  }
  static const char zeros[512] = {};
  IndexedSample sample{key, {}};
  for (const auto& [member_ext, data, size] :
       {std::tuple<std::string, const uint8_t*, size_t>{ext, image.data(), image.size()},
        std::tuple<std::string, const uint8_t*, size_t>{"cls", reinterpret_cast<const uint8_t*>(cls.data()),
                                                        cls.size()}}) {
    const std::string header = ustar_header(key + "." + member_ext, size);
    write(header.data(), header.size());
    sample.members.push_back({member_ext, shard_bytes_, size});
    write(data, size);
    write(zeros, tar_padding(size));
  }
  samples_.push_back(std::move(sample));
  entries.back().samples += 1;
  entries.back().labels.push_back(label);
}

void ShardWriter::close_shard() {
  if (!open_) return;
  static const char zeros[1024] = {};
  write(zeros, sizeof(zeros));  // the end-of-archive blocks
  ShardEntry& entry = summary_.splits[split_].back();
  entry.bytes = shard_bytes_;
  std::error_code ec = out_.flush_to_disk();
  if (!ec) ec = out_.close();
  open_ = false;
  const fs::path final_path = dest_ / entry.name;
  if (!ec) ec = replace_file(partial_, final_path);
  if (ec) {
    remove_file(partial_);
    throw WriteError("cannot write " + final_path.string() + ": " + ec.message());
  }
  write_text_atomically(fs::path(shard_index_location(final_path.generic_string())), format_shard_index(samples_));
}

void ShardWriter::finish(const std::vector<std::string>& class_names) {
  close_shard();
  summary_.classes = class_names;
  write_text_atomically(dest_ / kShardSummaryName, format_shard_summary(summary_));
}

}  // namespace trainer
