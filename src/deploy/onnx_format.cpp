// ONNX, built with the ONNX library's own protobuf classes (libonnx) and checked with its checker and strict
// shape inference before any byte is returned; opened for inference with OpenCV's DNN module. BatchNorm stays a
// BatchNormalization node with the running statistics under their state-dict names (bn1.running_mean, ...):
// nothing is folded, so the file keeps the checkpoint's exact weights and every runtime (ONNX Runtime, TensorRT,
// OpenCV) folds it into the convolution itself when it compiles the graph.
#include "trainer/deploy/export_format.hpp"

#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "trainer/util/checked_math.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"

#ifdef TRAINER_ONNX
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <opencv2/dnn.hpp>
#endif

namespace trainer {

#ifdef TRAINER_ONNX

namespace {

constexpr int64_t kMinOpset = 13;  // Gemm, Flatten and friends as every current runtime reads them

int64_t max_opset() {
  return onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at(onnx::ONNX_DOMAIN).second;
}

void set_ints(onnx::NodeProto& node, const std::string& name, std::initializer_list<int64_t> values) {
  auto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
}

void set_int(onnx::NodeProto& node, const std::string& name, int64_t value) {
  auto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

void set_float(onnx::NodeProto& node, const std::string& name, float value) {
  auto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(value);
}

void set_tensor_type(onnx::ValueInfoProto& v, const std::string& name, const std::vector<std::string>& dims) {
  v.set_name(name);
  auto* t = v.mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (const auto& d : dims) {
    auto* dim = t->mutable_shape()->add_dim();
    if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0]))) dim->set_dim_value(std::stoll(d));
    else dim->set_dim_param(d);
  }
}

class GraphWriter {
 public:
  GraphWriter(onnx::GraphProto& graph, const LayerGraph& layers, const NamedTensors& tensors, int64_t opset)
      : graph_(graph), layers_(layers), opset_(opset) {
    for (const auto& [name, value] : tensors) tensors_.emplace(name, value);
  }

