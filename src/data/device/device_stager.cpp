#include "trainer/data/device/device_stager.hpp"

#include <torch/torch.h>

#include "input_stream.hpp"

#ifdef TRAINER_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace trainer {

#ifdef TRAINER_CUDA
struct DeviceStager::Side {
  explicit Side(c10::DeviceIndex index) : stream(input_stream(index)) {}
  c10::cuda::CUDAStream stream;
  at::cuda::CUDAEvent copied;
};
#else
struct DeviceStager::Side {};
#endif

ImageBatch copy_to_device(ImageBatch& host, const torch::Device& device) {
  // The erase boxes travel with the images (pinned like them), so that erasing on the device never waits for a
  // copy of its own.
  const auto erase = host.erase.defined() ? host.erase.to(device, /*non_blocking=*/true) : host.erase;
  return {host.images.to(device, /*non_blocking=*/true), host.labels.to(device, /*non_blocking=*/true), erase,
          std::move(host.encoded)};
}

void record_batch_stream(ImageBatch& batch, const c10::Stream& stream) {
  batch.images.record_stream(stream);
  batch.labels.record_stream(stream);
  if (batch.erase.defined() && !batch.erase.is_cpu()) batch.erase.record_stream(stream);
}

DeviceStager::DeviceStager(const torch::Device& device) : device_(device) {
#ifdef TRAINER_CUDA
  if (device.is_cuda()) side_ = std::make_unique<Side>(device.index() < 0 ? c10::DeviceIndex(0) : device.index());
#endif
}

DeviceStager::~DeviceStager() = default;

ImageBatch DeviceStager::stage(ImageBatch& host) {
  if (!host.encoded.empty()) throw std::logic_error("a batch left JPEGs encoded, but the run has no decode stage");
  if (!device_.is_cuda()) return host;
#ifdef TRAINER_CUDA
  if (side_) {
    const c10::cuda::CUDAStreamGuard guard(side_->stream);
    ImageBatch out = copy_to_device(host, device_);
    side_->copied.record(side_->stream);
    return out;
  }
#endif
  return {host.images.to(device_), host.labels.to(device_),
          host.erase.defined() ? host.erase.to(device_) : host.erase};
}

void DeviceStager::ready(ImageBatch& batch) {
#ifdef TRAINER_CUDA
  if (side_) {
    const auto current = c10::cuda::getCurrentCUDAStream(side_->stream.device_index());
    side_->copied.block(current);
    // Allocated on the input stream, read on this one: the allocator must wait for this stream too.
    record_batch_stream(batch, current);
  }
#else
  (void)batch;
#endif
}

}  // namespace trainer
