// The host-to-GPU copy of the next batch, overlapped with the current step (as timm's prefetcher and NVIDIA's
// loaders do): the pinned batch is copied with non_blocking on the input stream (input_stream.hpp), the step's
// stream waits on that copy's event only when it uses the batch, and record_stream keeps the caching allocator
// from reusing the memory while the step still reads it. On the CPU a batch passes through unchanged. A batch
// whose JPEGs were left encoded (data.decode cuda) goes through the decode stage instead (decode_stage.hpp),
// which copies and decodes on a thread of its own.
//   for_each_device_batch(*loader, device, [&](ImageBatch& b) { /* b on the device */ return true; });
//   for_each_device_batch(*loader, device, {decoder, bad}, count, f);
#pragma once

#include <limits>
#include <memory>
#include <optional>

#include "trainer/data/device/decode_stage.hpp"
#include "trainer/data/loader/batch_dataset.hpp"
#include "trainer/data/loader/loaders.hpp"

namespace trainer {

// `host`'s images, labels and erase boxes copied to `device` with non_blocking (from pinned memory, on the current
// stream), its encoded files moved along: what the stager and the decode stage both start a batch with.
ImageBatch copy_to_device(ImageBatch& host, const torch::Device& device);

// A batch copied on one stream and read on `stream`: the caching allocator must wait for `stream` too before it
// reuses the batch's device memory.
void record_batch_stream(ImageBatch& batch, const c10::Stream& stream);

class DeviceStager {
 public:
  explicit DeviceStager(const torch::Device& device);
  ~DeviceStager();
  DeviceStager(const DeviceStager&) = delete;
  DeviceStager& operator=(const DeviceStager&) = delete;

  // Starts copying `host` to the device and returns the device batch, not yet safe to read.
  ImageBatch stage(ImageBatch& host);
  // Makes the current stream wait for the last staged copy; `batch` (from stage()) is then safe to read there.
  void ready(ImageBatch& batch);

 private:
  struct Side;  // the input stream and its event (CUDA builds)
  torch::Device device_;
  std::unique_ptr<Side> side_;
};

// for_each_batch with each batch already on `device`, for at most `count` batches. On CUDA batch N+1's copy runs
// while f(batch N) runs, so the loader is one batch ahead of f, never past `count`; f returning false stops as
// before (the batch read ahead is dropped). With a decoder (`decode.decoder`, data.decode cuda) the decode stage
// copies and decodes a few batches ahead on its own thread, on any device.
template <class F>
void for_each_device_batch(Loader& loader, const torch::Device& device, const StageDecode& decode, size_t count,
                           F&& f) {
  if (decode.decoder) {
    DecodeStage stage(loader, count, device, decode);
    while (auto batch = stage.next())
      if (!f(*batch)) break;
    return;
  }
  if (!device.is_cuda()) return for_each_batch(loader, count, f);
  DeviceStager stager(device);
  std::optional<ImageBatch> current;
  bool go_on = true;
  for_each_batch(loader, count, [&](ImageBatch& host) {
    ImageBatch next = stager.stage(host);
    if (current) go_on = f(*current);
    current = std::move(next);
    stager.ready(*current);
    return go_on;
  });
  if (current && go_on) f(*current);
}
template <class F>
void for_each_device_batch(Loader& loader, const torch::Device& device, size_t count, F&& f) {
  for_each_device_batch(loader, device, StageDecode{}, count, f);
}
template <class F>
void for_each_device_batch(Loader& loader, const torch::Device& device, const StageDecode& decode, F&& f) {
  for_each_device_batch(loader, device, decode, std::numeric_limits<size_t>::max(), f);
}
template <class F>
void for_each_device_batch(Loader& loader, const torch::Device& device, F&& f) {
  for_each_device_batch(loader, device, StageDecode{}, std::numeric_limits<size_t>::max(), f);
}

}  // namespace trainer