  void write() {
    for (const Layer& l : layers_.layers) {
      switch (l.kind) {
        case LayerKind::conv: {
          std::vector<std::string> in{value(l.inputs[0]), weight(l.param + ".weight")};
          if (l.bias) in.push_back(weight(l.param + ".bias"));
          auto& n = node("Conv", in, l);
          const auto w = tensors_.at(l.param + ".weight");
          set_ints(n, "kernel_shape", {w.size(2), w.size(3)});
          set_ints(n, "strides", {l.stride, l.stride});
          set_ints(n, "pads", {l.padding, l.padding, l.padding, l.padding});
          set_ints(n, "dilations", {1, 1});
          set_int(n, "group", l.groups);
          break;
        }
        case LayerKind::batch_norm: {
          auto& n = node("BatchNormalization",
                         {value(l.inputs[0]), weight(l.param + ".weight"), weight(l.param + ".bias"),
                          weight(l.param + ".running_mean"), weight(l.param + ".running_var")},
                         l);
          set_float(n, "epsilon", static_cast<float>(l.eps));
          set_float(n, "momentum", 0.9f);  // ONNX's momentum is the share kept: PyTorch's 0.1
          break;
        }
        case LayerKind::relu: node("Relu", {value(l.inputs[0])}, l); break;
        case LayerKind::max_pool: {
          auto& n = node("MaxPool", {value(l.inputs[0])}, l);
          set_ints(n, "kernel_shape", {l.kernel, l.kernel});
          set_ints(n, "strides", {l.stride, l.stride});
          set_ints(n, "pads", {l.padding, l.padding, l.padding, l.padding});
          break;
        }
        case LayerKind::add: node("Add", {value(l.inputs[0]), value(l.inputs[1])}, l); break;
        case LayerKind::global_avg_pool: {
          // [N, C, H, W] -> GlobalAveragePool [N, C, 1, 1] -> Flatten [N, C]: the pair every runtime knows.
          auto& pool = node("GlobalAveragePool", {value(l.inputs[0])}, l);
          pool.set_output(0, l.output + "_pooled");
          pool.set_name(pool.name() + "_pool");
          set_int(node("Flatten", {l.output + "_pooled"}, l), "axis", 1);
          break;
        }
        case LayerKind::flatten: set_int(node("Flatten", {value(l.inputs[0])}, l), "axis", 1); break;
        case LayerKind::linear: {
          auto& n = node("Gemm", {value(l.inputs[0]), weight(l.param + ".weight"), weight(l.param + ".bias")}, l);
          set_int(n, "transB", 1);
          break;
        }
        case LayerKind::silu: {  // x * sigmoid(x): ONNX has no SiLU operator at these opsets
          const std::string s = step("Sigmoid", {value(l.inputs[0])}, l);
          node("Mul", {value(l.inputs[0]), s}, l);
          break;
        }
        case LayerKind::sigmoid: sigmoid(l); break;
        case LayerKind::hardswish:
          if (opset_ >= 14) {
            node("HardSwish", {value(l.inputs[0])}, l);
          } else {
            const std::string s = hard_sigmoid(value(l.inputs[0]), l);
            node("Mul", {value(l.inputs[0]), s}, l);
          }
          break;
        case LayerKind::hardsigmoid: hard_sigmoid(value(l.inputs[0]), l, /*last=*/true); break;
        case LayerKind::gelu: {  // the exact GELU as primitives: x * 0.5 * (1 + erf(x / sqrt(2)))
          const std::string x = value(l.inputs[0]);
          const std::string e = step("Erf", {step("Div", {x, scalar(std::sqrt(2.0))}, l)}, l);
          const std::string half = step("Mul", {x, scalar(0.5)}, l);
          node("Mul", {half, step("Add", {e, scalar(1.0)}, l)}, l);
          break;
        }
        case LayerKind::mul: node("Mul", {value(l.inputs[0]), value(l.inputs[1])}, l); break;
        case LayerKind::squeeze: node("GlobalAveragePool", {value(l.inputs[0])}, l); break;
        case LayerKind::scale: node("Mul", {value(l.inputs[0]), weight(l.param)}, l); break;
        case LayerKind::layer_norm_2d: layer_norm_2d(l); break;
        case LayerKind::pixel_linear: {  // a 1x1 convolution with the Linear's weight [O, I] as [O, I, 1, 1]
          const torch::Tensor w = tensors_.at(l.param + ".weight");
          std::vector<std::string> in{value(l.inputs[0]),
                                      constant(l.param + ".weight_1x1", w.reshape({w.size(0), w.size(1), 1, 1}))};
          if (l.bias) in.push_back(weight(l.param + ".bias"));
          set_ints(node("Conv", in, l), "kernel_shape", {1, 1});
          break;
        }
        case LayerKind::vit_embedding: vit_embedding(l); break;
        case LayerKind::self_attention: self_attention(l); break;
        case LayerKind::window_attention: window_attention(l); break;
        case LayerKind::patch_merge: {  // pad odd sides, then [N, C, H2, 2, W2, 2] -> [N, 2 (col), 2 (row), C, H2, W2]
          const int64_t h = l.height + l.height % 2, w = l.width + l.width % 2;
          const int64_t c = -1;  // the channels: whatever the input has
          std::string x = value(l.inputs[0]);
          if (h != l.height || w != l.width)
            x = step("Pad", {x, ints({0, 0, 0, 0, 0, 0, h - l.height, w - l.width})}, l);
          const std::string grid = step("Reshape", {x, ints({0, c, h / 2, 2, w / 2, 2})}, l);
          const std::string moved = step("Transpose", {grid}, l);
          set_ints(last_node(), "perm", {0, 5, 3, 1, 2, 4});
          node("Reshape", {moved, ints({0, c, h / 2, w / 2})}, l);
          break;
        }
        case LayerKind::first_token: {  // [N, D, 1, L] -> [N, D, 1, 1] -> [N, D]
          const std::string first = step("Slice", {value(l.inputs[0]), ints({0}), ints({1}), ints({3})}, l);
          set_int(node("Flatten", {first}, l), "axis", 1);
          break;
        }
      }
    }
  }

  std::string value(const std::string& name) const {
    if (name == layers_.input) return "input";
    if (name == layers_.output) return "logits";
    return name;
  }

