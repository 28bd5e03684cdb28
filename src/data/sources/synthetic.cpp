#include "trainer/data/sources/synthetic.hpp"

#include "trainer/util/hash.hpp"

namespace trainer {

SyntheticSource::SyntheticSource(size_t size, ImageShape shape, int64_t num_classes, uint64_t seed)
    : size_(size), shape_(shape), num_classes_(num_classes), seed_(seed) {
  for (int64_t c = 0; c < num_classes; ++c) class_names_.push_back("class_" + std::to_string(c));
}

int64_t SyntheticSource::label(size_t i) const {
  return static_cast<int64_t>(hash_combine(seed_, i) % static_cast<uint64_t>(num_classes_));
}

void SyntheticSource::read_into(size_t i, const ReadContext&, cv::Mat& image) const {
  const int64_t y = label(i);
  const int h = static_cast<int>(shape_.height), w = static_cast<int>(shape_.width);
  const int c = static_cast<int>(shape_.channels);
  SplitMix64 rng(hash_combine(seed_ ^ 0x5EED, i));
  for (int r = 0; r < h; ++r) {
    const bool band = (r * num_classes_ / h) == y;
    uint8_t* row = image.ptr<uint8_t>(r);
    for (int k = 0; k < w * c; ++k) row[k] = static_cast<uint8_t>((band ? 128 : 0) + rng.below(128));
  }
}

std::string SyntheticSource::describe() const {
  return "synthetic (" + std::to_string(size_) + " images, " + std::to_string(shape_.height) + "x" +
         std::to_string(shape_.width) + "x" + std::to_string(shape_.channels) + ")";
}

}  // namespace trainer
