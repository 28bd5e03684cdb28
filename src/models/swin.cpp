#include "trainer/models/swin.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "trainer/models/blocks/mlp.hpp"
#include "trainer/models/blocks/stochastic_depth.hpp"
#include "trainer/models/blocks/trunc_normal.hpp"
#include "trainer/util/torch_compat.hpp"

namespace trainer {

namespace nn = torch::nn;
namespace F = torch::nn::functional;

// Named rather than anonymous: SwinTransformer::Parts holds these types.
namespace swin_parts {

constexpr double kSwinEps = 1e-5;

nn::LayerNorm swin_norm(int64_t dim) { return nn::LayerNorm(nn::LayerNormOptions({dim}).eps(kSwinEps)); }

// relative_position_index: for tokens i, j of a w x w window, the row of their offset (dh, dw) in a
// (2w - 1) x (2w - 1) table: (dh + w - 1) * (2w - 1) + dw + w - 1, flattened over [w*w, w*w].
torch::Tensor relative_position_index(int64_t w) {
  const torch::Tensor c = torch::arange(w, torch::kLong);
  const auto grid = torch::meshgrid({c, c}, "ij");
  const torch::Tensor coords = torch::stack({grid[0].flatten(), grid[1].flatten()});  // [2, w*w]
  const torch::Tensor offset = coords.unsqueeze(2) - coords.unsqueeze(1);             // [2, w*w, w*w]
  return ((offset[0] + (w - 1)) * (2 * w - 1) + (offset[1] + (w - 1))).flatten();
}

// V2's relative_coords_table [1, 2w-1, 2w-1, 2]: each offset scaled to [-8, 8], then sign(t) log2(|t| + 1) / 3,
// with torchvision's operations in its order (the buffer is saved, so a fresh model's must match its bits).
torch::Tensor relative_coords_table(int64_t w) {
  const torch::Tensor r = torch::arange(-(w - 1), w, torch::kFloat);
  const auto grid = torch::meshgrid({r, r}, "ij");
  torch::Tensor t = torch::stack({grid[0], grid[1]}).permute({1, 2, 0}).contiguous().unsqueeze(0);
  t.select(3, 0).div_(w - 1);
  t.select(3, 1).div_(w - 1);
  t.mul_(8);
  return torch::sign(t) * torch::log2(torch::abs(t) + 1.0) / 3.0;
}

// The attention mask of a shifted window pass over a padded ph x pw map ([windows, w*w, w*w]): -100 between
// tokens that the roll brought together from different regions, 0 within one. The regions are torchvision's
// slices [0, -w), [-w, -shift), [-shift, end) per axis, with Python's meaning of each bound (a shift of 0 makes
// the last slice the whole axis).
torch::Tensor shift_mask(int64_t ph, int64_t pw, int64_t w, int64_t sh, int64_t sw, const torch::TensorOptions& o) {
  auto bound = [](int64_t i, int64_t n) { return i < 0 ? std::max<int64_t>(i + n, 0) : std::min(i, n); };
  auto slices = [&](int64_t shift, int64_t n) {
    return std::array<std::pair<int64_t, int64_t>, 3>{
        {{bound(0, n), bound(-w, n)}, {bound(-w, n), bound(-shift, n)}, {bound(-shift, n), n}}};
  };
  torch::Tensor mask = torch::zeros({ph, pw}, o);
  double region = 0;
  for (const auto& [h0, h1] : slices(sh, ph))
    for (const auto& [w0, w1] : slices(sw, pw)) {
      if (h1 > h0 && w1 > w0) mask.slice(0, h0, h1).slice(1, w0, w1).fill_(region);
      region += 1;
    }
  mask = mask.view({ph / w, w, pw / w, w}).permute({0, 2, 1, 3}).reshape({-1, w * w});
  mask = mask.unsqueeze(1) - mask.unsqueeze(2);
  return torch::zeros_like(mask).masked_fill_(mask != 0, -100.0);
}

// ShiftedWindowAttention (V1) and ShiftedWindowAttentionV2 on tokens [B, H, W, C].
class WindowAttention final : public nn::Module {
 public:
  WindowAttention(int64_t dim, int64_t heads, int64_t window, int64_t shift, bool v2, double dropout)
      : heads_(heads), window_(window), shift_(shift), v2_(v2), dropout_(dropout) {
    qkv_ = register_module("qkv", nn::Linear(dim, 3 * dim));
    proj_ = register_module("proj", nn::Linear(dim, dim));
    const int64_t side = 2 * window - 1;
    if (v2) {
      logit_scale_ = register_parameter("logit_scale", torch::log(10 * torch::ones({heads, 1, 1})));
      coords_table_ = register_buffer("relative_coords_table", relative_coords_table(window));
      cpb_mlp_ = register_module("cpb_mlp", nn::Sequential(nn::Linear(2, 512), nn::ReLU(),
                                                           nn::Linear(nn::LinearOptions(512, heads).bias(false))));
    } else {
      table_ = register_parameter("relative_position_bias_table", torch::zeros({side * side, heads}));
      trunc_normal_(table_, 0.02);
    }
    index_ = register_buffer("relative_position_index", relative_position_index(window));
  }

