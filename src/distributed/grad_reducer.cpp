#include "trainer/distributed/grad_reducer.hpp"

#include <torch/torch.h>

#include <utility>

#include "trainer/util/clock.hpp"

namespace trainer {

GradReducer::GradReducer(std::vector<torch::Tensor> parameters, Collectives& group, int64_t bucket_bytes)
    : parameters_(std::move(parameters)), group_(group) {
  bucket_of_.resize(parameters_.size());
  slot_of_.resize(parameters_.size());
  arrived_.resize(parameters_.size());
  // Reverse order; a bucket holds one dtype and closes once it passes bucket_bytes.
  Bucket current;
  int64_t bytes = 0;
  auto close = [&] {
    if (current.members.empty()) return;
    const auto& first = parameters_[current.members.front()];
    int64_t elements = 0;
    for (const size_t i : current.members) {
      current.offsets.push_back(elements);
      elements += parameters_[i].numel();
    }
    current.flat = torch::zeros({elements}, first.options().requires_grad(false));
    for (size_t slot = 0; slot < current.members.size(); ++slot) {
      bucket_of_[current.members[slot]] = buckets_.size();
      slot_of_[current.members[slot]] = slot;
    }
    buckets_.push_back(std::move(current));
    current = Bucket();
    bytes = 0;
  };
  for (size_t k = parameters_.size(); k-- > 0;) {
    const auto& p = parameters_[k];
    if (!current.members.empty() && parameters_[current.members.front()].scalar_type() != p.scalar_type()) close();
    current.members.push_back(k);
    bytes += p.numel() * static_cast<int64_t>(p.element_size());
    if (bytes >= bucket_bytes) close();
  }
  close();
  for (size_t i = 0; i < parameters_.size(); ++i)
    hooks_.push_back(parameters_[i].register_hook([this, i](const torch::Tensor& grad) { on_gradient(i, grad); }));
}

GradReducer::~GradReducer() {
  for (size_t i = 0; i < hooks_.size(); ++i) parameters_[i].remove_hook(hooks_[i]);
}

int64_t GradReducer::bytes_per_step() const {
  int64_t bytes = 0;
  for (const auto& b : buckets_) bytes += b.flat.numel() * static_cast<int64_t>(b.flat.element_size());
  return bytes;
}

void GradReducer::arm(bool communicate) {
  armed_ = communicate;
  if (!armed_) return;
  std::fill(arrived_.begin(), arrived_.end(), false);
  for (auto& b : buckets_) {
    b.ready = 0;
    b.wait = nullptr;
  }
}

// Runs inside backward, before autograd adds `grad` to .grad: the bucket takes what .grad will hold, the
// micro-batches accumulated so far plus this one.
void GradReducer::on_gradient(size_t parameter, const torch::Tensor& grad) {
  if (!armed_ || arrived_[parameter]) return;
  arrived_[parameter] = true;
  Bucket& b = buckets_[bucket_of_[parameter]];
  const size_t slot = slot_of_[parameter];
  auto view = b.flat.narrow(0, b.offsets[slot], grad.numel()).view(grad.sizes());
  const torch::Tensor& previous = parameters_[parameter].grad();
  if (previous.defined()) torch::add_out(view, previous, grad);
  else view.copy_(grad);
  if (++b.ready == b.members.size()) start(b);
}

void GradReducer::start(Bucket& b) { b.wait = group_.start_all_reduce_sum(b.flat); }

double GradReducer::take_waited_seconds() { return std::exchange(waited_seconds_, 0.0); }

void GradReducer::finish() {
  const auto began = Clock::now();
  armed_ = false;
  for (auto& b : buckets_) {
    if (b.wait) continue;
    for (size_t slot = 0; slot < b.members.size(); ++slot)
      if (!arrived_[b.members[slot]]) b.flat.narrow(0, b.offsets[slot], parameters_[b.members[slot]].numel()).zero_();
    start(b);
  }
  const double world = static_cast<double>(group_.world().size);
  for (auto& b : buckets_) {
    b.wait();
    b.wait = nullptr;
    b.flat.div_(world);
    for (size_t slot = 0; slot < b.members.size(); ++slot) {
      torch::Tensor& p = parameters_[b.members[slot]];
      const auto average = b.flat.narrow(0, b.offsets[slot], p.numel()).view(p.sizes());
      if (p.grad().defined()) p.mutable_grad().copy_(average);
      else p.mutable_grad() = average.clone();
    }
  }
  waited_seconds_ += seconds_since(began);
}

}  // namespace trainer
