#include "trainer/models/frozen_layers.hpp"

#include "trainer/models/classifier.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/glob.hpp"

namespace trainer {

FrozenLayers::FrozenLayers(torch::nn::Module& model, const std::vector<std::string>& patterns) {
  for (const auto& pattern : patterns) {
    bool used = false;
    for (const auto& item : model.named_parameters()) used = used || glob_match(pattern, item.key());
    if (!used) throw ConfigError("model.freeze: pattern \"" + pattern + "\" matches no parameter of the model");
  }
  for (const auto& item : model.named_parameters())
    if (glob_match_any(patterns, item.key())) parameters_.push_back(item.value());
  for (const auto& item : model.named_modules("", /*include_self=*/false))
    if (is_batch_norm(*item.value()) && glob_match_any(patterns, item.key() + ".weight"))
      norms_.push_back(item.value());
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
