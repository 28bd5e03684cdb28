#include "trainer/data/pixels/sample_augment.hpp"

#include <sstream>

#include "trainer/data/pixels/color_jitter.hpp"

namespace trainer {

namespace {

// Separate streams per augmentation, so turning one on does not change the others' draws.
constexpr uint64_t kPixelStream = 0xA0701A6Dull, kEraseStream = 0xE2A5E5EEDull;

}  // namespace

SampleAugment::SampleAugment(const AugmentConfig& config)
    : jitter_(config.color_jitter),
      policy_(config.auto_augment),
      erasing_(config.random_erasing),
      policy_name_(enum_name(auto_augment_kinds(), config.auto_augment.name)) {}

void SampleAugment::apply(cv::Mat& image, uint64_t sample_seed) const {
  SplitMix64 rng(hash_combine(sample_seed, kPixelStream));
  apply_color_jitter(image, jitter_, rng);
  if (policy_.active()) policy_.apply(image, rng);
}

EraseBox SampleAugment::plan_erase(int64_t height, int64_t width, uint64_t sample_seed) const {
  SplitMix64 rng(hash_combine(sample_seed, kEraseStream));
  return trainer::plan_erase(erasing_, height, width, rng);
}

std::string SampleAugment::describe() const {
  std::ostringstream out;
  const char* sep = "";
  if (jitter_.enabled()) {
    out << "color jitter";
    sep = ", ";
  }
  if (policy_.active()) {
    out << sep << policy_name_;
    sep = ", ";
  }
  if (erases()) out << sep << "random erasing " << erasing_.prob;
  return out.str();
}

}  // namespace trainer
