#include "trainer/models/frozen_layers.hpp"

#include <torch/nn/modules/batchnorm.h>

#include "trainer/models/sync_batch_norm.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/glob.hpp"

namespace trainer {

namespace {

bool matches_any(const std::vector<std::string>& patterns, const std::string& name) {
  for (const auto& p : patterns)
    if (glob_match(p, name)) return true;
  return false;
}

bool is_batch_norm(const torch::nn::Module& m) {
  return m.as<torch::nn::BatchNorm1d>() || m.as<torch::nn::BatchNorm2d>() || m.as<torch::nn::BatchNorm3d>() ||
         m.as<SyncBatchNorm2d>();
}

}  // namespace

FrozenLayers::FrozenLayers(torch::nn::Module& model, const std::vector<std::string>& patterns) {
  for (const auto& pattern : patterns) {
    bool used = false;
    for (const auto& item : model.named_parameters()) used = used || glob_match(pattern, item.key());
    if (!used) throw ConfigError("model.freeze: pattern \"" + pattern + "\" matches no parameter of the model");
  }
  for (const auto& item : model.named_parameters())
    if (matches_any(patterns, item.key())) parameters_.push_back(item.value());
  for (const auto& item : model.named_modules("", /*include_self=*/false))
    if (is_batch_norm(*item.value()) && matches_any(patterns, item.key() + ".weight")) norms_.push_back(item.value());
}

void FrozenLayers::set(bool frozen) {
  frozen_ = frozen && any();
  applied_ = true;
  for (auto& p : parameters_) {
    p.set_requires_grad(!frozen_);
    if (frozen_) p.mutable_grad() = torch::Tensor();  // an undefined gradient: the optimizers skip the parameter
  }
}

void FrozenLayers::keep_norms_in_eval() const {
  if (!frozen_) return;
  for (const auto& m : norms_) m->eval();
}

int64_t FrozenLayers::frozen_values() const {
  int64_t n = 0;
  for (const auto& p : parameters_) n += p.numel();
  return n;
}

}  // namespace trainer
