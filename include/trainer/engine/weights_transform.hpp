// The eval transform torchvision publishes with a weights entry, as the config's default: with model.weights naming
// an entry (IMAGENET1K_V1, DEFAULT) of model.arch, each of data.augment.interpolation, data.mean and data.std that
// the config leaves out takes the entry's, and so does data.augment.eval_resize when neither it nor eval_crop is
// given and the images are the entry's crop size (efficientnet_b0: bicubic, resize 256; resnet50 IMAGENET1K_V2:
// resize 232; efficientnet_v2_l: mean and std 0.5). What the config sets is kept. On the JSON before it is
// parsed, so config.resolved.json shows the values used.
//   nlohmann::json j = load_json_file(path);   apply_weights_transform(j);   Config c = parse_config(j);
#pragma once

#include <nlohmann/json.hpp>

namespace trainer {

void apply_weights_transform(nlohmann::json& config);

}  // namespace trainer
