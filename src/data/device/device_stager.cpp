#include "trainer/data/device/device_stager.hpp"

#include <torch/torch.h>

#ifdef TRAINER_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace trainer {

#ifdef TRAINER_CUDA
struct DeviceStager::Side {
  explicit Side(c10::DeviceIndex index) : stream(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, index)) {}
  c10::cuda::CUDAStream stream;
  at::cuda::CUDAEvent copied;
};
#else
struct DeviceStager::Side {};
#endif

DeviceStager::DeviceStager(const torch::Device& device, BatchDecoder* decoder) : device_(device), decoder_(decoder) {
#ifdef TRAINER_CUDA
  if (device.is_cuda()) side_ = std::make_unique<Side>(device.index() < 0 ? c10::DeviceIndex(0) : device.index());
#endif
}

DeviceStager::~DeviceStager() = default;

ImageBatch DeviceStager::stage(ImageBatch& host) {
  const bool deferred = !host.encoded.empty();
  if (deferred && !decoder_) throw std::logic_error("a batch left JPEGs encoded, but the run has no batch decoder");
  // On the CPU the batch is its own device batch: the decoder writes its deferred slots in place.
  if (!device_.is_cuda()) {
    if (deferred) decoder_->decode(host);
    return host;
  }
  auto finish = [&](ImageBatch out) {
    if (deferred) {
      out.encoded = std::move(host.encoded);
      out.bad = host.bad;
      out.drop_bad = host.drop_bad;
      decoder_->decode(out);
    }
    return out;
  };
#ifdef TRAINER_CUDA
  if (side_) {
    const c10::cuda::CUDAStreamGuard guard(side_->stream);
    ImageBatch out = finish(
        {host.images.to(device_, /*non_blocking=*/true), host.labels.to(device_, /*non_blocking=*/true), host.erase});
    side_->copied.record(side_->stream);
    return out;
  }
#endif
  return finish({host.images.to(device_), host.labels.to(device_), host.erase});
}

void DeviceStager::ready(ImageBatch& batch) {
#ifdef TRAINER_CUDA
  if (side_) {
    const auto current = c10::cuda::getCurrentCUDAStream(side_->stream.device_index());
    side_->copied.block(current);
    // Allocated on the side stream, read on this one: the allocator must wait for this stream too.
    batch.images.record_stream(current);
    batch.labels.record_stream(current);
  }
#else
  (void)batch;
#endif
}

}  // namespace trainer