  // The eval-mode layer for an h x w map, with its constants (the bias and mask, V2's key-zeroed qkv bias and
  // query scale) computed here by the code forward() runs.
  std::string describe(LayerGraph& g, const std::string& x, const std::string& param, int64_t h, int64_t w) {
    torch::NoGradGuard no_grad;
    const Geometry at = geometry(h, w);
    torch::Tensor bias = position_bias()[0];  // [heads, n, n]
    const int64_t n = window_ * window_;
    const torch::Tensor mask = at.shifted() ? shift_mask(at.ph, at.pw, window_, at.sh, at.sw, bias.options())
                                            : torch::zeros({at.windows, n, n}, bias.options());
    g.constants.emplace_back(param + "_bias", (bias.unsqueeze(0) + mask.unsqueeze(1)).reshape({-1, n, n}));
    g.constants.emplace_back(param + "_qkv_bias", qkv_bias().detach().clone());
    if (v2_)
      g.constants.emplace_back(param + "_query_scale", logit_scale().repeat({at.windows, 1, 1}).detach().clone());
    Layer l;
    l.param = param;
    l.heads = heads_;
    l.height = h;
    l.width = w;
    l.window = window_;
    l.shift_h = at.sh;
    l.shift_w = at.sw;
    l.cosine = v2_;
    return g.window_attention(x, std::move(l));
  }

  torch::Tensor forward(const torch::Tensor& x) {
    const int64_t b = x.size(0), h = x.size(1), w = x.size(2), c = x.size(3), win = window_;
    const Geometry at = geometry(h, w);
    const int64_t ph = at.ph, pw = at.pw, sh = at.sh, sw = at.sw, windows = at.windows;
    torch::Tensor t = ph == h && pw == w ? x : F::pad(x, F::PadFuncOptions({0, 0, 0, pw - w, 0, ph - h}));
    const bool shifted = at.shifted();
    if (shifted) t = torch::roll(t, {-sh, -sw}, {1, 2});
    const int64_t n = win * win, d = c / heads_;
    t = t.view({b, ph / win, win, pw / win, win, c}).permute({0, 1, 3, 2, 4, 5}).reshape({b * windows, n, c});

    const torch::Tensor qkv =
        F::linear(t, qkv_->weight, qkv_bias()).reshape({b * windows, n, 3, heads_, d}).permute({2, 0, 3, 1, 4});
    torch::Tensor q = qkv[0], k = qkv[1], v = qkv[2];
    std::optional<double> scale;
    if (v2_) {  // cosine attention: unit queries and keys, times exp(logit_scale) capped at 100
      q = F::normalize(q, F::NormalizeFuncOptions().dim(-1)) * logit_scale().to(q.scalar_type());
      k = F::normalize(k, F::NormalizeFuncOptions().dim(-1));
      scale = 1.0;
    }
    torch::Tensor bias = position_bias();  // [1, heads, n, n]
    torch::Tensor y;
    if (shifted) {
      // Each window its own mask: attention over [B, windows, heads, n, d] (a view) with a [windows, heads, n, n]
      // bias broadcast over the batch.
      bias = (bias + shift_mask(ph, pw, win, sh, sw, bias.options()).unsqueeze(1)).to(q.scalar_type());
      auto split = [&](const torch::Tensor& a) { return a.view({b, windows, heads_, n, d}); };
      y = compat::attention(split(q), split(k), split(v), bias, 0.0, is_training(), scale).flatten(0, 1);
    } else {
      y = compat::attention(q, k, v, bias.to(q.scalar_type()), 0.0, is_training(), scale);
    }
    y = torch::dropout(proj_->forward(y.transpose(1, 2).reshape({b * windows, n, c})), dropout_, is_training());

    // Windows back to the map, the shift undone, the padding cut.
    y = y.view({b, ph / win, pw / win, win, win, c}).permute({0, 1, 3, 2, 4, 5}).reshape({b, ph, pw, c});
    if (shifted) y = torch::roll(y, {sh, sw}, {1, 2});
    return ph == h && pw == w ? y : y.slice(1, 0, h).slice(2, 0, w).contiguous();
  }

