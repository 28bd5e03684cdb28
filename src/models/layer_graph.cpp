#include "trainer/models/layer_graph.hpp"

#include "trainer/util/error.hpp"
#include "trainer/util/torch_compat.hpp"

namespace trainer {

namespace {

Layer make_layer(LayerKind kind, std::vector<std::string> inputs, std::string param = "") {
  Layer l;
  l.kind = kind;
  l.inputs = std::move(inputs);
  l.param = std::move(param);
  return l;
}

}  // namespace

std::string LayerGraph::append(Layer layer) {
  layer.output = "v" + std::to_string(layers.size());
  layers.push_back(std::move(layer));
  return layers.back().output;
}

std::string LayerGraph::conv(const std::string& x, const std::string& param, const torch::nn::Conv2dImpl& conv) {
  const auto& o = conv.options;
  const auto* padding = compat::variant_get_if<torch::ExpandingArray<2>>(o.padding());
  if (!padding || (*o.kernel_size())[0] != (*o.kernel_size())[1] || (*o.stride())[0] != (*o.stride())[1] ||
      (**padding)[0] != (**padding)[1] || (*o.dilation())[0] != 1 || (*o.dilation())[1] != 1 ||
      o.padding_mode().index() != 0)
    throw UsageError(param + ": only square, undilated, zero-padded convolutions can be exported");
  Layer l = make_layer(LayerKind::conv, {x}, param);
  l.kernel = (*o.kernel_size())[0];
  l.stride = (*o.stride())[0];
  l.padding = (**padding)[0];
  l.groups = o.groups();
  l.bias = o.bias();
  return append(std::move(l));
}

std::string LayerGraph::batch_norm(const std::string& x, const std::string& param, double eps) {
  Layer l = make_layer(LayerKind::batch_norm, {x}, param);
  l.eps = eps;
  return append(std::move(l));
}

std::string LayerGraph::relu(const std::string& x) { return append(make_layer(LayerKind::relu, {x})); }

std::string LayerGraph::max_pool(const std::string& x, int64_t kernel, int64_t stride, int64_t padding) {
  Layer l = make_layer(LayerKind::max_pool, {x});
  l.kernel = kernel;
  l.stride = stride;
  l.padding = padding;
  return append(std::move(l));
}

std::string LayerGraph::add(const std::string& a, const std::string& b) {
  return append(make_layer(LayerKind::add, {a, b}));
}

std::string LayerGraph::global_avg_pool(const std::string& x) {
  return append(make_layer(LayerKind::global_avg_pool, {x}));
}

std::string LayerGraph::flatten(const std::string& x) { return append(make_layer(LayerKind::flatten, {x})); }

std::string LayerGraph::linear(const std::string& x, const std::string& param) {
  return append(make_layer(LayerKind::linear, {x}, param));
}

std::string LayerGraph::activation(const std::string& x, LayerKind kind) {
  switch (kind) {
    case LayerKind::relu:
    case LayerKind::silu:
    case LayerKind::sigmoid:
    case LayerKind::hardswish:
    case LayerKind::hardsigmoid:
    case LayerKind::gelu: return append(make_layer(kind, {x}));
    default: throw UsageError(std::string("layer graph: ") + layer_kind_name(kind) + " is not an activation");
  }
}

std::string LayerGraph::mul(const std::string& a, const std::string& b) {
  return append(make_layer(LayerKind::mul, {a, b}));
}

std::string LayerGraph::squeeze(const std::string& x) { return append(make_layer(LayerKind::squeeze, {x})); }

std::string LayerGraph::scale(const std::string& x, const std::string& tensor) {
  return append(make_layer(LayerKind::scale, {x}, tensor));
}

std::string LayerGraph::layer_norm_2d(const std::string& x, const std::string& param, double eps) {
  Layer l = make_layer(LayerKind::layer_norm_2d, {x}, param);
  l.eps = eps;
  return append(std::move(l));
}

std::string LayerGraph::pixel_linear(const std::string& x, const std::string& param, bool bias) {
  Layer l = make_layer(LayerKind::pixel_linear, {x}, param);
  l.bias = bias;
  return append(std::move(l));
}

std::string LayerGraph::vit_embedding(const std::string& x, const std::string& param) {
  return append(make_layer(LayerKind::vit_embedding, {x}, param));
}

std::string LayerGraph::self_attention(const std::string& x, const std::string& param, int64_t heads) {
  Layer l = make_layer(LayerKind::self_attention, {x}, param);
  l.heads = heads;
  return append(std::move(l));
}

std::string LayerGraph::first_token(const std::string& x) { return append(make_layer(LayerKind::first_token, {x})); }

std::string LayerGraph::window_attention(const std::string& x, Layer l) {
  l.kind = LayerKind::window_attention;
  l.inputs = {x};
  return append(std::move(l));
}

std::string LayerGraph::patch_merge(const std::string& x, int64_t height, int64_t width) {
  Layer l = make_layer(LayerKind::patch_merge, {x});
  l.height = height;
  l.width = width;
  return append(std::move(l));
}

const char* layer_kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::conv: return "conv";
    case LayerKind::batch_norm: return "batch_norm";
    case LayerKind::relu: return "relu";
    case LayerKind::max_pool: return "max_pool";
    case LayerKind::add: return "add";
    case LayerKind::global_avg_pool: return "global_avg_pool";
    case LayerKind::flatten: return "flatten";
    case LayerKind::linear: return "linear";
    case LayerKind::silu: return "silu";
    case LayerKind::sigmoid: return "sigmoid";
    case LayerKind::hardswish: return "hardswish";
    case LayerKind::hardsigmoid: return "hardsigmoid";
    case LayerKind::gelu: return "gelu";
    case LayerKind::mul: return "mul";
    case LayerKind::squeeze: return "squeeze";
    case LayerKind::scale: return "scale";
    case LayerKind::layer_norm_2d: return "layer_norm_2d";
    case LayerKind::pixel_linear: return "pixel_linear";
    case LayerKind::vit_embedding: return "vit_embedding";
    case LayerKind::self_attention: return "self_attention";
    case LayerKind::first_token: return "first_token";
    case LayerKind::window_attention: return "window_attention";
    case LayerKind::patch_merge: return "patch_merge";
  }
  return "?";
}

}  // namespace trainer
