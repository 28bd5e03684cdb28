// What the model families are assembled from: a module with a forward pass that can also write itself into a
// LayerGraph (for export), and a sequence of them named as torchvision's nn.Sequential names its children
// ("0", "1", ... or given names such as RegNet's "block1-0"), so state-dict keys come out as torchvision's.
//   auto stage = std::make_shared<BlockSequence>();
//   stage->add(std::make_shared<ConvNormAct>(...));            // features.1.0.*
//   x = stage->forward(x);   out = stage->describe(graph, in, "features.1");
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "trainer/models/layer_graph.hpp"

namespace trainer {

class Block : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor x) = 0;
  // Appends the block's eval-mode layers, its parameters under `prefix`, to `graph`; returns its output value.
  virtual std::string describe(LayerGraph& graph, const std::string& x, const std::string& prefix) const = 0;
};

using BlockPtr = std::shared_ptr<Block>;

class BlockSequence final : public Block {
 public:
  // Registers `block` under `name`, or under its position ("0", "1", ...) when `name` is empty.
  void add(BlockPtr block, std::string name = "");
  torch::Tensor forward(torch::Tensor x) override;
  std::string describe(LayerGraph& graph, const std::string& x, const std::string& prefix) const override;

 private:
  std::vector<std::pair<std::string, BlockPtr>> named_;  // in order
};

}  // namespace trainer
