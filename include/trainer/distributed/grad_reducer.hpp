// Gradient averaging across the ranks of a data-parallel run, as PyTorch's DistributedDataParallel does it: the
// parameters are grouped into buckets of about `bucket_bytes` in reverse order (backward produces gradients
// roughly from the last layer to the first), and each bucket's all-reduce starts as soon as backward has
// produced the last gradient it holds, so communication overlaps the rest of backward.
//   GradReducer reducer(model.parameters(), group, 25 << 20);
//   reducer.arm(last_micro_batch);   loss.backward();   // earlier micro-batches accumulate locally, untouched
//   if (last_micro_batch) reducer.finish();             // waits; .grad now holds the average over the ranks
#pragma once

#include <torch/types.h>

#include <functional>
#include <vector>

#include "trainer/distributed/collectives.hpp"

namespace trainer {

class GradReducer {
 public:
  GradReducer(std::vector<torch::Tensor> parameters, Collectives& group, int64_t bucket_bytes);
  ~GradReducer();
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  // Whether the next backward pass communicates: true for an optimizer step's last micro-batch.
  void arm(bool communicate);
  // After the armed backward: starts the buckets that backward did not complete (parameters without a
  // gradient count as zeros), waits for all of them and writes the sums divided by the world size into .grad.
  void finish();

  int64_t buckets() const { return static_cast<int64_t>(buckets_.size()); }
  int64_t bytes_per_step() const;  // bytes all-reduced per optimizer step
  // Seconds spent in finish() since the last call: the communication backward did not hide, which a step waits
  // for. Meaningful where collectives block the host (Gloo); NCCL's finish() only queues the GPU's wait.
  double take_waited_seconds();

 private:
  struct Bucket {
    std::vector<size_t> members;   // indices into parameters_
    std::vector<int64_t> offsets;  // each member's first element in `flat`
    torch::Tensor flat;
    size_t ready = 0;            // members whose gradient has arrived since arm()
    std::function<void()> wait;  // set once the all-reduce is started
  };

  void on_gradient(size_t parameter, const torch::Tensor& grad);
  void start(Bucket& bucket);

  std::vector<torch::Tensor> parameters_;
  Collectives& group_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;  // parameter index -> bucket index
  std::vector<size_t> slot_of_;    // parameter index -> its place among the bucket's members
  std::vector<bool> arrived_;      // per parameter, since arm()
  std::vector<unsigned> hooks_;
  bool armed_ = false;
  double waited_seconds_ = 0.0;
};

}  // namespace trainer
