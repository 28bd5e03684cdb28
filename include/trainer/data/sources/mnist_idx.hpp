// MNIST-format IDX files (MNIST, Fashion-MNIST, KMNIST): images (magic 2051) and labels (magic 2049),
// plain or gzip-compressed, held in memory as uint8.
//   MnistIdx train(MnistIdx::find_files("/usr/share/datasets/fashion-mnist", "train"), 10);
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "trainer/data/sources/image_source.hpp"

namespace trainer {

struct IdxFiles {
  std::filesystem::path images;
  std::filesystem::path labels;
};

class MnistIdx final : public ImageSource {
 public:
  // Finds <prefix>-images*/<prefix>-labels* in `root` (prefix "train" or "t10k"), preferring uncompressed.
  static IdxFiles find_files(const std::filesystem::path& root, const std::string& prefix);

  // Validates magic numbers, dimensions, sizes, matching counts and labels < num_classes (0: the largest label
  // + 1, so class_names() gives the count).
  MnistIdx(const IdxFiles& files, int64_t num_classes);

  size_t size() const override { return labels_.size(); }
  int64_t label(size_t i) const override { return labels_[i]; }
  void read_into(size_t i, const ReadContext& context, cv::Mat& out) const override;
  const std::vector<std::string>& class_names() const override { return class_names_; }
  ImageShape shape() const override { return {rows_, cols_, 1}; }
  std::string describe() const override;
  std::string sample_name(size_t i) const override { return files_.images.string() + "#" + std::to_string(i); }

 private:
  IdxFiles files_;
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  std::vector<uint8_t> pixels_;  // n * rows * cols, row-major
  std::vector<uint8_t> labels_;
  std::vector<std::string> class_names_;
};

// The size a file's first bytes declare (an IDX header's dimensions), or nullopt until they are all there.
using DeclaredSize = std::function<std::optional<uint64_t>(const std::vector<uint8_t>& head)>;

// The whole file, decompressed when it is gzip (by content, not by name), never inflated past the size its
// first bytes declare, and refused when that size is above 64 MiB and 64 times the compressed bytes (a few
// megabytes of zeros declaring gigabytes). Throws DataError naming it.
std::vector<uint8_t> read_maybe_gzip(const std::filesystem::path& file, const DeclaredSize& declared_size);

}  // namespace trainer
