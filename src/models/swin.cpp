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

namespace {

nn::LayerNorm swin_norm(int64_t dim) { return nn::LayerNorm(nn::LayerNormOptions({dim}).eps(1e-5)); }

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

  torch::Tensor forward(const torch::Tensor& x) {
    const int64_t b = x.size(0), h = x.size(1), w = x.size(2), c = x.size(3), win = window_;
    // Pad to whole windows; no shift along an axis one window covers.
    const int64_t ph = h + (win - h % win) % win, pw = w + (win - w % win) % win;
    torch::Tensor t = ph == h && pw == w ? x : F::pad(x, F::PadFuncOptions({0, 0, 0, pw - w, 0, ph - h}));
    const int64_t sh = win >= ph ? 0 : shift_, sw = win >= pw ? 0 : shift_;
    const bool shifted = sh + sw > 0;
    if (shifted) t = torch::roll(t, {-sh, -sw}, {1, 2});
    const int64_t windows = (ph / win) * (pw / win), n = win * win, d = c / heads_;
    t = t.view({b, ph / win, win, pw / win, win, c}).permute({0, 1, 3, 2, 4, 5}).reshape({b * windows, n, c});

    torch::Tensor qkv_bias = qkv_->bias;
    if (v2_) {  // V2 zeroes the key third of the bias in every forward pass, whatever the weights hold
      qkv_bias = qkv_bias.clone();
      qkv_bias.slice(0, c, 2 * c).zero_();
    }
    const torch::Tensor qkv =
        F::linear(t, qkv_->weight, qkv_bias).reshape({b * windows, n, 3, heads_, d}).permute({2, 0, 3, 1, 4});
    torch::Tensor q = qkv[0], k = qkv[1], v = qkv[2];
    std::optional<double> scale;
    if (v2_) {  // cosine attention: unit queries and keys, times exp(logit_scale) capped at 100
      const torch::Tensor logit = torch::clamp(logit_scale_, c10::nullopt, std::log(100.0)).exp();
      q = F::normalize(q, F::NormalizeFuncOptions().dim(-1)) * logit.to(q.scalar_type());
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

}  // namespace

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

SwinTransformer::SwinTransformer(const SwinSpec& spec, int64_t in_channels, int64_t num_classes, double dropout,
                                 double stochastic_depth) {
  auto features = register_module("features", std::make_shared<nn::Module>());
  // features.0: the 4x4 patch projection, channels moved last ("1" is torchvision's Permute), LayerNorm.
  auto stem = features->register_module("0", std::make_shared<nn::Module>());
  auto conv = stem->register_module("0", nn::Conv2d(nn::Conv2dOptions(in_channels, spec.embed, 4).stride(4)));
  auto stem_norm = stem->register_module("2", swin_norm(spec.embed));
  features_.emplace_back([conv, stem_norm](const torch::Tensor& x) {
    return stem_norm->forward(conv->forward(x).permute({0, 2, 3, 1}));
  });

  int64_t total = 0, index = 0;
  for (int64_t depth : spec.depths) total += depth;
  int64_t dim = spec.embed;
  for (size_t s = 0; s < spec.depths.size(); ++s) {
    auto stage = features->register_module(std::to_string(2 * s + 1), std::make_shared<nn::Module>());
    std::vector<std::shared_ptr<SwinBlock>> blocks;
    for (int64_t i = 0; i < spec.depths[s]; ++i, ++index)
      blocks.push_back(stage->register_module(
          std::to_string(i),
          std::make_shared<SwinBlock>(dim, spec.heads[s], spec.window, i % 2 == 0 ? 0 : spec.window / 2, spec.v2,
                                      dropout, depth_rate(stochastic_depth, index, total - 1))));
    features_.emplace_back([blocks](torch::Tensor x) {
      for (const auto& block : blocks) x = block->forward(x);
      return x;
    });
    if (s + 1 == spec.depths.size()) break;
    auto merge = features->register_module(std::to_string(2 * s + 2), std::make_shared<PatchMerging>(dim, spec.v2));
    features_.emplace_back([merge](const torch::Tensor& x) { return merge->forward(x); });
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
  torch::Tensor x = std::move(images);
  for (const auto& feature : features_) x = feature(x);
  return head_->forward(norm_->forward(x).mean({1, 2}));
}

}  // namespace trainer
