// The dataset formats, one row each: the normalisation its images usually get, what its keys must satisfy, its
// reader, and the properties the rest of the program asks about. A new format is one DataKind value with its
// name (config/config.hpp), one row in data_kinds.cpp and the file of its ImageSource.
//   auto train = make_source(config, Split::train);
//   if (data_kind_row(config.data.kind).image_files) ...
#pragma once

#include <memory>
#include <vector>

#include "trainer/config/config.hpp"
#include "trainer/data/pixels/transform.hpp"
#include "trainer/data/sources/image_source.hpp"

namespace trainer {

// train_unaugmented: the training images with the eval transform (`trainer eval --split train`).
enum class Split { train, eval, train_unaugmented };

struct DataKindRow {
  DataKind kind;
  std::vector<double> mean;  // data.mean when the config leaves it empty (0..1 scale)
  std::vector<double> std;
  // Throws ConfigError when the config cannot describe this kind of dataset (null: no rules).
  void (*check)(const Config& c) = nullptr;
  // Opens one split (limits and class names are applied by make_source). Throws DataError for missing or
  // malformed files.
  std::shared_ptr<const ImageSource> (*open)(const Config& c, Split split) = nullptr;
  // Its samples are image files of any size read by the image-folder reader: a single image file (predict, an
  // exported model's metadata) gets the run's eval transform (resize, center crop), and `bench data
  // --decode-only` can time the files' decode. false: images of the model's input size.
  bool image_files = false;
  // The preprocessing of a single image file for a model trained on this kind (predict, an exported model's
  // metadata): image files get the run's eval transform (resize, center crop); fixed-size images the model's
  // input size (make_transform_spec, model_input_transform).
  TransformSpec (*single_image_transform)(const DataConfig& data, const ImageShape& input) = nullptr;
};

const std::vector<DataKindRow>& data_kind_rows();
const DataKindRow& data_kind_row(DataKind kind);

// The kind's row applied to a config just read: data.mean / data.std left empty get the kind's usual values,
// then the kind's rules are checked (ConfigError naming the key). resolve_config (engine/resolve_config.hpp)
// calls it.
void apply_data_kind(Config& c);

// The row's single_image_transform for this run's data.
TransformSpec image_file_transform(const DataConfig& data, const ImageShape& input);

// Reads config.data (and model.num_classes / in_channels, run.seed). Applies data.limit_train / data.limit_eval.
// Throws DataError for missing or malformed files.
std::shared_ptr<const ImageSource> make_source(const Config& config, Split split);

}  // namespace trainer
