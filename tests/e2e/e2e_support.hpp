// Shared setup for the end-to-end tests: generated IDX data, a config pointing at it, and the binary.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <thread>

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

// tests/support/weights_server.py on a free loopback port, serving DIR/served; stopped with the object. `flags`:
// the server's options (--cut-first N, --ignore-range, --cut-every K).
class WeightsServer {
 public:
  WeightsServer(const fs::path& dir, const std::string& flags = "") : root_(dir / "served"), dir_(dir) {
    fs::create_directories(root_);
    const auto started = run_command(
        std::string(TRAINER_PYTHON) + " " + TRAINER_SOURCE_DIR + "/tests/support/weights_server.py " + root_.string() +
        " " + (dir / "port").string() + " " + log().string() + " " + flags + " > /dev/null 2>&1 & echo $!");
    pid_ = started.output.substr(0, started.output.find('\n'));
    for (int i = 0; i < 200 && !fs::exists(dir / "port"); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    port_ = read_text(dir / "port");
  }
  ~WeightsServer() { run_command("kill " + pid_); }
  const fs::path& root() const { return root_; }
  fs::path log() const { return dir_ / "requests.log"; }
  std::string requests() const { return fs::exists(log()) ? read_text(log()) : ""; }
  std::string address(const std::string& path) const { return "http://127.0.0.1:" + port_ + "/" + path; }

 private:
  fs::path root_, dir_;
  std::string pid_, port_;
};

}  // namespace trainer::testing