 private:
  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& inputs, const Layer& l) {
    auto* n = graph_.add_node();
    n->set_op_type(op);
    n->set_name((l.param.empty() ? std::string(layer_kind_name(l.kind)) : l.param) + "/" + l.output);
    for (const auto& in : inputs) n->add_input(in);
    n->add_output(value(l.output));
    return *n;
  }

  // A node of a layer written as several: its output is a fresh value "<layer output>_<n>", returned.
  std::string step(const std::string& op, const std::vector<std::string>& inputs, const Layer& l) {
    auto& n = node(op, inputs, l);
    const std::string out = l.output + "_" + std::to_string(++steps_);
    n.set_output(0, out);
    n.set_name(n.name() + "_" + std::to_string(steps_));
    return out;
  }

  // PyTorch's hardsigmoid, relu6(x + 3) / 6 = clip(x / 6 + 1/2, 0, 1), as Relu(v) - Relu(v - 1) of v = x / 6 + 1/2;
  // the layer's output when `last`, else an intermediate value. Not ONNX's HardSigmoid: OpenCV fuses a HardSigmoid
  // that feeds a Mul into a HardSwish without checking that both read one value (4.6 in Mul(x, s) order, 4.10 in
  // Mul(s, x)), which turns squeeze-excitation's scale * x into hardswish(scale). Nor Clip: 4.6 refuses Clip's
  // bounds as inputs.
  std::string hard_sigmoid(const std::string& x, const Layer& l, bool last = false) {
    const std::string v = step("Add", {step("Mul", {x, scalar(1.0 / 6)}, l), scalar(0.5)}, l);
    const std::string low = step("Relu", {v}, l), high = step("Relu", {step("Sub", {v, scalar(1.0)}, l)}, l);
    if (!last) return step("Sub", {low, high}, l);
    node("Sub", {low, high}, l);
    return value(l.output);
  }

  // The logistic sigmoid (squeeze-excitation's scale) as 0.5 * tanh(x / 2) + 0.5, not ONNX's Sigmoid: OpenCV fuses a
  // Sigmoid feeding a Mul into a Swish as it does HardSigmoid into HardSwish; shown wrong for HardSigmoid only, so
  // this one is a precaution. (SiLU's x * Sigmoid(x) keeps Sigmoid: there the fusion is right.)
  void sigmoid(const Layer& l) {
    const std::string t = step("Tanh", {step("Mul", {value(l.inputs[0]), scalar(0.5)}, l)}, l);
    node("Add", {step("Mul", {t, scalar(0.5)}, l), scalar(0.5)}, l);
  }

  // LayerNorm over axis 1 of [N, C, H, W] from primitives that OpenCV 4.6 runs (it has no LayerNormalization, and
  // its Sub/Div cannot broadcast [N, 1, H, W] against [N, C, H, W] when H = W = 1): the channel mean as a 1x1
  // convolution to one channel (weights 1/C), spread back to C channels by another (weights 1), so every
  // elementwise node sees equal shapes; 4C multiply-adds a pixel, against the block's 8C^2.
  //   d = x - mean_c(x);  y = d * (weight * (mean_c(d * d) + eps)^-1/2) + bias
  void layer_norm_2d(const Layer& l) {
    const std::string x = value(l.inputs[0]);
    const torch::Tensor w = tensors_.at(l.param + ".weight"), b = tensors_.at(l.param + ".bias");
    const int64_t c = w.size(0);
    const std::string mean_kernel = constant("channel_mean_" + std::to_string(c), torch::full({1, c, 1, 1}, 1.0 / c));
    const std::string spread_kernel = constant("channel_spread_" + std::to_string(c), torch::ones({c, 1, 1, 1}));
    auto conv1x1 = [&](const std::string& in, const std::string& kernel) {
      const std::string out = step("Conv", {in, kernel}, l);
      set_ints(last_node(), "kernel_shape", {1, 1});
      return out;
    };
    const std::string d = step("Sub", {x, conv1x1(conv1x1(x, mean_kernel), spread_kernel)}, l);
    const std::string var = conv1x1(step("Mul", {d, d}, l), mean_kernel);
    const std::string pow = step("Pow", {step("Add", {var, scalar(l.eps)}, l), scalar(-0.5)}, l);
    const std::string scale = conv1x1(pow, constant(l.param + ".weight_c111", w.reshape({c, 1, 1, 1})));
    node("Add", {step("Mul", {d, scale}, l), constant(l.param + ".bias_c11", b.reshape({c, 1, 1}))}, l);
  }

  // ViT's tokens: the patch grid [N, D, gh, gw] as a row [N, D, 1, gh*gw], a zero column put first (Pad), plus the
  // position embedding as [1, D, 1, 1 + gh*gw] with the class token added into its first column: the class token
  // needs no batch-sized copy (OpenCV 4.6 has no Expand), and every node is one every runtime runs.
  void vit_embedding(const Layer& l) {
    const torch::Tensor token = tensors_.at(l.param + "class_token");          // [1, 1, D]
    const torch::Tensor pos = tensors_.at(l.param + "encoder.pos_embedding");  // [1, 1 + L, D]
    const int64_t d = pos.size(2);
    const std::string row = step("Reshape", {value(l.inputs[0]), ints({0, d, 1, -1})}, l);
    const std::string padded = step("Pad", {row, ints({0, 0, 0, 1, 0, 0, 0, 0})}, l);
    torch::Tensor table = pos.to(torch::kFloat).clone();
    table.select(1, 0).add_(token.to(torch::kFloat).select(1, 0));
    // As [D, 1, 1 + L], without the leading 1: OpenCV 4.6 broadcasts that constant over a batch > 1, not [1, D, 1, L].
    node("Add",
         {padded, constant(l.param + "encoder.pos_embedding_with_class_token", table[0].t().unsqueeze(1).contiguous())},
         l);
  }

  // nn.MultiheadAttention's self-attention on tokens [N, D, 1, L], as 1x1 convolutions, Reshape, Transpose,
  // MatMul and Softmax over each head's [d, L] slice (d = D / heads): q^T k [N, H, L, L], softmax over the keys,
  // v attn^T [N, H, d, L], which is already the heads' concatenation in nn.MultiheadAttention's order.
  void self_attention(const Layer& l) {
    const torch::Tensor w = tensors_.at(l.param + ".in_proj_weight");  // [3D, D]
    const int64_t dim = w.size(1), head = dim / l.heads;
    const std::string qkv =
        step("Conv",
             {value(l.inputs[0]), constant(l.param + ".in_proj_weight_1x1", w.reshape({3 * dim, dim, 1, 1})),
              weight(l.param + ".in_proj_bias")},
             l);
    set_ints(last_node(), "kernel_shape", {1, 1});
    auto part = [&](int64_t i) {  // [N, 3D, 1, L] -> rows i*D .. (i+1)*D as [N, H, d, L]
      const std::string rows = step("Slice", {qkv, ints({i * dim}), ints({(i + 1) * dim}), ints({1})}, l);
      return step("Reshape", {rows, ints({0, l.heads, head, -1})}, l);
    };
    const std::string q = part(0), k = part(1), v = part(2);
    const std::string qt = transpose_last(step("Mul", {q, scalar(1.0 / std::sqrt(static_cast<double>(head)))}, l), l);
    const std::string weights = step("Softmax", {step("MatMul", {qt, k}, l)}, l);
    set_int(last_node(), "axis", 3);
    const std::string mixed = step("MatMul", {v, transpose_last(weights, l)}, l);
    const std::string out = l.param + ".out_proj";
    const torch::Tensor wo = tensors_.at(out + ".weight");
    auto& n = node("Conv",
                   {step("Reshape", {mixed, ints({0, dim, 1, -1})}, l),
                    constant(out + ".weight_1x1", wo.reshape({dim, dim, 1, 1})), weight(out + ".bias")},
                   l);
    set_ints(n, "kernel_shape", {1, 1});
  }

  // Swin's shifted-window attention on the map [N, C, H, W], written out for OpenCV 4.6 (6-D Reshape/Transpose,
  // Slice + Concat for the roll, MatMul with the weights transposed for the Linears, one constant [windows *
  // heads, n, n] for the bias and mask, broadcast over the batch as a rank-3 constant):
  //   pad -> roll -> windows [N, windows, n, C] -> qkv [3, N, windows * heads, n, d] -> softmax(q k^T + bias) v
  //   -> proj -> the map -> roll back -> cut the padding
  void window_attention(const Layer& l) {
    const torch::Tensor qkv_w = tensors_.at(l.param + ".qkv.weight");  // [3C, C]
    const int64_t c = qkv_w.size(1), heads = l.heads, d = c / heads, win = l.window, n = win * win;
    const int64_t ph = l.height + (win - l.height % win) % win, pw = l.width + (win - l.width % win) % win;
    const int64_t nh = ph / win, nw = pw / win, windows = nh * nw;
    std::string x = value(l.inputs[0]);
    if (ph != l.height || pw != l.width) x = step("Pad", {x, ints({0, 0, 0, 0, 0, 0, ph - l.height, pw - l.width})}, l);
    x = roll(roll(x, l.shift_h, 2, ph, l), l.shift_w, 3, pw, l);
    x = step("Reshape", {x, ints({0, c, nh, win, nw, win})}, l);
    x = step("Transpose", {x}, l);
    set_ints(last_node(), "perm", {0, 2, 4, 3, 5, 1});
    x = step("Reshape", {x, ints({0, windows, n, c})}, l);
    std::string qkv = step("Add",
                           {step("MatMul", {x, constant(l.param + ".qkv.weight_t", qkv_w.t().contiguous())}, l),
                            weight(l.param + "_qkv_bias")},
                           l);
    qkv = step("Reshape", {qkv, ints({0, windows, n, 3, heads, d})}, l);
    qkv = step("Transpose", {qkv}, l);
    set_ints(last_node(), "perm", {0, 3, 1, 4, 2, 5});
    qkv = step("Reshape", {qkv, ints({0, 3, windows * heads, n, d})}, l);
    auto part = [&](int64_t i) {  // [N, windows * heads, n, d]
      return step("Reshape",
                  {step("Slice", {qkv, ints({i}), ints({i + 1}), ints({1})}, l), ints({0, windows * heads, n, d})}, l);
    };
    std::string q = part(0), k = part(1);
    const std::string v = part(2);
    if (l.cosine) {
      q = step("Mul", {unit_rows(q, d, l), weight(l.param + "_query_scale")}, l);
      k = unit_rows(k, d, l);
    } else {
      q = step("Mul", {q, scalar(1.0 / std::sqrt(static_cast<double>(d)))}, l);
    }
    const std::string scores =
        step("Add", {step("MatMul", {q, transpose_last(k, l)}, l), weight(l.param + "_bias")}, l);
    const std::string attention = step("Softmax", {scores}, l);
    set_int(last_node(), "axis", 3);
    std::string y = step("Reshape", {step("MatMul", {attention, v}, l), ints({0, windows, heads, n, d})}, l);
    y = step("Transpose", {y}, l);
    set_ints(last_node(), "perm", {0, 1, 3, 2, 4});
    y = step("Reshape", {y, ints({0, windows, n, c})}, l);
    const torch::Tensor proj_w = tensors_.at(l.param + ".proj.weight");
    y = step("Add",
             {step("MatMul", {y, constant(l.param + ".proj.weight_t", proj_w.t().contiguous())}, l),
              weight(l.param + ".proj.bias")},
             l);
    y = step("Reshape", {y, ints({0, nh, nw, win, win, c})}, l);
    y = step("Transpose", {y}, l);
    set_ints(last_node(), "perm", {0, 5, 1, 3, 2, 4});
    y = step("Reshape", {y, ints({0, c, ph, pw})}, l);
    y = roll(roll(y, l.shift_h == 0 ? 0 : ph - l.shift_h, 2, ph, l), l.shift_w == 0 ? 0 : pw - l.shift_w, 3, pw, l);
    if (ph != l.height || pw != l.width) node("Slice", {y, ints({0, 0}), ints({l.height, l.width}), ints({2, 3})}, l);
    else node("Identity", {y}, l);
  }

  // torch.roll(x, -by, axis) on an axis of `size`: the rows from `by` on, then the first `by`.
  std::string roll(const std::string& x, int64_t by, int64_t axis, int64_t size, const Layer& l) {
    if (by == 0) return x;
    const std::string tail = step("Slice", {x, ints({by}), ints({size}), ints({axis})}, l);
    const std::string head = step("Slice", {x, ints({0}), ints({by}), ints({axis})}, l);
    const std::string out = step("Concat", {tail, head}, l);
    set_int(last_node(), "axis", axis);
    return out;
  }

  // F.normalize over the last axis (of size d) without broadcasting, which OpenCV 4.6 gets wrong: the sum of
  // squares spread over the row by a MatMul with ones, then x * (sum + 1e-24)^-1/2 (torch's max(norm, 1e-12)
  // for any row that is not all but zero).
  std::string unit_rows(const std::string& x, int64_t d, const Layer& l) {
    const std::string sums =
        step("MatMul", {step("Mul", {x, x}, l), constant("ones_" + std::to_string(d), torch::ones({d, d}))}, l);
    return step("Mul", {x, step("Pow", {step("Add", {sums, scalar(1e-24)}, l), scalar(-0.5)}, l)}, l);
  }

  // [N, H, a, b] -> [N, H, b, a]
  std::string transpose_last(const std::string& x, const Layer& l) {
    const std::string out = step("Transpose", {x}, l);
    set_ints(last_node(), "perm", {0, 1, 3, 2});
    return out;
  }

  onnx::NodeProto& last_node() { return *graph_.mutable_node(graph_.node_size() - 1); }

  // An int64 initializer (shapes, pads, slice bounds), one per distinct value.
  std::string ints(const std::vector<int64_t>& values) {
    std::string name = "ints";
    for (int64_t v : values) name += "_" + std::to_string(v);
    if (written_.insert(name).second) {
      auto* init = graph_.add_initializer();
      init->set_name(name);
      init->set_data_type(onnx::TensorProto::INT64);
      init->add_dims(static_cast<int64_t>(values.size()));
      for (int64_t v : values) init->add_int64_data(v);
    }
    return name;
  }

  // A float scalar initializer, one per value.
  std::string scalar(double v) {
    char name[48];
    std::snprintf(name, sizeof name, "const_%.9g", v);
    return constant(name, torch::tensor(static_cast<float>(v)));
  }

  // An initializer the state dict does not hold under this name (a reshaped or derived tensor); added once.
  std::string constant(const std::string& name, const torch::Tensor& value) {
    if (!tensors_.count(name)) tensors_.emplace(name, value);
    return weight(name);
  }

  // Adds the parameter as an initializer once; returns its name.
  const std::string& weight(const std::string& name) {
    if (written_.insert(name).second) {
      const auto it = tensors_.find(name);
      if (it == tensors_.end()) throw ExportError("ONNX export: the model has no tensor \"" + name + "\"");
      const torch::Tensor t = it->second.to(torch::kFloat).contiguous();
      auto* init = graph_.add_initializer();
      init->set_name(name);
      init->set_data_type(onnx::TensorProto::FLOAT);
      for (int64_t d : t.sizes()) init->add_dims(d);
      init->set_raw_data(std::string(static_cast<const char*>(t.data_ptr()), t.numel() * sizeof(float)));
    }
    return *written_.find(name);
  }

  onnx::GraphProto& graph_;
  const LayerGraph& layers_;
  int64_t opset_;
  std::map<std::string, torch::Tensor> tensors_;
  std::set<std::string> written_;
  int steps_ = 0;
};

