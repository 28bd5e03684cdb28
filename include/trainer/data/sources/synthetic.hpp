// Deterministic generated images for tests and benchmarks: sample i of a given seed is always the same.
// Each class brightens its own band of rows over uniform noise, so a model can learn it.
#pragma once

#include <cstdint>

#include "trainer/data/sources/image_source.hpp"

namespace trainer {

class SyntheticSource final : public ImageSource {
 public:
  SyntheticSource(size_t size, ImageShape shape, int64_t num_classes, uint64_t seed);

  size_t size() const override { return size_; }
  int64_t label(size_t i) const override;
  void read_into(size_t i, const ReadContext& context, cv::Mat& out) const override;
  const std::vector<std::string>& class_names() const override { return class_names_; }
  ImageShape shape() const override { return shape_; }
  std::string describe() const override;

 private:
  size_t size_;
  ImageShape shape_;
  int64_t num_classes_;
  uint64_t seed_;
  std::vector<std::string> class_names_;
};

}  // namespace trainer
