// The host-to-GPU copy of the next batch, overlapped with the current step (as timm's prefetcher and NVIDIA's
// loaders do): the pinned batch is copied with non_blocking on a side stream, the step's stream waits on that
// copy's event only when it uses the batch, and record_stream keeps the caching allocator from reusing the
// memory while the step still reads it. On the CPU a batch passes through unchanged. With a batch decoder
// (data.decode cuda), the JPEGs the workers left encoded are decoded into the copied batch on the same side
// stream, so decoding the next batch overlaps the current step as the copy does.
//   for_each_device_batch(*loader, device, [&](ImageBatch& b) { /* b on the device */ return true; });
//   for_each_device_batch(*loader, device, decoder, count, f);
#pragma once

#include <limits>
#include <memory>
#include <optional>

#include "trainer/data/device/batch_decoder.hpp"
#include "trainer/data/loader/batch_dataset.hpp"
#include "trainer/data/loader/loaders.hpp"

namespace trainer {

class DeviceStager {
 public:
  // `decoder` (may be null: nothing is left encoded) finishes batches with deferred JPEGs.
  explicit DeviceStager(const torch::Device& device, BatchDecoder* decoder = nullptr);
  ~DeviceStager();
  DeviceStager(const DeviceStager&) = delete;
  DeviceStager& operator=(const DeviceStager&) = delete;

  // Starts copying `host` to the device (and decoding what it left encoded, which moves out of it) and returns
  // the device batch, not yet safe to read.
  ImageBatch stage(ImageBatch& host);
  // Makes the current stream wait for the last staged copy; `batch` (from stage()) is then safe to read there.
  void ready(ImageBatch& batch);

 private:
  struct Side;  // the side stream and its event (CUDA builds)
  torch::Device device_;
  BatchDecoder* decoder_;
  std::unique_ptr<Side> side_;
};

// for_each_batch with each batch already on `device`, for at most `count` batches. On CUDA batch N+1's copy runs
// while f(batch N) runs, so the loader is one batch ahead of f, never past `count`; f returning false stops as
// before (the batch read ahead is dropped).
template <class F>
void for_each_device_batch(Loader& loader, const torch::Device& device, BatchDecoder* decoder, size_t count, F&& f) {
  if (!device.is_cuda()) {
    // The CPU: batches in place; deferred JPEGs (only with the CPU reference decoder, in tests) decoded here.
    return for_each_batch(loader, count, [&](ImageBatch& b) {
      if (!b.encoded.empty()) DeviceStager(device, decoder).stage(b);
      return f(b);
    });
  }
  DeviceStager stager(device, decoder);
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
  for_each_device_batch(loader, device, nullptr, count, f);
}
template <class F>
void for_each_device_batch(Loader& loader, const torch::Device& device, BatchDecoder* decoder, F&& f) {
  for_each_device_batch(loader, device, decoder, std::numeric_limits<size_t>::max(), f);
}
template <class F>
void for_each_device_batch(Loader& loader, const torch::Device& device, F&& f) {
  for_each_device_batch(loader, device, nullptr, std::numeric_limits<size_t>::max(), f);
}

}  // namespace trainer
