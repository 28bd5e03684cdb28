// The config to continue or evaluate a checkpoint with: the checkpoint's own, or --config, plus --set
// overrides. Changes that would make the saved state meaningless (any model.* key) are refused.
#pragma once

#include <string>
#include <vector>

#include "trainer/config/config.hpp"
#include "trainer/io/checkpoint.hpp"

namespace trainer {

struct CheckpointConfig {
  Config config;
  std::vector<std::string> changes;  // "train.epochs: 2 -> 4", one per key that differs from the checkpoint
};

// Throws CheckpointError naming the first model key that differs.
CheckpointConfig config_for_checkpoint(const LoadedCheckpoint& checkpoint, const std::string& config_file,
                                       const std::vector<std::string>& overrides);

}  // namespace trainer
