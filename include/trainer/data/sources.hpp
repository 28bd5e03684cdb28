// The factory from data config to ImageSource: one entry per data.kind.
//   auto train = make_source(config.data, Split::train, config.model.num_classes, config.run.seed);
#pragma once

#include <memory>

#include "trainer/config/config.hpp"
#include "trainer/data/image_source.hpp"

namespace trainer {

enum class Split { train, eval };

// Applies data.limit_train / data.limit_eval. Throws DataError for missing or malformed files.
std::shared_ptr<const ImageSource> make_source(const DataConfig& data, Split split, int64_t num_classes,
                                               int64_t seed);

}  // namespace trainer
