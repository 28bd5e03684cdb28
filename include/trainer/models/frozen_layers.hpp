// model.freeze applied to a model: parameters matching a pattern take no gradient (so the optimizer leaves them,
// weight decay included), and BatchNorm layers whose weight matches stay in eval mode while the model trains, so
// their running statistics stay the pretrained ones. Lifting it (train.unfreeze_at_epoch) makes them train again.
//   FrozenLayers frozen(*model, config.model.freeze);
//   frozen.set(true);  ...  model->train(); frozen.keep_norms_in_eval();  ...  frozen.set(false);
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <vector>

namespace trainer {

class FrozenLayers {
 public:
  FrozenLayers() = default;
  // Throws ConfigError naming a pattern that matches no parameter (a typo would freeze nothing silently).
  FrozenLayers(torch::nn::Module& model, const std::vector<std::string>& patterns);

  void set(bool frozen);
  bool frozen() const { return frozen_; }
  bool applied() const { return applied_; }  // set() has been called
  bool any() const { return !parameters_.empty(); }
  // Call after every model.train(): the frozen BatchNorm layers go back to eval mode.
  void keep_norms_in_eval() const;
  int64_t frozen_values() const;  // elements of the matching parameters
  int64_t norms() const { return static_cast<int64_t>(norms_.size()); }

 private:
  std::vector<torch::Tensor> parameters_;
  std::vector<std::shared_ptr<torch::nn::Module>> norms_;
  bool frozen_ = false;
  bool applied_ = false;
};

}  // namespace trainer
