#include "trainer/models/blocks/block.hpp"

namespace trainer {

void BlockSequence::add(BlockPtr block, std::string name) {
  if (name.empty()) name = std::to_string(named_.size());
  named_.emplace_back(name, register_module(name, std::move(block)));
}

torch::Tensor BlockSequence::forward(torch::Tensor x) {
  for (const auto& [name, block] : named_) x = block->forward(x);
  return x;
}

std::string BlockSequence::describe(LayerGraph& graph, const std::string& x, const std::string& prefix) const {
  std::string out = x;
  for (const auto& [name, block] : named_) out = block->describe(graph, out, prefix + "." + name);
  return out;
}

}  // namespace trainer
