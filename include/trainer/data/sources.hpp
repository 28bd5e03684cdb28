// The factory from config to ImageSource: one entry per data.kind.
//   auto train = make_source(config, Split::train);
#pragma once

#include <memory>

#include "trainer/config/config.hpp"
#include "trainer/data/image_source.hpp"

namespace trainer {

// train_unaugmented: the training images with the eval transform (`trainer eval --split train`).
enum class Split { train, eval, train_unaugmented };

// Reads config.data (and model.num_classes / in_channels, run.seed). Applies data.limit_train / data.limit_eval.
// Throws DataError for missing or malformed files.
std::shared_ptr<const ImageSource> make_source(const Config& config, Split split);

}  // namespace trainer
