#include "trainer/engine/evaluate.hpp"

#include <algorithm>
#include <chrono>

#include "trainer/data/device/device_stager.hpp"
#include "trainer/data/loader/loaders.hpp"
#include "trainer/data/sources/subset.hpp"
#include "trainer/engine/step.hpp"
#include "trainer/util/clock.hpp"

namespace trainer {

EvalOptions eval_options(const Config& c, const torch::Device& device, bool channels_last,
                         std::shared_ptr<BadSamples> bad) {
  EvalOptions o;
  o.batch_size = static_cast<size_t>(c.data.eval_batch_size);
  o.workers = static_cast<size_t>(c.data.workers);
  o.device = device;
  o.norm = make_normalization(c.data.mean, c.data.std, c.model.in_channels, device);
  o.channels_last = channels_last;
  // Evaluation under the training autocast dtype: on CUDA by default (half the memory traffic); on the CPU the
  // figures stay float32 unless asked, as bfloat16 CPU kernels are slower for inference than float32 ones.
  const Switch eval_amp = c.train.amp.eval;
  if (eval_amp == Switch::on || (eval_amp == Switch::automatic && device.is_cuda()))
    o.autocast = step_options(c.train, device).autocast;
  o.prefetch = static_cast<size_t>(c.data.prefetch);
  o.bad = std::move(bad);
  return o;
}

std::unique_ptr<Loader> make_evaluation_loader(std::shared_ptr<const ImageSource> data, const EvalOptions& options) {
  if (options.group) {
    const World& w = options.group->world();
    data = make_shard(std::move(data), static_cast<size_t>(w.rank), static_cast<size_t>(w.size));
  }
  return make_eval_loader(std::move(data), options.batch_size, options.workers, options.prefetch,
                          options.device.is_cuda(), options.bad, options.decoder);
}

EvalResult evaluate(Classifier& model, std::shared_ptr<const ImageSource> data, const EvalOptions& options) {
  const auto start = Clock::now();
  torch::NoGradGuard no_grad;
  model.eval();
  const int64_t k = std::min<int64_t>(5, static_cast<int64_t>(data->class_names().size()));
  std::shared_ptr<Loader> loader = options.loader;
  if (!loader) loader = make_evaluation_loader(data, options);
  // Counts accumulate on the device: one synchronisation at the end, not one per batch.
  auto options_i64 = torch::TensorOptions().dtype(torch::kInt64).device(options.device);
  torch::Tensor correct1 = torch::zeros({}, options_i64), correct5 = torch::zeros({}, options_i64);
  torch::Tensor counted = torch::zeros({}, options_i64);
  torch::Tensor loss_sum = torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(options.device));
  const int64_t classes = static_cast<int64_t>(data->class_names().size());
  // The confusion matrix is counted on the device too: C * C cells, and one more that a dropped slot is counted
  // in and the result leaves out (no masked_select, whose size the host must wait for).
  const int64_t cells = classes * classes;
  torch::Tensor confusion = options.confusion ? torch::zeros({cells + 1}, options_i64) : torch::Tensor();
  // Row 0: each class's images, row 1: those predicted right; column C collects the dropped slots.
  torch::Tensor per_class = torch::zeros({2, classes + 1}, options_i64);
  EvalResult result;
  const StageDecode decode{options.decoder.get(), {options.bad, BadSlot::drop}};
  torch::Tensor input_buffer;
  for_each_device_batch(*loader, options.device, decode, [&](ImageBatch& batch) {
    const auto x = to_model_input(batch.images, options.norm, options.channels_last, &input_buffer);
    const auto y = batch.labels.to(options.device, /*non_blocking=*/true);
    const torch::Tensor logits = float_logits(model, x, options.device.type(), options.autocast);
    // A dropped slot (label kDroppedLabel) adds no loss, matches no class and is not counted.
    loss_sum += torch::nn::functional::cross_entropy(
                    logits, y,
                    torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum).ignore_index(kDroppedLabel))
                    .to(torch::kDouble);
    const auto top = logits.topk(k, 1);
    const auto hits = std::get<1>(top).eq(y.unsqueeze(1));
    correct1 += hits.select(1, 0).sum();
    correct5 += hits.any(1).sum();
    const auto kept = y.ne(kDroppedLabel);
    counted += kept.sum();
    const auto truth = torch::where(kept, y, classes);
    const auto ones = torch::ones_like(truth);
    per_class[0].scatter_add_(0, truth, ones);
    per_class[1].scatter_add_(0, torch::where(hits.select(1, 0), truth, classes), ones);
    if (options.confusion) {
      const auto cell = torch::where(kept, y * classes + std::get<1>(top).select(1, 0), cells);
      // A 1-D scatter_add_: deterministic on CUDA (run.deterministic allows it, unlike CUDA's bincount), and
      // integer sums do not depend on their order.
      confusion.scatter_add_(0, cell, ones);
    }
    if (options.on_batch) {
      // The top-k probabilities are the top-k logits' softmax over all classes.
      const auto probs = std::get<0>(top) - logits.logsumexp(1, /*keepdim=*/true);
      options.on_batch(static_cast<size_t>(result.read), std::get<1>(top).cpu(), probs.exp().cpu(), y.cpu());
    }
    result.read += y.size(0);
    return true;
  });
  if (options.group) {  // exact figures of the whole split: every count and sum is added up over the shards
    auto read = torch::tensor(result.read, torch::kInt64);
    std::vector<torch::Tensor> sums{counted, correct1, correct5, loss_sum, read, per_class};
    if (options.confusion) sums.push_back(confusion);
    options.group->all_reduce_sum(sums);
    result.read = read.item<int64_t>();
  }
  result.count = counted.item<int64_t>();
  result.dropped = result.read - result.count;
  result.correct1 = correct1.item<int64_t>();
  result.correct5 = correct5.item<int64_t>();
  result.loss_sum = loss_sum.item<double>();
  if (options.confusion) result.confusion = confusion.narrow(0, 0, cells).view({classes, classes}).cpu();
  const auto counts = per_class.cpu();
  const auto n = counts.accessor<int64_t, 2>();
  for (int64_t c = 0; c < classes; ++c) result.classes.push_back({n[0][c], n[1][c]});
  result.seconds = seconds_since(start);
  return result;
}

}  // namespace trainer
