// The rule for an epoch's last, partial training batch (data.drop_last). A BatchNorm layer cannot train on one
// image: at small sizes LibTorch stops with "Expected more than 1 value per channel when training", and even
// where it runs, the statistics of one image are noise. With data-parallel training each process gets a share
// of the batch, so the smallest share is what counts.
//   true:  the partial batch is always dropped (timm's and NVIDIA's default);
//   false: it is always kept; a ConfigError at start when a share would be too small for the model;
//   auto:  kept, unless a share would be too small (under 2 images with BatchNorm, under 1 otherwise).
//   const LastBatch rule = last_batch_rule(images, config.data, world_size, has_batch_norm(*model));
//   if (!rule.note.empty()) log->info("{}", rule.note);
#pragma once

#include <cstdint>
#include <string>

#include "trainer/config/config.hpp"

namespace trainer {

struct LastBatch {
  bool drop = false;
  std::string note;  // one line for the run log when a partial batch exists: kept or dropped, and why
};

// Throws ConfigError for data.drop_last false with a share too small, and when auto would drop the only batch.
LastBatch last_batch_rule(size_t images, const DataConfig& data, int64_t world_size, bool batch_norm);

}  // namespace trainer
