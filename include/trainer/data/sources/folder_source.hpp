// An image-folder split (the ImageNet layout, see image_folder.hpp) as an ImageSource: each read loads the
// file, plans the crop from the header's size, decodes (reduced when the crop allows) and renders the
// transformed sample straight into the batch slot.
//   auto train = open_image_folder(config.data, /*train=*/true, config.model.num_classes, config.model.in_channels);
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainer/config/config.hpp"
#include "trainer/data/pixels/transform.hpp"
#include "trainer/data/sources/image_folder.hpp"
#include "trainer/data/sources/image_source.hpp"

namespace trainer {

class FolderSource final : public ImageSource {
 public:
  // `files` are relative to `dir`; `channels` is 3 (RGB) or 1 (grey).
  FolderSource(std::filesystem::path dir, FileList files, std::vector<std::string> class_names, TransformSpec spec,
               int64_t channels);

  size_t size() const override { return files_.size(); }
  int64_t label(size_t i) const override { return files_.label(i); }
  void read_into(size_t i, const ReadContext& context, cv::Mat& out) const override;
  bool read_or_defer(size_t i, const ReadContext& context, cv::Mat& out, EncodedImage& deferred) const override;
  bool read_encoded(size_t i, std::vector<uint8_t>& bytes) const override;
  const std::vector<std::string>& class_names() const override { return class_names_; }
  ImageShape shape() const override { return {spec_.size, spec_.size, channels_}; }
  std::string describe() const override;
  std::string sample_name(size_t i) const override { return file(i).string(); }
  std::filesystem::path file(size_t i) const { return dir_ / files_.path(i); }

 private:
  // read_into, or with `defer` read_or_defer: one reading and one plan for both paths.
  bool read_sample(size_t i, const ReadContext& context, cv::Mat& out, bool defer, EncodedImage& deferred) const;

  std::filesystem::path dir_;
  FileList files_;
  std::vector<std::string> class_names_;
  TransformSpec spec_;
  int64_t channels_;
};

// The train split (ROOT/train_dir/<class>/*) or the eval split (ROOT/val_dir/* listed in ROOT/val_labels, or
// ROOT/val_dir/<class>/* when that file does not exist). With data.val_fraction both come from one class-folder
// set, ROOT/train_dir or, when that does not exist, ROOT itself: data.val_files (or, when empty, the files
// choose_holdout picks) is the eval split, the rest the train split. Classes come from the train folder's sub-folders
// and must number model.num_classes (0: any number). `augment` picks the train transform or the eval one (default: the
// train one for the train split). Throws DataError for a missing or malformed layout.
std::shared_ptr<const FolderSource> open_image_folder(const DataConfig& data, bool train, int64_t num_classes,
                                                      int64_t channels, std::optional<bool> augment = std::nullopt);

// data.val_fraction's pick for this folder (data/holdout_split.hpp): what a new run records in data.val_files.
std::vector<std::string> choose_validation_files(const DataConfig& data);

}  // namespace trainer