 private:
  // A map's padding to whole windows and its shifts: none along an axis one window covers.
  struct Geometry {
    int64_t ph, pw, sh, sw, windows;
    bool shifted() const { return sh + sw > 0; }
  };
  Geometry geometry(int64_t h, int64_t w) const {
    const int64_t win = window_, ph = h + (win - h % win) % win, pw = w + (win - w % win) % win;
    return {ph, pw, win >= ph ? 0 : shift_, win >= pw ? 0 : shift_, (ph / win) * (pw / win)};
  }

  // V2 zeroes the key third of the qkv bias in every forward pass, whatever the weights hold.
  torch::Tensor qkv_bias() const {
    if (!v2_) return qkv_->bias;
    torch::Tensor b = qkv_->bias.clone();
    const int64_t c = b.size(0) / 3;
    b.slice(0, c, 2 * c).zero_();
    return b;
  }

  // V2: exp(logit_scale) capped at 100, [heads, 1, 1].
  torch::Tensor logit_scale() const { return torch::clamp(logit_scale_, c10::nullopt, std::log(100.0)).exp(); }

  // The relative position bias [1, heads, n, n]: V1 a learned table's rows, V2 16 sigmoid(cpb_mlp(coordinates)).
  torch::Tensor position_bias() {
    const int64_t n = window_ * window_;
    const torch::Tensor table = v2_ ? cpb_mlp_->forward(coords_table_).view({-1, heads_}) : table_;
    const torch::Tensor bias = table.index_select(0, index_).view({n, n, heads_}).permute({2, 0, 1}).unsqueeze(0);
    return v2_ ? 16 * torch::sigmoid(bias) : bias;
  }

  int64_t heads_, window_, shift_;
  bool v2_;
  double dropout_;
  nn::Linear qkv_{nullptr}, proj_{nullptr};
  torch::Tensor table_, logit_scale_, coords_table_, index_;
  nn::Sequential cpb_mlp_{nullptr};
};

// SwinTransformerBlock (V1, pre-norm) and SwinTransformerBlockV2 (post-norm), each branch dropped per sample.
class SwinBlock final : public nn::Module {
 public:
  SwinBlock(int64_t dim, int64_t heads, int64_t window, int64_t shift, bool v2, double dropout, double drop_path)
      : v2_(v2), drop_path_(drop_path) {
    norm1_ = register_module("norm1", swin_norm(dim));
    attn_ = register_module("attn", std::make_shared<WindowAttention>(dim, heads, window, shift, v2, dropout));
    norm2_ = register_module("norm2", swin_norm(dim));
    mlp_ = register_module("mlp", std::make_shared<Mlp>(dim, 4 * dim, dropout));
  }

  std::string describe(LayerGraph& g, const std::string& x, const std::string& prefix, int64_t h, int64_t w) {
    auto attention = [&](const std::string& in) { return attn_->describe(g, in, prefix + "attn", h, w); };
    auto mlp = [&](const std::string& in) {
      const std::string hidden = g.activation(g.pixel_linear(in, prefix + "mlp.0"), LayerKind::gelu);
      return g.pixel_linear(hidden, prefix + "mlp.3");
    };
    auto norm = [&](const std::string& in, const char* name) { return g.layer_norm_2d(in, prefix + name, kSwinEps); };
    const std::string a = v2_ ? norm(attention(x), "norm1") : attention(norm(x, "norm1"));
    const std::string y = g.add(x, a);
    return g.add(y, v2_ ? norm(mlp(y), "norm2") : mlp(norm(y, "norm2")));
  }

