// The record of unreadable samples of one split, shared by its loader threads. A bad sample is logged once
// (with the reason, which names the file), counted, and replaced or dropped by its batch; once more than
// data.max_bad_fraction of the split has failed, the next failure stops the run.
//   auto bad = std::make_shared<BadSamples>("train", source->size(), 0.001, logger);
//   BatchDataset ds(source, pin, {seed, epoch}, bad);   ...   size_t n = bad->take_failed_reads();
#pragma once

#include <spdlog/logger.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

namespace trainer {

class BadSamples {
 public:
  // `log` may be null (nothing is logged).
  BadSamples(std::string split, size_t split_size, double max_fraction, std::shared_ptr<spdlog::logger> log);

  // Sample `index` could not be read for `reason`. Throws DataError when the distinct bad samples now exceed
  // the allowed share of the split.
  void record(size_t index, const std::string& reason);

  // Failed reads since the last call (per epoch, for the epoch summary), repeats of a sample included.
  size_t take_failed_reads();
  size_t distinct() const;

 private:
  std::string split_;
  size_t split_size_;
  double max_fraction_;
  std::shared_ptr<spdlog::logger> log_;
  mutable std::mutex mutex_;
  std::unordered_set<size_t> bad_;
  size_t failed_reads_ = 0;
};

}  // namespace trainer
