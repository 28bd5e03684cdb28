#include "trainer/models/resnet.hpp"

#include <torch/torch.h>

namespace trainer {

namespace nn = torch::nn;

namespace {

constexpr int64_t kBottleneckExpansion = 4;

int64_t expansion(const ResNetSpec& spec) { return spec.bottleneck ? kBottleneckExpansion : 1; }

nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1, int64_t groups = 1) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).groups(groups).bias(false));
}

}  // namespace

const std::vector<std::pair<std::string, ResNetSpec>>& resnet_specs() {
  static const std::vector<std::pair<std::string, ResNetSpec>> specs{
      {"resnet18", {/*bottleneck=*/false, /*blocks=*/{2, 2, 2, 2}}},
      {"resnet34", {/*bottleneck=*/false, /*blocks=*/{3, 4, 6, 3}}},
      {"resnet50", {/*bottleneck=*/true, /*blocks=*/{3, 4, 6, 3}}},
      {"resnet101", {/*bottleneck=*/true, /*blocks=*/{3, 4, 23, 3}}},
      {"resnet152", {/*bottleneck=*/true, /*blocks=*/{3, 8, 36, 3}}},
      {"wide_resnet50_2", {/*bottleneck=*/true, /*blocks=*/{3, 4, 6, 3}, /*groups=*/1, /*width_per_group=*/128}},
      {"wide_resnet101_2", {/*bottleneck=*/true, /*blocks=*/{3, 4, 23, 3}, /*groups=*/1, /*width_per_group=*/128}},
      {"resnext50_32x4d", {/*bottleneck=*/true, /*blocks=*/{3, 4, 6, 3}, /*groups=*/32, /*width_per_group=*/4}},
      {"resnext101_32x8d", {/*bottleneck=*/true, /*blocks=*/{3, 4, 23, 3}, /*groups=*/32, /*width_per_group=*/8}},
      {"resnext101_64x4d", {/*bottleneck=*/true, /*blocks=*/{3, 4, 23, 3}, /*groups=*/64, /*width_per_group=*/4}},
  };
  return specs;
}

ResidualBlock::ResidualBlock(const ResNetSpec& spec, int64_t in_planes, int64_t planes, int64_t stride)
    : bottleneck_(spec.bottleneck) {
  const int64_t out_planes = planes * expansion(spec);
  if (bottleneck_) {
    // torchvision: width = int(planes * (base_width / 64.)) * groups
    const int64_t width = planes * spec.width_per_group / 64 * spec.groups;
    conv1 = register_module("conv1", conv(in_planes, width, 1));
    bn1 = register_module("bn1", SyncBatchNorm2d(width));
    conv2 = register_module("conv2", conv(width, width, 3, stride, spec.groups));
    bn2 = register_module("bn2", SyncBatchNorm2d(width));
    conv3 = register_module("conv3", conv(width, out_planes, 1));
    bn3 = register_module("bn3", SyncBatchNorm2d(out_planes));
  } else {
    conv1 = register_module("conv1", conv(in_planes, planes, 3, stride));
    bn1 = register_module("bn1", SyncBatchNorm2d(planes));
    conv2 = register_module("conv2", conv(planes, planes, 3));
    bn2 = register_module("bn2", SyncBatchNorm2d(planes));
  }
  if (stride != 1 || in_planes != out_planes)
    downsample = register_module("downsample",
                                 nn::Sequential(conv(in_planes, out_planes, 1, stride), SyncBatchNorm2d(out_planes)));
}

torch::Tensor ResidualBlock::forward(torch::Tensor x) {
  torch::Tensor out = bn1->forward(conv1->forward(x)).relu_();
  out = bn2->forward(conv2->forward(out));
  if (bottleneck_) out = bn3->forward(conv3->forward(out.relu_()));
  out += downsample ? downsample->forward(x) : x;
  return out.relu_();
}

