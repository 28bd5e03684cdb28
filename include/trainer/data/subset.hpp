// A view of another source restricted to an evenly spaced, deterministic set of its samples: the
// `data.limit_*` options and --smoke use it so a short run still sees every part of the dataset.
#pragma once

#include <memory>

#include "trainer/data/image_source.hpp"

namespace trainer {

// `count` >= base->size() returns `base` itself.
std::shared_ptr<const ImageSource> make_subset(std::shared_ptr<const ImageSource> base, size_t count);

// The same samples under other class names (data.class_names); `names` has one entry per class of `base`.
std::shared_ptr<const ImageSource> with_class_names(std::shared_ptr<const ImageSource> base,
                                                    std::vector<std::string> names);

}  // namespace trainer
