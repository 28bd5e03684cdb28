// The config to continue or evaluate a checkpoint with: the checkpoint's own, or --config, plus --set
// overrides. Changes that would make the saved state meaningless (the model, optim.name, data.kind) are refused.
#pragma once

#include <string>
#include <vector>

#include "trainer/config/config.hpp"
#include "trainer/io/checkpoint.hpp"

namespace trainer {

// One key whose value differs from the checkpoint's config.
struct ConfigChange {
  std::string key;     // "train.epochs"
  std::string before;  // JSON text: "2"
  std::string after;   // "4"

  std::string describe() const { return key + ": " + before + " -> " + after; }  // "train.epochs: 2 -> 4"
};

struct CheckpointConfig {
  Config config;
  std::vector<ConfigChange> changes;
};

// Throws CheckpointError naming the first refused key that differs.
CheckpointConfig config_for_checkpoint(const LoadedCheckpoint& checkpoint, const std::string& config_file,
                                       const std::vector<std::string>& overrides);

}  // namespace trainer
