// The engine under the loaders (loaders.hpp): worker threads that live as long as the pipeline take a few samples
// at a time, not whole batches, from the batches in flight, oldest first, and write them into their slots; batches
// leave in plan order. A batch of B images over W workers is ready after about B / W images per worker, and the
// plans may run across epoch edges (the plan source decides where they end), so while one epoch drains the
// workers already prepare the next one's first batches instead of idling.
//   BatchPipeline p([&]() -> std::optional<BatchPlan> { ... }, /*workers=*/8, /*in_flight=*/4);
//   while (auto batch = p.next()) use(*batch);
// Each sample is a pure function of its batch dataset and index, so any worker count gives the same bytes.
// Steady state allocates no batch: the batches handed out are remembered, and one that its consumer has let go
// (no tensor or view of it left outside the pipeline) is written again, so the same few blocks circulate instead
// of 40-150 MiB going through the heap per batch, where the allocator's luck decided speed and memory.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "trainer/data/loader/batch_dataset.hpp"

namespace trainer {

// One batch to make: the samples (entries of a sampler's order) and the dataset (source, epoch, augmentation)
// they are read from.
struct BatchPlan {
  std::shared_ptr<const BatchDataset> dataset;
  std::vector<size_t> indices;
};

// The next batch's plan, or nullopt when there are no more. Called under the pipeline's lock, so it should be
// cheap (sampler arithmetic, not I/O).
using PlanSource = std::function<std::optional<BatchPlan>()>;

class BatchPipeline {
 public:
  // `workers` threads (0: next() makes each batch on the calling thread); at most `in_flight` batches are being
  // made or wait to be taken.
  BatchPipeline(PlanSource plans, size_t workers, size_t in_flight);
  ~BatchPipeline();  // stops the workers after their current sample
  BatchPipeline(const BatchPipeline&) = delete;
  BatchPipeline& operator=(const BatchPipeline&) = delete;

  // The next batch in plan order, waiting until all its samples are in; nullopt when the plans have run out.
  // An error of one of its samples (a DataError without a bad-sample record) is rethrown here.
  std::optional<ImageBatch> next();

 private:
  struct Batch;
  void top_up();  // with the lock held
  void work();
  ImageBatch take_spare(size_t images);          // with the lock held: a handed-out batch let go, or none
  void keep_for_reuse(const ImageBatch& batch);  // with the lock held

  PlanSource plans_;
  size_t in_flight_;
  size_t worker_count_;  // fixed before any worker starts (workers_ grows while the first ones already run)
  std::mutex mutex_;
  std::condition_variable work_ready_, batch_ready_;
  std::deque<std::shared_ptr<Batch>> queue_;
  std::deque<ImageBatch> handed_out_;  // the latest batches next() returned (images and labels only)
  size_t largest_batch_ = 0;           // the most samples of any plan so far: the room of a new block
  bool plans_done_ = false;
  std::exception_ptr plan_error_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace trainer
