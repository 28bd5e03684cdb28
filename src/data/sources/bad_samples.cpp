#include "trainer/data/sources/bad_samples.hpp"

#include <cmath>

#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

BadSamples::BadSamples(std::string split, size_t split_size, double max_fraction, std::shared_ptr<spdlog::logger> log)
    : split_(std::move(split)), split_size_(split_size), max_fraction_(max_fraction), log_(std::move(log)) {}

void BadSamples::record(size_t index, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++failed_reads_;
  if (!bad_.insert(index).second) return;  // already logged
  if (log_) log_->warn("{} sample {} skipped: {}", split_, index, reason);
  const auto allowed = static_cast<size_t>(std::floor(max_fraction_ * static_cast<double>(split_size_)));
  if (bad_.size() > allowed)
    throw DataError(std::to_string(bad_.size()) + " of the " + std::to_string(split_size_) + " " + split_ +
                    " images could not be read, more than data.max_bad_fraction (" + format_number(max_fraction_) +
                    ", " + std::to_string(allowed) + " images) allows; the latest: " + reason);
}

size_t BadSamples::take_failed_reads() {
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t n = failed_reads_;
  failed_reads_ = 0;
  return n;
}

size_t BadSamples::distinct() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bad_.size();
}

}  // namespace trainer
