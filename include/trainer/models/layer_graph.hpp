// A classifier's eval-mode forward pass as a straight list of layers over named values, each layer naming the
// model's own parameters (torchvision's state-dict prefixes): what the deployment formats (ONNX, TorchScript)
// translate, so a format is written once for every architecture and an architecture once for every format.
//   LayerGraph g;  std::string x = g.input;
//   x = g.conv(x, "conv1", *conv1);  x = g.batch_norm(x, "bn1", 1e-5);  x = g.relu(x);  ...;  g.output = x;
#pragma once

#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace trainer {

enum class LayerKind {
  conv,        // param.weight [O, I/groups, k, k] (+ param.bias): kernel, stride, padding, groups
  batch_norm,  // param.{weight, bias, running_mean, running_var}, eps (inference: running statistics)
  relu,
  max_pool,         // kernel, stride, padding
  add,              // inputs[0] + inputs[1]
  global_avg_pool,  // [N, C, H, W] -> [N, C]
  flatten,          // [N, ...] -> [N, prod(...)]
  linear,           // param.weight [O, I], param.bias
  // Activations, elementwise; gelu is the exact (erf) one.
  silu,
  sigmoid,
  hardswish,
  hardsigmoid,
  gelu,
  mul,            // inputs[0] * inputs[1], broadcasting (squeeze-excitation's [N, C, 1, 1] scale)
  squeeze,        // [N, C, H, W] -> [N, C, 1, 1]: the mean over each channel
  scale,          // inputs[0] * the tensor named param ([C, 1, 1], ConvNeXt's layer_scale)
  layer_norm_2d,  // param.{weight, bias} [C]: LayerNorm over the channels of each pixel of [N, C, H, W], eps
  pixel_linear,   // param.weight [O, I], param.bias: a Linear on each pixel's channels, [N, I, H, W] -> [N, O, H, W]
  // Transformers hold their tokens as [N, D, 1, L] (channels = features, the width = the sequence), so the
  // per-pixel kinds above (layer_norm_2d, pixel_linear, gelu, add) apply to them unchanged.
  vit_embedding,   // the patch grid [N, D, gh, gw] -> tokens [N, D, 1, 1 + gh*gw]: param + "class_token" [1, 1, D]
                   // first, then the patches row by row, plus param + "encoder.pos_embedding" [1, 1 + gh*gw, D]
  self_attention,  // tokens [N, D, 1, L], `heads` heads: param.in_proj_weight [3D, D], param.in_proj_bias,
                   // param.out_proj.{weight, bias} (nn.MultiheadAttention's names), softmax(q k^T / sqrt(d)) v
  first_token,     // tokens [N, D, 1, L] -> [N, D]: the class token's features
  // Swin keeps its tokens as a map [N, C, H, W] (its input size fixed at export: height, width).
  window_attention,  // [N, C, H, W] -> [N, C, H, W]: the map padded to whole windows of `window`, rolled up and left by
                     // shift_h, shift_w, attention within each window (`heads` heads; param.qkv.weight,
                     // param.proj.{weight, bias} and the constants param + "_qkv_bias" [3C], param + "_bias"
                     // [windows * heads, n, n] (relative position bias plus the shift mask), and for `cosine`
                     // attention param + "_query_scale" [windows * heads, 1, 1]), rolled back, the padding cut
  patch_merge,       // [N, C, H, W] -> [N, 4C, ceil(H/2), ceil(W/2)]: odd sides padded, each 2x2 neighbourhood's
                     // pixels as channels in torchvision's order (0,0), (1,0), (0,1), (1,1)
};

struct Layer {
  LayerKind kind = LayerKind::relu;
  std::vector<std::string> inputs;  // value names
  std::string output;               // the value this layer makes
  std::string param;                // state-dict prefix of its parameters ("layer1.0.conv1"); empty when none
  int64_t kernel = 0, stride = 1, padding = 0, groups = 1;
  bool bias = false;  // conv: has param.bias
  double eps = 1e-5;  // batch_norm, layer_norm_2d
  int64_t heads = 1;  // self_attention, window_attention
  // window_attention, patch_merge: the input's spatial size; window_attention: its window and shifts
  int64_t height = 0, width = 0, window = 0, shift_h = 0, shift_w = 0;
  bool cosine = false;  // window_attention: Swin V2's (unit queries and keys, param + "_query_scale")
};

struct LayerGraph {
  std::string input = "input";  // float [N, C, H, W], normalised
  std::string output;           // logits [N, classes]
  std::vector<Layer> layers;
  // Eval-time tensors the model derives from its weights for this graph (Swin's attention biases with the shift
  // masks at the export size): the formats store them beside the parameters, outside the state dict.
  std::vector<std::pair<std::string, torch::Tensor>> constants;

  // Each appends one layer reading `x` and returns the name of its output value ("v12").
  std::string conv(const std::string& x, const std::string& param, const torch::nn::Conv2dImpl& conv);
  std::string batch_norm(const std::string& x, const std::string& param, double eps);
  std::string relu(const std::string& x);
  std::string max_pool(const std::string& x, int64_t kernel, int64_t stride, int64_t padding);
  std::string add(const std::string& a, const std::string& b);
  std::string global_avg_pool(const std::string& x);
  std::string flatten(const std::string& x);
  std::string linear(const std::string& x, const std::string& param);
  // One of the elementwise kinds (relu, silu, sigmoid, hardswish, hardsigmoid, gelu).
  std::string activation(const std::string& x, LayerKind kind);
  std::string mul(const std::string& a, const std::string& b);
  std::string squeeze(const std::string& x);
  std::string scale(const std::string& x, const std::string& tensor);
  std::string layer_norm_2d(const std::string& x, const std::string& param, double eps);
  std::string pixel_linear(const std::string& x, const std::string& param, bool bias = true);
  std::string vit_embedding(const std::string& x, const std::string& param);
  std::string self_attention(const std::string& x, const std::string& param, int64_t heads);
  std::string first_token(const std::string& x);
  // `l` a window_attention layer without its input and output; its constants already in `constants`.
  std::string window_attention(const std::string& x, Layer l);
  std::string patch_merge(const std::string& x, int64_t height, int64_t width);

 private:
  std::string append(Layer layer);
};

// Lower-case name of a layer kind, for messages.
const char* layer_kind_name(LayerKind kind);

}  // namespace trainer