  torch::Tensor forward(const torch::Tensor& input) {
    const torch::Tensor a = v2_ ? norm1_->forward(attn_->forward(input)) : attn_->forward(norm1_->forward(input));
    const torch::Tensor x = input + stochastic_depth(a, drop_path_, is_training());
    const torch::Tensor m = v2_ ? norm2_->forward(mlp_->forward(x)) : mlp_->forward(norm2_->forward(x));
    return x + stochastic_depth(m, drop_path_, is_training());
  }

 private:
  bool v2_;
  double drop_path_;
  nn::LayerNorm norm1_{nullptr}, norm2_{nullptr};
  std::shared_ptr<WindowAttention> attn_;
  std::shared_ptr<Mlp> mlp_;
};

// PatchMerging (V1: LayerNorm over 4C, then the reduction) and PatchMergingV2 (the reduction, then LayerNorm over
// 2C): each 2x2 neighbourhood's tokens concatenated (an odd side padded first) and projected to 2C.
class PatchMerging final : public nn::Module {
 public:
  PatchMerging(int64_t dim, bool v2) : v2_(v2) {
    reduction_ = register_module("reduction", nn::Linear(nn::LinearOptions(4 * dim, 2 * dim).bias(false)));
    norm_ = register_module("norm", swin_norm(v2 ? 2 * dim : 4 * dim));
  }

  std::string describe(LayerGraph& g, const std::string& x, const std::string& prefix, int64_t h, int64_t w) {
    const std::string merged = g.patch_merge(x, h, w);
    if (v2_) return g.layer_norm_2d(g.pixel_linear(merged, prefix + "reduction", false), prefix + "norm", kSwinEps);
    return g.pixel_linear(g.layer_norm_2d(merged, prefix + "norm", kSwinEps), prefix + "reduction", false);
  }

  torch::Tensor forward(torch::Tensor x) {
    const int64_t h = x.size(1), w = x.size(2);
    if (h % 2 != 0 || w % 2 != 0) x = F::pad(x, F::PadFuncOptions({0, 0, 0, w % 2, 0, h % 2}));
    auto part = [&](int64_t row, int64_t col) {
      return x.slice(1, row, c10::nullopt, 2).slice(2, col, c10::nullopt, 2);
    };
    x = torch::cat({part(0, 0), part(1, 0), part(0, 1), part(1, 1)}, -1);
    return v2_ ? norm_->forward(reduction_->forward(x)) : reduction_->forward(norm_->forward(x));
  }

