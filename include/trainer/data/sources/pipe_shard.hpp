// A WebDataset shard named "pipe:CMD", as webdataset names one ("pipe:aws s3 cp s3://bucket/train-000001.tar -"):
// the command's standard output is the shard. Such output has no byte ranges to read a sample from, so the shard is
// copied once, whole, into a cache folder (data.shards.cache) and its index written beside it; it is then read as
// any local shard, and a later start finds the copy there and runs nothing. A config is data, and one from a
// stranger must not run commands: a pipe shard is opened only when the command line says --allow-pipe.
//   if (is_pipe_address(location)) path = pipe_shard_copy(location, {allowed, cache}).path;
#pragma once

#include <filesystem>
#include <string>

namespace trainer {

// "pipe:..." (the command after the colon).
bool is_pipe_address(const std::string& location);

struct PipeShards {
  bool allowed = false;  // --allow-pipe was given
  std::string cache;     // where the copies are kept (data.shards.cache, resolved by the command line)
};

struct PipeShardCopy {
  std::filesystem::path path;  // the copy: "<cache>/<digest>-train-000001.tar", its index beside it
  bool ran = false;            // the command ran now (false: the cache held the copy)
};

// The copy of `location`'s shard, made by running its command unless the cache holds it. The bytes are checked as a
// tar as they arrive; only a command that ends with exit code 0 after a whole tar leaves a copy. Callers copying the
// same shard at once (threads, or processes sharing the cache) wait for one another: the command runs once, and
// "<copy>.lock" stays beside the copy. Throws DataError
// naming the address: without --allow-pipe, no cache folder, a command that cannot start or fails (how it ended, the
// bytes it gave), output that is not a whole tar, or a copy that cannot be written.
PipeShardCopy pipe_shard_copy(const std::string& location, const PipeShards& pipes);

}  // namespace trainer