std::string onnx_serialize(const ExportRequest& r) {
  const int64_t opset = r.opset == 0 ? kDefaultOnnxOpset : r.opset;
  if (opset < kMinOpset || opset > max_opset())
    throw UsageError("--opset: " + std::to_string(opset) + " is outside " + std::to_string(kMinOpset) + ".." +
                     std::to_string(max_opset()) + " (this build's ONNX library knows up to " +
                     std::to_string(max_opset()) + ")");
  onnx::ModelProto model;
  model.set_ir_version(onnx::IR_VERSION);
  model.set_producer_name("trainer");
  model.set_producer_version(TRAINER_VERSION);
  model.set_doc_string("image classifier: float NCHW input normalised with the metadata's mean and std, logits out");
  auto* op = model.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  for (const auto& [key, value] : r.metadata) {
    auto* p = model.add_metadata_props();
    p->set_key(key);
    p->set_value(value);
  }
  auto& graph = *model.mutable_graph();
  graph.set_name(r.metadata.count("arch") ? r.metadata.at("arch") : "classifier");
  const std::string batch = r.batch > 0 ? std::to_string(r.batch) : "batch";
  set_tensor_type(
      *graph.add_input(), "input",
      {batch, std::to_string(r.input.channels), std::to_string(r.input.height), std::to_string(r.input.width)});
  set_tensor_type(*graph.add_output(), "logits", {batch, std::to_string(r.num_classes)});
  NamedTensors tensors = r.parameters;
  tensors.insert(tensors.end(), r.buffers.begin(), r.buffers.end());
  tensors.insert(tensors.end(), r.graph.constants.begin(), r.graph.constants.end());
  GraphWriter(graph, r.graph, tensors, opset).write();
  try {
    onnx::checker::check_model(model);
    // Strict inference: every node's output type and shape must follow from the input's, ending at [batch, classes].
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(/*check_type=*/true, /*strict=*/1));
  } catch (const std::exception& e) {
    throw ExportError(std::string("ONNX export: the checker refused the graph: ") + e.what());
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes)) throw ExportError("ONNX export: the model does not serialize (over 2 GiB?)");
  return bytes;
}

