// Shared setup for the end-to-end tests: generated IDX data, a config pointing at it, and the binary.
#pragma once

#include <nlohmann/json.hpp>

#include "support/fixtures.hpp"

namespace trainer::testing {

inline CommandResult trainer_cli(const std::string& args) { return run_command(std::string(TRAINER_BIN) + " " + args); }

// A small, fast run: 512 train / 256 test images of 28x28, mnist_cnn, 2 threads, 2 loader workers.
inline nlohmann::json small_run_config(const fs::path& data_root) {
  return {
      {"run", {{"seed", 3}, {"threads", 2}}},
      {"data",
       {{"kind", "mnist"}, {"root", data_root.string()}, {"batch_size", 32}, {"eval_batch_size", 100}, {"workers", 2}}},
      {"model", {{"arch", "mnist_cnn"}, {"num_classes", 10}}},
      {"optim", {{"lr", 0.05}, {"momentum", 0.9}, {"weight_decay", 1e-4}}},
      {"schedule", {{"kind", "cosine"}, {"warmup_steps", 5}}},
      {"train", {{"epochs", 2}, {"log_every", 4}}}};
}

// resnet18 with the small stem on 32 px crops of an image folder at `root`; model.num_classes left to the data,
// as the shipped folder configs do.
inline nlohmann::json small_folder_config(const fs::path& root) {
  return {{"run", {{"seed", 4}, {"threads", 2}}},
          {"data",
           {{"kind", "imagenet"},
            {"root", root.string()},
            {"batch_size", 4},
            {"eval_batch_size", 4},
            {"workers", 2},
            {"augment", {{"image_size", 32}}}}},
          {"model", {{"arch", "resnet18"}, {"in_channels", 3}, {"stem", "small"}}},
          {"optim", {{"lr", 0.05}}},
          {"train", {{"epochs", 2}, {"log_every", 1}}}};
}

struct SmallRun {
  TempDir dir;
  fs::path config;
  explicit SmallRun(nlohmann::json overrides = nlohmann::json::object()) {
    write_mnist_dir(dir / "data", 512, 256);
    auto c = small_run_config(dir / "data");
    c.merge_patch(overrides);
    config = dir / "config.json";
    write_text(config, c.dump(2));
  }
};

}  // namespace trainer::testing
