#include "trainer/data/sources.hpp"

#include <stdexcept>

#include "trainer/data/folder_source.hpp"
#include "trainer/data/mnist_idx.hpp"
#include "trainer/data/subset.hpp"
#include "trainer/data/synthetic.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace {

using Opener = std::shared_ptr<const ImageSource> (*)(const Config& c, Split split);

std::shared_ptr<const ImageSource> open_mnist(const Config& c, Split split) {
  return std::make_shared<MnistIdx>(MnistIdx::find_files(c.data.root, split == Split::eval ? "t10k" : "train"),
                                    c.model.num_classes);
}

std::shared_ptr<const ImageSource> open_imagenet(const Config& c, Split split) {
  return open_image_folder(c.data, split != Split::eval, c.model.num_classes, c.model.in_channels,
                           split == Split::train);
}

std::shared_ptr<const ImageSource> open_synthetic(const Config& c, Split split) {
  if (c.model.num_classes == 0)
    throw ConfigError("model.num_classes: data.kind synthetic has no classes of its own; set model.num_classes");
  const auto& s = c.data.synthetic;
  const bool train = split != Split::eval;
  // The eval split gets its own images: a different seed stream, never the training samples.
  const uint64_t split_seed = static_cast<uint64_t>(c.run.seed) * 2 + (train ? 0 : 1);
  return std::make_shared<SyntheticSource>(train ? s.train_size : s.eval_size, ImageShape{s.height, s.width, s.channels},
                                           c.model.num_classes, split_seed);
}

// The reader of each data.kind (its name, defaults and rules: config/data_kinds.cpp).
Opener opener(DataKind kind) {
  static const std::pair<DataKind, Opener> table[] = {
      {DataKind::mnist, open_mnist},
      {DataKind::imagenet, open_imagenet},
      {DataKind::synthetic, open_synthetic},
  };
  for (const auto& [k, open] : table)
    if (k == kind) return open;
  throw std::logic_error("data kind without a reader in data/sources.cpp");
}

}  // namespace

std::shared_ptr<const ImageSource> make_source(const Config& config, Split split) {
  const DataConfig& data = config.data;
  auto source = opener(data.kind)(config, split);
  // An evenly spaced subset of a class-sorted list takes about the same number of images from every class.
  const int64_t limit = split == Split::eval ? data.limit_eval : data.limit_train;
  return make_subset(with_class_names(std::move(source), data.class_names), static_cast<size_t>(limit));
}

}  // namespace trainer