cv::dnn::Net read_onnx_net(const std::string& bytes, const std::string& source) {
  cv::dnn::Net net;
  try {
    net = cv::dnn::readNetFromONNX(bytes.data(), bytes.size());
  } catch (const cv::Exception& e) {
    throw ExportError(source + ": OpenCV's DNN module cannot read it (" + e.err + ")");
  }
  if (net.empty()) throw ExportError(source + ": OpenCV's DNN module read no network from it");
  net.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
  net.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
  return net;
}

// The file with its symbolic batch dimension (input and logits) set to `batch`. OpenCV 4.6 plans a graph with a
// symbolic batch for one image: a squeeze-excitation Mul of [N, C, 1, 1] by [N, C, H, W] then stops at N > 1.
std::string with_batch(const std::string& bytes, int64_t batch) {
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) return bytes;
  auto fix = [batch](onnx::ValueInfoProto& v) {
    auto* shape = v.mutable_type()->mutable_tensor_type()->mutable_shape();
    if (shape->dim_size() > 0 && !shape->dim(0).has_dim_value()) shape->mutable_dim(0)->set_dim_value(batch);
  };
  for (auto& v : *model.mutable_graph()->mutable_input()) fix(v);
  for (auto& v : *model.mutable_graph()->mutable_output()) fix(v);
  std::string out;
  return model.SerializeToString(&out) ? out : bytes;
}

