#include "trainer/models/sync_batch_norm.hpp"

#include <torch/torch.h>

namespace trainer {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

const std::vector<int64_t> kReduceDims{0, 2, 3};

torch::Tensor per_channel(const torch::Tensor& t) { return t.view({1, -1, 1, 1}); }

// Statistics and gradients in float32 for float16, bfloat16 and float32 inputs, as LibTorch's BatchNorm; float64
// inputs stay float64.
torch::ScalarType compute_type(const torch::Tensor& t) {
  return t.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

// Batch normalisation over the global batch. Each rank's share enters as (count, sum, sum of squares) in float64,
// built from its own mean and (two-pass) variance, so the combined variance keeps float32's accuracy.
struct SyncBatchNormFunction : torch::autograd::Function<SyncBatchNormFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& input, const torch::Tensor& weight,
                               const torch::Tensor& bias, torch::Tensor running_mean, torch::Tensor running_var,
                               double momentum, double eps, const SumOverRanks* sum) {
    const int64_t channels = input.size(1);
    const auto type = compute_type(input);
    const auto x = input.to(type);
    const auto [variance, mean] = torch::var_mean(x, kReduceDims, /*unbiased=*/false);
    const double n = static_cast<double>(input.numel() / channels);
    const auto mean64 = mean.to(torch::kDouble), variance64 = variance.to(torch::kDouble);
    auto totals = torch::cat({torch::full({1}, n, mean64.options()), mean64 * n, (variance64 + mean64 * mean64) * n});
    (*sum)({totals});
    const double count = totals[0].item<double>();
    TORCH_CHECK(count > 1, "Expected more than 1 value per channel when training, got input size ", input.sizes(),
                " over all ranks");
    const auto global_mean = totals.slice(0, 1, 1 + channels) / count;
    const auto global_var = (totals.slice(0, 1 + channels) / count - global_mean * global_mean).clamp_min(0);
    const auto invstd = (global_var + eps).rsqrt().to(type);
    const auto mean_t = global_mean.to(type);
    running_mean.mul_(1 - momentum).add_(global_mean.to(running_mean.scalar_type()), momentum);
    running_var.mul_(1 - momentum).add_((global_var * (count / (count - 1))).to(running_var.scalar_type()), momentum);
    // y = (x - mean) * invstd * weight + bias = x * scale + shift, in the input's dtype and memory format.
    const auto scale = invstd * weight;
    const auto shift = bias - mean_t * scale;
    ctx->save_for_backward({input, weight, mean_t, invstd});
    ctx->saved_data["count"] = count;
    // The module outlives its backward pass (it holds the parameters the graph updates), so its sum is safe to keep.
    ctx->saved_data["sum"] = reinterpret_cast<int64_t>(sum);
    return torch::addcmul(per_channel(shift).to(input.scalar_type()), input,
                          per_channel(scale).to(input.scalar_type()));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &input = saved[0], &weight = saved[1], &mean = saved[2], &invstd = saved[3];
    const double count = ctx->saved_data["count"].toDouble();
    const auto* sum = reinterpret_cast<const SumOverRanks*>(ctx->saved_data["sum"].toInt());
    const int64_t channels = input.size(1);
    const auto type = compute_type(input);
    const auto dy = grads[0].to(type);
    const auto xmu = input.to(type) - per_channel(mean);
    const auto sum_dy = dy.sum(kReduceDims), sum_dy_xmu = (dy * xmu).sum(kReduceDims);
    // d/dx of every rank's loss through the global mean and variance: the sums over all ranks' images.
    auto totals = torch::cat({sum_dy, sum_dy_xmu}).to(torch::kDouble);
    (*sum)({totals});
    const auto all_dy = totals.slice(0, 0, channels).to(type) / count;
    const auto all_dy_xmu = totals.slice(0, channels).to(type) / count;
    const auto k = weight * invstd;
    auto grad_input =
        dy * per_channel(k) - per_channel(k * all_dy) - xmu * per_channel(k * invstd * invstd * all_dy_xmu);
    // The parameters' gradients are this rank's own; the gradient all-reduce sums them like every other.
    return {grad_input.to(input.scalar_type()),
            sum_dy_xmu * invstd,
            sum_dy,
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

SyncBatchNorm2dImpl::SyncBatchNorm2dImpl(int64_t features, double eps, double momentum)
    : features_(features), eps_(eps), momentum_(momentum) {
  reset();
}

void SyncBatchNorm2dImpl::reset() {
  weight = register_parameter("weight", torch::ones({features_}));
  bias = register_parameter("bias", torch::zeros({features_}));
  running_mean = register_buffer("running_mean", torch::zeros({features_}));
  running_var = register_buffer("running_var", torch::ones({features_}));
  num_batches_tracked = register_buffer("num_batches_tracked", torch::tensor(0, torch::kLong));
}

torch::Tensor SyncBatchNorm2dImpl::forward(const torch::Tensor& input) {
  TORCH_CHECK(input.dim() == 4, "BatchNorm2d expects a 4-D input, got ", input.sizes());
  if (is_training()) {
    torch::NoGradGuard no_grad;
    num_batches_tracked += 1;
  }
  if (sum_ && is_training())
    return SyncBatchNormFunction::apply(input, weight, bias, running_mean, running_var, momentum_, eps_, &sum_);
  // torch::nn::BatchNorm2d's own computation.
  namespace F = torch::nn::functional;
  return F::batch_norm(
      input, running_mean, running_var,
      F::BatchNormFuncOptions().weight(weight).bias(bias).training(is_training()).momentum(momentum_).eps(eps_));
}

void SyncBatchNorm2dImpl::pretty_print(std::ostream& stream) const {
  stream << "SyncBatchNorm2d(" << features_ << ", eps=" << eps_ << ", momentum=" << momentum_
         << ", synchronised=" << (sum_ ? "true" : "false") << ")";
}

int64_t sync_batch_norm(torch::nn::Module& model, const SumOverRanks& sum) {
  int64_t layers = 0;
  for (const auto& m : model.modules(/*include_self=*/true))
    if (auto* bn = dynamic_cast<SyncBatchNorm2dImpl*>(m.get())) {
      bn->sync_over(sum);
      ++layers;
    }
  return layers;
}

}  // namespace trainer
