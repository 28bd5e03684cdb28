// The GPU decode as a pipeline stage of its own, as DALI's mixed stage is: a thread takes the loader's batches,
// copies each to the device and has the run's decoder decode and render its deferred JPEGs there, on the input
// stream, up to `ahead` batches before the training thread needs them. The training thread never calls the
// decoder: it takes a finished batch and makes its own stream wait on that batch's event. On the CPU (the tests'
// reference decoder) the same thread decodes. Each sample stays a pure function of (seed, epoch, index): the stage
// changes when a batch is made, never what it holds, so a resumed run decodes the same pixels.
//   DecodeStage stage(*loader, count, device, {decoder, {bad, BadSlot::replace}});
//   while (auto batch = stage.next()) { ... }   // an error of the stage is thrown here, after its earlier batches
#pragma once

#include <memory>
#include <optional>

#include "trainer/data/device/batch_decoder.hpp"
#include "trainer/data/loader/loaders.hpp"

namespace trainer {

struct StageDecode {
  BatchDecoder* decoder = nullptr;  // null: nothing is left encoded, no stage
  BadSlots bad;                     // the loop's bad-sample record and slot rule
  size_t ahead = 2;                 // batches decoded ahead of the consumer
};

class DecodeStage {
 public:
  // Starts the thread over the next `count` batches of `loader` (which must outlive the stage).
  DecodeStage(Loader& loader, size_t count, const torch::Device& device, const StageDecode& decode);
  // Stops the thread (batches made ahead are dropped) and waits for it.
  ~DecodeStage();
  DecodeStage(const DecodeStage&) = delete;
  DecodeStage& operator=(const DecodeStage&) = delete;

  // The next batch on the device, decoded and safe to read on the calling thread's current stream; nullopt after
  // the last. Rethrows the stage's error (the loader's DataError, a decoder's failure) once the batches made
  // before it have been taken.
  std::optional<ImageBatch> next();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainer
