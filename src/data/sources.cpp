#include "trainer/data/sources.hpp"

#include "trainer/data/folder_source.hpp"
#include "trainer/data/mnist_idx.hpp"
#include "trainer/data/subset.hpp"
#include "trainer/data/synthetic.hpp"

namespace trainer {

std::shared_ptr<const ImageSource> make_source(const Config& config, Split split) {
  const DataConfig& data = config.data;
  const int64_t num_classes = config.model.num_classes;
  const bool train_images = split != Split::eval;
  std::shared_ptr<const ImageSource> source;
  switch (data.kind) {
    case DataKind::mnist:
      source = std::make_shared<MnistIdx>(MnistIdx::find_files(data.root, train_images ? "train" : "t10k"),
                                          num_classes);
      break;
    case DataKind::imagenet:
      source = open_image_folder(data, train_images, num_classes, config.model.in_channels, split == Split::train);
      break;
    case DataKind::synthetic: {
      const auto& s = data.synthetic;
      // The eval split gets its own images: a different seed stream, never the training samples.
      const uint64_t split_seed = static_cast<uint64_t>(config.run.seed) * 2 + (train_images ? 0 : 1);
      source = std::make_shared<SyntheticSource>(train_images ? s.train_size : s.eval_size,
                                                 ImageShape{s.height, s.width, s.channels}, num_classes, split_seed);
      break;
    }
  }
  // An evenly spaced subset of a class-sorted list takes about the same number of images from every class.
  const int64_t limit = train_images ? data.limit_train : data.limit_eval;
  return make_subset(with_class_names(std::move(source), data.class_names), static_cast<size_t>(limit));
}

}  // namespace trainer
