// The weights a new run starts from (fine-tuning): model.weights (or model.init_from) located as a file before the
// session is made, since a name or an address may mean a download, then loaded with the classifier replaced when
// the run's classes differ from the weights'.
//   StartWeights start = locate_start_weights(config.model, hub);     // cli: the hub comes from the environment
//   Session s = make_session(config, run_dir, logs, nullptr, group, start);
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "trainer/config/config.hpp"
#include "trainer/io/weights.hpp"
#include "trainer/io/weights_hub.hpp"
#include "trainer/models/classifier.hpp"

namespace trainer {

struct StartWeights {
  std::filesystem::path file;  // empty: the model's own initialisation
  std::string source;          // for the log: "model.weights IMAGENET1K_V2 (resnet50-11ad3fa6.pth)"
  bool replace_head = true;    // another task's classifier is left fresh (model.weights; init_from loads strictly)
  bool empty() const { return file.empty(); }
};

// The file for model.weights or model.init_from (both set is a ConfigError): a name torchvision publishes for
// model.arch (or DEFAULT, its newest), from the hub cache or fetched into it; an http(s) or file:// address,
// likewise by its file name; or a path. Throws ConfigError for a name the arch does not have (listing those it
// has), WeightsError for a missing file, DownloadError when a fetch fails.
StartWeights locate_start_weights(const ModelConfig& model, const WeightsHub& hub);

// Loads `start` into `model`. With start.replace_head, keys of the arch's classifier layer whose shapes differ from the
// model's (the 1000 ImageNet classes against the run's) are left freshly initialised and said through `say`, as are
// model.init_exclude's. Throws WeightsError when anything else does not fit.
WeightsReport load_start_weights(Classifier& model, const ModelConfig& config, const StartWeights& start,
                                 const std::function<void(const std::string&)>& say);

}  // namespace trainer
