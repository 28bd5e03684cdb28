#include "fuzz/fuzz_support.hpp"

#include <torch/torch.h>

#include <fstream>
#include <random>

#include "trainer/config/load.hpp"
#include "trainer/distributed/rank_generators.hpp"
#include "trainer/engine/checkpoint_config.hpp"
#include "trainer/engine/resolve_config.hpp"
#include "trainer/io/checkpoint.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/optim/optimizer.hpp"
#include "trainer/platform/files.hpp"

namespace trainer::fuzz {

ScratchDir::ScratchDir() {
  std::random_device random;
  path_ =
      std::filesystem::temp_directory_path() / ("trainer-fuzz-" + std::to_string(random()) + std::to_string(random()));
  std::filesystem::create_directories(path_);
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::filesystem::path ScratchDir::write(const std::string& name, const std::string& bytes) const {
  const std::filesystem::path file = path_ / name;
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return file;
}

const ScratchDir& scratch() {
  static const ScratchDir dir;  // one per process, for as long as it runs
  return dir;
}

std::string small_checkpoint(const nlohmann::json& config) {
  const Config run = resolve_config(nlohmann::json{{"data", {{"root", "/d"}}}, {"model", {{"num_classes", 4}}}});
  const ImageShape input{6, 6, 1};
  torch::manual_seed(0);
  const auto model = build_model(run.model, input);
  const auto optimizer = make_optimizer(run.optim, *model);
  torch::nn::functional::cross_entropy(model->forward(torch::randn({2, 1, 6, 6})), torch::tensor({0, 3})).backward();
  optimizer->step();
  CheckpointMeta meta;
  meta.config = config.is_null() ? config_to_json(run) : config;
  meta.epoch = 1;
  meta.step = 1;
  meta.class_names = {"a", "b", "c", "d"};
  meta.input = input;
  meta.ema_updates = 1;
  const auto file = scratch().path() / "small.pt";
  save_checkpoint(file, meta, {*model, *optimizer, model.get()});
  std::vector<uint8_t> bytes;
  if (read_file(file, bytes)) return {};
  return {bytes.begin(), bytes.end()};
}

void restore_everything(const std::filesystem::path& file) {
  refused_cleanly([&] {
    const LoadedCheckpoint checkpoint(file);
    const Config config = config_for_checkpoint(checkpoint, "", {}).config;
    const auto model = model_from_checkpoint(checkpoint, config.model, checkpoint.meta().input, false);
    const auto optimizer = make_optimizer(config.optim, *model);
    checkpoint.restore_optimizer(*optimizer);
    checkpoint.restore_rng();
    if (const auto rows = checkpoint.rank_generators()) restore_rank_generators(*rows, 0, torch::kCPU);
    model_from_checkpoint(checkpoint, config.model, checkpoint.meta().input, true);
  });
}

std::vector<std::string> split(const uint8_t* data, size_t size, char separator, size_t count) {
  const std::string all(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  size_t at = 0;
  while (parts.size() + 1 < count) {
    const size_t end = all.find(separator, at);
    if (end == std::string::npos) break;
    parts.push_back(all.substr(at, end - at));
    at = end + 1;
  }
  parts.push_back(all.substr(at));
  return parts;
}

}  // namespace trainer::fuzz
