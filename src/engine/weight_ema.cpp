#include "trainer/engine/weight_ema.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <stdexcept>

namespace trainer {

namespace {

// Parameters then buffers, in registration order: the same order for two models of one architecture.
std::vector<torch::Tensor> state_tensors(const torch::nn::Module& m) {
  std::vector<torch::Tensor> out;
  for (const auto& p : m.named_parameters()) out.push_back(p.value());
  for (const auto& b : m.named_buffers()) out.push_back(b.value());
  return out;
}

}  // namespace

WeightEma::WeightEma(const EmaConfig& config, ClassifierPtr shadow, Classifier& model)
    : config_(config), shadow_(std::move(shadow)) {
  const auto mine = state_tensors(*shadow_);
  const auto theirs = state_tensors(model);
  if (mine.size() != theirs.size()) throw std::logic_error("EMA model differs from the trained model");
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < mine.size(); ++i) {
    mine[i].copy_(theirs[i]);
    auto& shadow_list = mine[i].is_floating_point() ? float_shadow_ : int_shadow_;
    auto& source_list = mine[i].is_floating_point() ? float_source_ : int_source_;
    shadow_list.push_back(mine[i]);
    source_list.push_back(theirs[i]);
  }
  shadow_->eval();
  for (auto& p : shadow_->parameters()) p.set_requires_grad(false);
}

void WeightEma::after_step(int64_t step) {
  if (step % config_.every != 0) return;
  double decay = config_.decay;
  if (config_.warmup)
    decay = std::min(decay, (1.0 + static_cast<double>(updates_)) / (10.0 + static_cast<double>(updates_)));
  ++updates_;
  torch::NoGradGuard no_grad;
  at::_foreach_mul_(float_shadow_, decay);
  at::_foreach_add_(float_shadow_, float_source_, 1.0 - decay);
  for (size_t i = 0; i < int_shadow_.size(); ++i) int_shadow_[i].copy_(int_source_[i]);
}

}  // namespace trainer