std::string ResidualBlock::describe(LayerGraph& g, const std::string& x, const std::string& prefix) const {
  std::string out = g.relu(g.batch_norm(g.conv(x, prefix + ".conv1", *conv1), prefix + ".bn1", bn1->eps()));
  out = g.batch_norm(g.conv(out, prefix + ".conv2", *conv2), prefix + ".bn2", bn2->eps());
  if (bottleneck_) out = g.batch_norm(g.conv(g.relu(out), prefix + ".conv3", *conv3), prefix + ".bn3", bn3->eps());
  std::string shortcut = x;
  if (downsample) {
    const auto parts = downsample->children();
    shortcut = g.batch_norm(g.conv(x, prefix + ".downsample.0", *parts[0]->as<nn::Conv2d>()), prefix + ".downsample.1",
                            parts[1]->as<SyncBatchNorm2d>()->eps());
  }
  return g.relu(g.add(out, shortcut));
}

ResNet::ResNet(const ResNetOptions& o) : max_pool_(o.stem == StemKind::imagenet) {
  conv1 = register_module("conv1", max_pool_ ? conv(o.in_channels, 64, 7, 2) : conv(o.in_channels, 64, 3));
  bn1 = register_module("bn1", SyncBatchNorm2d(64));
  int64_t in_planes = 64;
  auto make_layer = [&](int64_t planes, int64_t blocks, int64_t stride) {
    nn::Sequential layer;
    for (int64_t i = 0; i < blocks; ++i) {
      layer->push_back(std::make_shared<ResidualBlock>(o.spec, in_planes, planes, i == 0 ? stride : 1));
      in_planes = planes * expansion(o.spec);
    }
    return layer;
  };
  layer1 = register_module("layer1", make_layer(64, o.spec.blocks[0], 1));
  layer2 = register_module("layer2", make_layer(128, o.spec.blocks[1], 2));
  layer3 = register_module("layer3", make_layer(256, o.spec.blocks[2], 2));
  layer4 = register_module("layer4", make_layer(512, o.spec.blocks[3], 2));
  dropout = register_module("dropout", nn::Dropout(o.dropout));
  fc = register_module("fc", nn::Linear(in_planes, o.num_classes));

  // torchvision's initialisation; fc keeps nn.Linear's default, as there.
  torch::NoGradGuard no_grad;
  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* c = module->as<nn::Conv2d>()) {
      nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
    } else if (auto* b = module->as<SyncBatchNorm2d>()) {
      nn::init::ones_(b->weight);
      nn::init::zeros_(b->bias);
    }
  }
  if (o.zero_init_residual)
    for (auto& module : modules(/*include_self=*/false))
      if (auto* block = module->as<ResidualBlock>()) nn::init::zeros_(block->last_bn()->weight);
}

torch::Tensor ResNet::forward(torch::Tensor x) {
  x = bn1->forward(conv1->forward(x)).relu_();
  if (max_pool_) x = torch::max_pool2d(x, 3, 2, 1);
  x = layer4->forward(layer3->forward(layer2->forward(layer1->forward(x))));
  // Global average pooling as a mean: adaptive_avg_pool2d's CUDA backward has no deterministic kernel, so
  // run.deterministic would stop every ResNet; the mean's backward is a broadcast.
  x = x.mean({2, 3});
  return fc->forward(dropout->forward(x));
}

std::optional<LayerGraph> ResNet::inference_graph() const {
  LayerGraph g;
  std::string x = g.relu(g.batch_norm(g.conv(g.input, "conv1", *conv1), "bn1", bn1->eps()));
  if (max_pool_) x = g.max_pool(x, 3, 2, 1);
  const std::pair<const char*, const nn::Sequential*> layers[] = {
      {"layer1", &layer1}, {"layer2", &layer2}, {"layer3", &layer3}, {"layer4", &layer4}};
  for (const auto& [name, layer] : layers) {
    const auto blocks = (*layer)->children();
    for (size_t i = 0; i < blocks.size(); ++i)
      x = blocks[i]->as<ResidualBlock>()->describe(g, x, std::string(name) + "." + std::to_string(i));
  }
  g.output = g.linear(g.global_avg_pool(x), "fc");  // dropout is the identity in eval mode
  return g;
}

}  // namespace trainer
