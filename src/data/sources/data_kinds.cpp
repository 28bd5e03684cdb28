#include "trainer/data/sources/data_kinds.hpp"

#include "trainer/data/sources/folder_source.hpp"
#include "trainer/data/sources/mnist_idx.hpp"
#include "trainer/data/sources/shard_source.hpp"
#include "trainer/data/sources/subset.hpp"
#include "trainer/data/sources/synthetic.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace {

void check_mnist(const Config& c) {
  if (c.data.root.empty())
    throw ConfigError("data.root: expected the folder that holds the MNIST IDX files, got an empty string");
}

std::shared_ptr<const ImageSource> open_mnist(const Config& c, Split split) {
  return std::make_shared<MnistIdx>(MnistIdx::find_files(c.data.root, split == Split::eval ? "t10k" : "train"),
                                    c.model.num_classes);
}

void check_imagenet(const Config& c) {
  if (c.data.root.empty())
    throw ConfigError("data.root: expected the folder that holds train/ and val/, got an empty string");
  if (c.model.in_channels != 1 && c.model.in_channels != 3)
    throw ConfigError("model.in_channels: image folders give 1 (grey) or 3 (RGB) channels, got " +
                      std::to_string(c.model.in_channels));
}

std::shared_ptr<const ImageSource> open_imagenet(const Config& c, Split split) {
  return open_image_folder(c.data, split != Split::eval, c.model.num_classes, c.model.in_channels,
                           split == Split::train);
}

void check_shards(const Config& c) {
  if (c.data.root.empty())
    throw ConfigError("data.root: expected the folder or http(s) address that holds the shards, got an empty string");
  check_imagenet(c);
  const std::string& label = c.data.shards.label;
  if (label != "cls" && (label.rfind("json:", 0) != 0 || label.size() == 5))
    throw ConfigError("data.shards.label: expected \"cls\" or \"json:FIELD\", got \"" + label + "\"");
  if (c.data.val_fraction > 0)
    throw ConfigError(
        "data.val_fraction: holds out images of a class-folder set; shards have their own val split "
        "(trainer shards make packs one)");
}

std::shared_ptr<const ImageSource> open_shard_split(const Config& c, Split split) {
  return open_shards(c.data, split != Split::eval, c.model.num_classes, c.model.in_channels, split == Split::train);
}

void check_synthetic(const Config& c) {
  if (c.data.synthetic.channels != c.model.in_channels)
    throw ConfigError("data.synthetic.channels: expected model.in_channels (" + std::to_string(c.model.in_channels) +
                      "), got " + std::to_string(c.data.synthetic.channels));
}

std::shared_ptr<const ImageSource> open_synthetic(const Config& c, Split split) {
  if (c.model.num_classes == 0)
    throw ConfigError("model.num_classes: data.kind synthetic has no classes of its own; set model.num_classes");
  const auto& s = c.data.synthetic;
  const bool train = split != Split::eval;
  // The eval split gets its own images: a different seed stream, never the training samples.
  const uint64_t split_seed = static_cast<uint64_t>(c.run.seed) * 2 + (train ? 0 : 1);
  return std::make_shared<SyntheticSource>(train ? s.train_size : s.eval_size,
                                           ImageShape{s.height, s.width, s.channels}, c.model.num_classes, split_seed);
}

TransformSpec eval_transform(const DataConfig& data, const ImageShape&) {
  return make_transform_spec(data, /*train=*/false);
}

TransformSpec resize_to_input(const DataConfig&, const ImageShape& input) { return model_input_transform(input); }

}  // namespace

const std::vector<DataKindRow>& data_kind_rows() {
  // MNIST's statistics are the usual defaults for grey images, ImageNet's for photographs.
  static const std::vector<DataKindRow> rows{
      {/*kind=*/DataKind::mnist, /*mean=*/{0.1307}, /*std=*/{0.3081}, /*check=*/check_mnist, /*open=*/open_mnist,
       /*image_files=*/false, /*single_image_transform=*/resize_to_input},
      {/*kind=*/DataKind::imagenet, /*mean=*/{0.485, 0.456, 0.406}, /*std=*/{0.229, 0.224, 0.225},
       /*check=*/check_imagenet, /*open=*/open_imagenet, /*image_files=*/true,
       /*single_image_transform=*/eval_transform},
      {/*kind=*/DataKind::shards, /*mean=*/{0.485, 0.456, 0.406}, /*std=*/{0.229, 0.224, 0.225},
       /*check=*/check_shards, /*open=*/open_shard_split, /*image_files=*/true,
       /*single_image_transform=*/eval_transform},
      {/*kind=*/DataKind::synthetic, /*mean=*/{0.1307}, /*std=*/{0.3081}, /*check=*/check_synthetic,
       /*open=*/open_synthetic, /*image_files=*/false, /*single_image_transform=*/resize_to_input},
  };
  return rows;
}

const DataKindRow& data_kind_row(DataKind kind) { return row_of(data_kind_rows(), kind); }

void apply_data_kind(Config& c) {
  const DataKindRow& row = data_kind_row(c.data.kind);
  if (c.data.mean.empty()) c.data.mean = row.mean;
  if (c.data.std.empty()) c.data.std = row.std;
  if (row.check) row.check(c);
  if (c.data.val_fraction > 0 && !row.image_files)
    throw ConfigError("data.val_fraction: holds out images of a class-folder set; data.kind " +
                      enum_name(data_kinds(), c.data.kind) + " has its own evaluation split");
  if (!c.data.val_files.empty() && c.data.val_fraction <= 0)
    throw ConfigError("data.val_files: lists the images data.val_fraction held out, but data.val_fraction is 0");
  if (c.data.decode == DecodeDevice::cuda && !row.image_files)
    throw ConfigError("data.decode: \"cuda\" decodes image files; data.kind " + enum_name(data_kinds(), c.data.kind) +
                      " has none (use auto or cpu)");
}

TransformSpec image_file_transform(const DataConfig& data, const ImageShape& input) {
  return data_kind_row(data.kind).single_image_transform(data, input);
}

std::shared_ptr<const ImageSource> make_source(const Config& config, Split split) {
  const DataConfig& data = config.data;
  auto source = data_kind_row(data.kind).open(config, split);
  // An evenly spaced subset of a class-sorted list takes about the same number of images from every class.
  const int64_t limit = split == Split::eval ? data.limit_eval : data.limit_train;
  return make_subset(with_class_names(std::move(source), data.class_names), static_cast<size_t>(limit));
}

}  // namespace trainer