// Runs the file in OpenCV's DNN module, the network read for each input shape (with_batch): OpenCV 4.10 also gives
// wrong logits when a network that ran one batch size runs another, while a network read for the shape is right.
class OpenCvDnnClassifier final : public Classifier {
 public:
  OpenCvDnnClassifier(std::shared_ptr<const std::string> bytes, std::string source, cv::dnn::Net net)
      : bytes_(std::move(bytes)), source_(std::move(source)), net_(std::move(net)) {}

  torch::Tensor forward(torch::Tensor images) override {
    const torch::Tensor x = images.to(torch::kCPU, torch::kFloat).contiguous();
    std::vector<int> shape(x.sizes().begin(), x.sizes().end());
    if (shape != shape_) net_ = read_onnx_net(with_batch(*bytes_, x.size(0)), source_);
    shape_ = shape;
    const cv::Mat blob(static_cast<int>(shape.size()), shape.data(), CV_32F, x.data_ptr());
    net_.setInput(blob);
    cv::Mat out = net_.forward();
    return torch::from_blob(out.ptr<float>(), {out.size[0], static_cast<int64_t>(out.total()) / out.size[0]},
                            torch::kFloat)
        .clone();
  }

 private:
  std::shared_ptr<const std::string> bytes_;
  std::string source_;
  cv::dnn::Net net_;
  std::vector<int> shape_;  // of the last input
};

