// What a checkpoint is continued, evaluated or exported with: its config (the checkpoint's own, or --config, plus
// --set overrides; changes that would make the saved state meaningless are refused: for training on, the model,
// optim.name and data.kind; for an evaluation, the model) and its model with the raw or EMA weights.
//   const Config c = config_for_checkpoint(checkpoint, args.config, args.overrides).config;
//   ClassifierPtr model = model_from_checkpoint(checkpoint, c.model, input, args.ema);
#pragma once

#include <string>
#include <vector>

#include "trainer/config/config.hpp"
#include "trainer/data/pixels/image_shape.hpp"
#include "trainer/io/checkpoint.hpp"
#include "trainer/models/classifier.hpp"

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

// What the checkpoint is read for: training on from it refuses another model, optimizer kind or data kind; an
// evaluation, export or prediction uses only the model, so only the model is refused (a run tuned with AdamW is
// evaluated under a config that says SGD, or on a folder after training on shards).
enum class CheckpointUse { continue_training, evaluate };

// Throws CheckpointError naming the first refused key that differs.
CheckpointConfig config_for_checkpoint(const LoadedCheckpoint& checkpoint, const std::string& config_file,
                                       const std::vector<std::string>& overrides,
                                       CheckpointUse use = CheckpointUse::continue_training);

// The checkpoint's model built for `input` (on the CPU, float32) with its weights, or with its EMA weights when
// `ema`: a CheckpointError when it holds none.
ClassifierPtr model_from_checkpoint(const LoadedCheckpoint& checkpoint, const ModelConfig& model,
                                    const ImageShape& input, bool ema);

}  // namespace trainer