 private:
  bool v2_;
  nn::Linear reduction_{nullptr};
  nn::LayerNorm norm_{nullptr};
};

}  // namespace swin_parts

using swin_parts::kSwinEps;
using swin_parts::swin_norm;

const std::vector<std::pair<std::string, SwinSpec>>& swin_specs() {
  static const std::vector<std::pair<std::string, SwinSpec>> specs{
      {"swin_t", {96, {2, 2, 6, 2}, {3, 6, 12, 24}, 7, 0.2, false}},
      {"swin_s", {96, {2, 2, 18, 2}, {3, 6, 12, 24}, 7, 0.3, false}},
      {"swin_b", {128, {2, 2, 18, 2}, {4, 8, 16, 32}, 7, 0.5, false}},
      {"swin_v2_t", {96, {2, 2, 6, 2}, {3, 6, 12, 24}, 8, 0.2, true}},
      {"swin_v2_s", {96, {2, 2, 18, 2}, {3, 6, 12, 24}, 8, 0.3, true}},
      {"swin_v2_b", {128, {2, 2, 18, 2}, {4, 8, 16, 32}, 8, 0.5, true}},
  };
  return specs;
}

struct SwinTransformer::Parts {
  nn::Conv2d patch{nullptr};
  nn::LayerNorm patch_norm{nullptr};
  std::vector<std::vector<std::shared_ptr<swin_parts::SwinBlock>>> stages;  // features.1, 3, 5, 7
  std::vector<std::shared_ptr<swin_parts::PatchMerging>> merges;            // features.2, 4, 6
};

SwinTransformer::SwinTransformer(const SwinSpec& spec, const ImageShape& input, int64_t num_classes, double dropout,
                                 double stochastic_depth)
    : spec_(spec), input_(input), parts_(std::make_shared<Parts>()) {
  auto features = register_module("features", std::make_shared<nn::Module>());
  // features.0: the 4x4 patch projection, channels moved last ("1" is torchvision's Permute), LayerNorm.
  auto stem = features->register_module("0", std::make_shared<nn::Module>());
  parts_->patch = stem->register_module("0", nn::Conv2d(nn::Conv2dOptions(input.channels, spec.embed, 4).stride(4)));
  parts_->patch_norm = stem->register_module("2", swin_norm(spec.embed));

  int64_t total = 0, index = 0;
  for (int64_t depth : spec.depths) total += depth;
  int64_t dim = spec.embed;
  for (size_t s = 0; s < spec.depths.size(); ++s) {
    auto stage = features->register_module(std::to_string(2 * s + 1), std::make_shared<nn::Module>());
    auto& blocks = parts_->stages.emplace_back();
    for (int64_t i = 0; i < spec.depths[s]; ++i, ++index)
      blocks.push_back(stage->register_module(
          std::to_string(i),
          std::make_shared<swin_parts::SwinBlock>(dim, spec.heads[s], spec.window, i % 2 == 0 ? 0 : spec.window / 2,
                                                  spec.v2, dropout, depth_rate(stochastic_depth, index, total - 1))));
    if (s + 1 == spec.depths.size()) break;
    parts_->merges.push_back(
        features->register_module(std::to_string(2 * s + 2), std::make_shared<swin_parts::PatchMerging>(dim, spec.v2)));
    dim *= 2;
  }
  norm_ = register_module("norm", swin_norm(dim));
  head_ = register_module("head", nn::Linear(dim, num_classes));

  // Every Linear of the model trunc-normal (std 0.02) with zero bias, as torchvision's constructor ends.
  torch::NoGradGuard no_grad;
  for (auto& m : modules(/*include_self=*/false))
    if (auto* linear = m->as<nn::Linear>()) {
      trunc_normal_(linear->weight, 0.02);
      if (linear->bias.defined()) nn::init::zeros_(linear->bias);
    }
}

torch::Tensor SwinTransformer::forward(torch::Tensor images) {
  torch::Tensor x = parts_->patch_norm->forward(parts_->patch->forward(images).permute({0, 2, 3, 1}));
  for (size_t s = 0; s < parts_->stages.size(); ++s) {
    for (const auto& block : parts_->stages[s]) x = block->forward(x);
    if (s < parts_->merges.size()) x = parts_->merges[s]->forward(x);
  }
  return head_->forward(norm_->forward(x).mean({1, 2}));
}

// The map as [N, C, H, W] (layer_graph.hpp) at the training images' size: LayerNorm, the MLPs and the patch
// merging's reduction are the per-pixel kinds; each stage's size fixes its windows' padding, shifts and masks.
std::optional<LayerGraph> SwinTransformer::inference_graph() const {
  LayerGraph g;
  std::string x = g.layer_norm_2d(g.conv(g.input, "features.0.0", *parts_->patch), "features.0.2", kSwinEps);
  int64_t h = input_.height / 4, w = input_.width / 4;
  for (size_t s = 0; s < parts_->stages.size(); ++s) {
    for (size_t i = 0; i < parts_->stages[s].size(); ++i)
      x = parts_->stages[s][i]->describe(g, x, "features." + std::to_string(2 * s + 1) + "." + std::to_string(i) + ".",
                                         h, w);
    if (s >= parts_->merges.size()) continue;
    x = parts_->merges[s]->describe(g, x, "features." + std::to_string(2 * s + 2) + ".", h, w);
    h = (h + 1) / 2;
    w = (w + 1) / 2;
  }
  g.output = g.linear(g.global_avg_pool(g.layer_norm_2d(x, "norm", kSwinEps)), "head");
  return g;
}

}  // namespace trainer