// A tensor's bytes as OpenCV's importer will read them: OpenCV 4.6 takes an initializer's dims as written and
// copies that many elements out of raw_data whatever its length (a 96-byte file read 4 MB past a buffer; fixed
// upstream later), and would open a file named by external data. So: dims whole numbers whose product fits, a
// data type of known size, and exactly that many elements stored in the file itself.
std::optional<std::string> tensor_problem(const onnx::TensorProto& t) {
  static const std::map<int, uint64_t> kElementBytes{
      {onnx::TensorProto::FLOAT, 4},   {onnx::TensorProto::UINT8, 1},  {onnx::TensorProto::INT8, 1},
      {onnx::TensorProto::UINT16, 2},  {onnx::TensorProto::INT16, 2},  {onnx::TensorProto::INT32, 4},
      {onnx::TensorProto::INT64, 8},   {onnx::TensorProto::BOOL, 1},   {onnx::TensorProto::FLOAT16, 2},
      {onnx::TensorProto::DOUBLE, 8},  {onnx::TensorProto::UINT32, 4}, {onnx::TensorProto::UINT64, 8},
      {onnx::TensorProto::BFLOAT16, 2}};
  const std::string name = "tensor \"" + first_line(t.name()).substr(0, 80) + "\"";
  if (t.data_location() == onnx::TensorProto::EXTERNAL || t.external_data_size() > 0)
    return name + " keeps its data in another file";
  const auto element = kElementBytes.find(t.data_type());
  if (element == kElementBytes.end()) return name + " has data type " + std::to_string(t.data_type());
  uint64_t count = 1, bytes = 0;
  for (const int64_t d : t.dims())
    if (d < 0 || multiply_overflows(count, static_cast<uint64_t>(d), count)) return name + " has a bad shape";
  if (multiply_overflows(count, element->second, bytes)) return name + " has a bad shape";
  const uint64_t typed = static_cast<uint64_t>(t.float_data_size()) + static_cast<uint64_t>(t.int32_data_size()) +
                         static_cast<uint64_t>(t.int64_data_size()) + static_cast<uint64_t>(t.double_data_size()) +
                         static_cast<uint64_t>(t.uint64_data_size());
  if (t.has_raw_data() ? t.raw_data().size() != bytes || typed != 0 : typed != count)
    return name + " stores " +
           (t.has_raw_data() ? std::to_string(t.raw_data().size()) + " bytes" : std::to_string(typed) + " elements") +
           " where its shape needs " + std::to_string(t.has_raw_data() ? bytes : count);
  return std::nullopt;
}

