// Views of another source restricted to some of its samples: an evenly spaced, deterministic set (the
// `data.limit_*` options and --smoke, so a short run still sees every part of the dataset), or one rank's shard.
#pragma once

#include <memory>

#include "trainer/data/sources/image_source.hpp"

namespace trainer {

// `count` >= base->size() returns `base` itself.
std::shared_ptr<const ImageSource> make_subset(std::shared_ptr<const ImageSource> base, size_t count);

// Rank `rank`'s contiguous part of `base` when it is split in `world` near-equal parts (no sample twice, none
// left out): data-parallel evaluation. `world` 1 returns `base`.
std::shared_ptr<const ImageSource> make_shard(std::shared_ptr<const ImageSource> base, size_t rank, size_t world);

// The same samples under other class names (data.class_names); `names` has one entry per class of `base`.
std::shared_ptr<const ImageSource> with_class_names(std::shared_ptr<const ImageSource> base,
                                                    std::vector<std::string> names);

}  // namespace trainer
