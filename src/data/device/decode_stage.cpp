#include "trainer/data/device/decode_stage.hpp"

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "input_stream.hpp"
#include "trainer/data/device/device_stager.hpp"

#ifdef TRAINER_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace trainer {

struct DecodeStage::Impl {
  // A batch the stage finished, and (CUDA) the event after its copy and decode on the input stream.
  struct StagedBatch {
    ImageBatch batch;
#ifdef TRAINER_CUDA
    std::optional<at::cuda::CUDAEvent> ready;
#endif
  };

  Loader& loader;
  size_t count;
  torch::Device device;
  StageDecode decode;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<StagedBatch> made;  // finished, not yet taken
  bool stopping = false;         // the consumer is gone: make no more
  bool done = false;             // the thread has ended (all batches made, or `error`)
  std::exception_ptr error;
  std::thread thread;

  Impl(Loader& l, size_t n, const torch::Device& d, const StageDecode& s) : loader(l), count(n), device(d), decode(s) {}

  StagedBatch make(ImageBatch& host) {
    StagedBatch out;
    out.batch = device.is_cuda() ? copy_to_device(host, device) : std::move(host);
    if (!out.batch.encoded.empty()) decode.decoder->decode(out.batch, decode.bad);
#ifdef TRAINER_CUDA
    if (device.is_cuda()) {
      out.ready.emplace();
      out.ready->record(c10::cuda::getCurrentCUDAStream(device.index()));
    }
#endif
    return out;
  }

  void run() {
    try {
#ifdef TRAINER_CUDA
      std::optional<c10::cuda::CUDAGuard> on_device;
      std::optional<c10::cuda::CUDAStreamGuard> on_stream;
      if (device.is_cuda()) {
        on_device.emplace(device);
        on_stream.emplace(input_stream(device.index()));
      }
#endif
      for_each_batch(loader, count, [&](ImageBatch& host) {
        StagedBatch staged = make(host);
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait(lock, [&] { return stopping || made.size() < decode.ahead; });
        if (stopping) return false;
        made.push_back(std::move(staged));
        changed.notify_all();
        return true;
      });
    } catch (...) {
      const std::lock_guard<std::mutex> lock(mutex);
      error = std::current_exception();
    }
    const std::lock_guard<std::mutex> lock(mutex);
    done = true;
    changed.notify_all();
  }
};

DecodeStage::DecodeStage(Loader& loader, size_t count, const torch::Device& device, const StageDecode& decode)
    : impl_(std::make_unique<Impl>(
          loader, count, device.is_cuda() && device.index() < 0 ? torch::Device(torch::kCUDA, 0) : device, decode)) {
  if (impl_->decode.ahead == 0) impl_->decode.ahead = 1;
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

DecodeStage::~DecodeStage() {
  {
    const std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->changed.notify_all();
  impl_->thread.join();
}

std::optional<ImageBatch> DecodeStage::next() {
  Impl::StagedBatch staged;
  {
    std::unique_lock<std::mutex> lock(impl_->mutex);
    impl_->changed.wait(lock, [&] { return !impl_->made.empty() || impl_->done; });
    if (impl_->made.empty()) {
      if (impl_->error) std::rethrow_exception(impl_->error);
      return std::nullopt;
    }
    staged = std::move(impl_->made.front());
    impl_->made.pop_front();
  }
  impl_->changed.notify_all();
#ifdef TRAINER_CUDA
  if (staged.ready) {
    const auto current = c10::cuda::getCurrentCUDAStream(impl_->device.index());
    staged.ready->block(current);
    // Allocated on the input stream, read on this one: the allocator must wait for this stream too.
    record_batch_stream(staged.batch, current);
  }
#endif
  return std::move(staged.batch);
}

}  // namespace trainer
