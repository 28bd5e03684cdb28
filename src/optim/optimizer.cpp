#include "trainer/optim/optimizer.hpp"

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "trainer/util/error.hpp"
#include "trainer/util/glob.hpp"

namespace trainer {

ParameterSplit split_for_weight_decay(const torch::nn::Module& model, bool decay_norm_and_bias) {
  ParameterSplit split;
  for (const auto& p : model.parameters())
    (decay_norm_and_bias || p.dim() > 1 ? split.decay : split.no_decay).push_back(p);
  return split;
}

namespace {

// optim.lr_mult's multiplier for `name`: its longest matching pattern's (the most specific), else 1.
double multiplier_of(const std::map<std::string, double>& lr_mult, const std::string& name) {
  double mult = 1;
  size_t longest = 0;
  bool found = false;
  for (const auto& [pattern, value] : lr_mult)
    if (glob_match(pattern, name) && (!found || pattern.size() > longest)) {
      mult = value;
      longest = pattern.size();
      found = true;
    }
  return mult;
}

template <class Options>
std::vector<torch::optim::OptimizerParamGroup> torch_groups(const std::vector<ParamGroup>& groups,
                                                            const Options& options) {
  std::vector<torch::optim::OptimizerParamGroup> out;
  for (const auto& g : groups) {
    auto o = std::make_unique<Options>(options);
    o->weight_decay(g.weight_decay);
    o->lr(options.lr() * g.lr_mult);
    out.emplace_back(g.parameters, std::move(o));
  }
  return out;
}

// optim.layer_decay's multiplier for each parameter, by name: layer_decay^(blocks - block), the classifier ("") the
// last block.
std::map<std::string, double> layer_decay_multipliers(double layer_decay, const torch::nn::Module& model,
                                                      const BlockOf& block_of) {
  std::map<std::string, int64_t> block_number;
  std::map<std::string, std::string> block_of_parameter;
  for (const auto& item : model.named_parameters()) {
    const std::string block = block_of(item.key());
    block_of_parameter[item.key()] = block;
    if (!block.empty()) block_number.emplace(block, static_cast<int64_t>(block_number.size()));
  }
  const auto blocks = static_cast<int64_t>(block_number.size());  // the classifier is number `blocks`
  std::map<std::string, double> mult;
  for (const auto& [name, block] : block_of_parameter)
    mult[name] = std::pow(layer_decay, static_cast<double>(block.empty() ? 0 : blocks - block_number.at(block)));
  return mult;
}

void check_patterns_match(const std::vector<std::string>& patterns, const torch::nn::Module& model,
                          const std::string& key) {
  for (const auto& pattern : patterns) {
    bool used = false;
    for (const auto& item : model.named_parameters()) used = used || glob_match(pattern, item.key());
    if (!used) throw ConfigError(key + ": pattern \"" + pattern + "\" matches no parameter of the model");
  }
}

}  // namespace

std::vector<ParamGroup> param_groups(const OptimConfig& optim, const torch::nn::Module& model,
                                     const BlockOf& block_of) {
  std::vector<std::string> lr_patterns;
  for (const auto& [pattern, value] : optim.lr_mult) {
    if (value < 0)
      throw ConfigError("optim.lr_mult." + pattern + ": expected a multiplier >= 0, got " + std::to_string(value));
    lr_patterns.push_back(pattern);
  }
  check_patterns_match(lr_patterns, model, "optim.lr_mult");
  check_patterns_match(optim.no_decay, model, "optim.no_decay");
  std::map<std::string, double> layer_mult;
  if (optim.layer_decay != 1.0) {
    if (!block_of) throw ConfigError("optim.layer_decay: this model has no block order to decay the rate over");
    layer_mult = layer_decay_multipliers(optim.layer_decay, model, block_of);
  }
  std::vector<double> mults;
  std::vector<ParamGroup> decay, no_decay;
  for (const auto& item : model.named_parameters()) {
    const double mult =
        multiplier_of(optim.lr_mult, item.key()) * (layer_mult.empty() ? 1.0 : layer_mult.at(item.key()));
    size_t k = 0;
    while (k < mults.size() && mults[k] != mult) ++k;
    if (k == mults.size()) {
      mults.push_back(mult);
      decay.push_back({{}, optim.weight_decay, mult});
      no_decay.push_back({{}, 0.0, mult});
    }
    const torch::Tensor& p = item.value();
    const bool named = std::any_of(optim.no_decay.begin(), optim.no_decay.end(),
                                   [&](const std::string& pattern) { return glob_match(pattern, item.key()); });
    ((optim.decay_norm_and_bias || p.dim() > 1) && !named ? decay[k] : no_decay[k]).parameters.push_back(p);
  }
  std::vector<ParamGroup> groups;
  for (size_t k = 0; k < mults.size(); ++k)
    for (ParamGroup* g : {&decay[k], &no_decay[k]})
      if (!g->parameters.empty()) groups.push_back(std::move(*g));  // LibTorch refuses an empty group
  return groups;
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimConfig& optim, const torch::nn::Module& model,
                                                        const BlockOf& block_of) {
  const std::vector<ParamGroup> groups = param_groups(optim, model, block_of);
  switch (optim.name) {
    case OptimizerKind::sgd: {
      if (optim.nesterov && optim.momentum <= 0)
        throw ConfigError("optim.nesterov: Nesterov momentum needs optim.momentum > 0, got " +
                          std::to_string(optim.momentum));
      const auto options = torch::optim::SGDOptions(optim.lr).momentum(optim.momentum).nesterov(optim.nesterov);
      return std::make_unique<torch::optim::SGD>(torch_groups(groups, options), options);
    }
    case OptimizerKind::adamw: {
      const auto options =
          torch::optim::AdamWOptions(optim.lr).betas({optim.betas.at(0), optim.betas.at(1)}).eps(optim.eps);
      return std::make_unique<torch::optim::AdamW>(torch_groups(groups, options), options);
    }
  }
  throw ConfigError("optim.name: unsupported optimizer");
}

std::vector<double> lr_multipliers(const OptimConfig& optim, const torch::nn::Module& model, const BlockOf& block_of) {
  std::vector<double> mult;
  for (const auto& g : param_groups(optim, model, block_of)) mult.push_back(g.lr_mult);
  return mult;
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr, const std::vector<double>& lr_mult) {
  auto& groups = optimizer.param_groups();
  for (size_t k = 0; k < groups.size(); ++k) groups[k].options().set_lr(k < lr_mult.size() ? lr * lr_mult[k] : lr);
}

}  // namespace trainer