// Every tensor of the graph: its initializers and the tensors its nodes' attributes hold (Constant), subgraphs
// (If, Loop) included, at most 8 deep.
std::optional<std::string> graph_problem(const onnx::GraphProto& g, int depth = 0) {
  if (depth > 8) return std::string("subgraphs nested more than 8 deep");
  for (const auto& t : g.initializer())
    if (auto problem = tensor_problem(t)) return problem;
  if (g.sparse_initializer_size() > 0) return std::string("a sparse initializer, which no export holds");
  for (const auto& node : g.node())
    for (const auto& a : node.attribute()) {
      if (a.has_t())
        if (auto problem = tensor_problem(a.t())) return problem;
      for (const auto& t : a.tensors())
        if (auto problem = tensor_problem(t)) return problem;
      if (a.has_g())
        if (auto problem = graph_problem(a.g(), depth + 1)) return problem;
      for (const auto& sub : a.graphs())
        if (auto problem = graph_problem(sub, depth + 1)) return problem;
    }
  return std::nullopt;
}

DeployedModel onnx_open(const std::string& bytes, const std::string& source) {
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes) || model.graph().node_size() == 0)
    throw ExportError(source + ": not an ONNX model (the file does not parse as one)");
  if (const auto problem = graph_problem(model.graph()))
    throw ExportError(source + ": not an ONNX model trainer export writes, or damaged (" + *problem + ")");
  DeployedModel m;
  for (const auto& p : model.metadata_props()) m.metadata[p.key()] = p.value();
  m.model = std::make_shared<OpenCvDnnClassifier>(std::make_shared<const std::string>(bytes), source,
                                                  read_onnx_net(bytes, source));
  return m;
}

}  // namespace

#endif  // TRAINER_ONNX

ExportFormat onnx_format() {
  ExportFormat f;
  f.name = "onnx";
  f.extensions = {".onnx"};
  f.metadata_where = "the model's metadata_props (onnx.load(f).metadata_props; onnxruntime: get_modelmeta())";
  f.needs_graph = true;
  f.takes_opset_and_batch = true;
#ifdef TRAINER_ONNX
  f.serialize = onnx_serialize;
  f.open = onnx_open;
#else
  f.available = false;
  const auto unavailable = [] {
    return ExportError(
        "this trainer was built without ONNX (it needs the ONNX library and OpenCV's dnn module: on Debian "
        "libonnx-dev and libopencv-dev; rebuild after installing them)");
  };
  f.serialize = [unavailable](const ExportRequest&) -> std::string { throw unavailable(); };
  f.open = [unavailable](const std::string&, const std::string&) -> DeployedModel { throw unavailable(); };
#endif
  return f;
}

}  // namespace trainer
