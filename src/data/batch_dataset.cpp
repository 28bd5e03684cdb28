#include "trainer/data/batch_dataset.hpp"

#include <cstring>

#include "trainer/util/error.hpp"

namespace trainer {

BatchDataset::BatchDataset(std::shared_ptr<const ImageSource> source, bool pin_memory)
    : source_(std::move(source)), shape_(source_->shape()), pin_memory_(pin_memory) {}

ImageBatch BatchDataset::get_batch(std::vector<size_t> indices) {
  const auto n = static_cast<int64_t>(indices.size());
  auto options = torch::TensorOptions().dtype(torch::kUInt8).pinned_memory(pin_memory_);
  ImageBatch batch{torch::empty({n, shape_.height, shape_.width, shape_.channels}, options),
                   torch::empty({n}, torch::kInt64)};
  const size_t sample_bytes = static_cast<size_t>(shape_.height * shape_.width * shape_.channels);
  auto* out = batch.images.data_ptr<uint8_t>();
  auto* labels = batch.labels.data_ptr<int64_t>();
  for (int64_t b = 0; b < n; ++b) {
    const Sample s = source_->read(indices[static_cast<size_t>(b)]);
    if (s.image.rows != shape_.height || s.image.cols != shape_.width || s.image.channels() != shape_.channels ||
        s.image.depth() != CV_8U)
      throw DataError("sample " + std::to_string(indices[static_cast<size_t>(b)]) + " has shape " +
                      std::to_string(s.image.rows) + "x" + std::to_string(s.image.cols) + "x" +
                      std::to_string(s.image.channels()) + ", expected " + std::to_string(shape_.height) + "x" +
                      std::to_string(shape_.width) + "x" + std::to_string(shape_.channels));
    uint8_t* dst = out + static_cast<size_t>(b) * sample_bytes;
    if (s.image.isContinuous()) {
      std::memcpy(dst, s.image.data, sample_bytes);
    } else {
      const size_t row_bytes = sample_bytes / static_cast<size_t>(shape_.height);
      for (int r = 0; r < s.image.rows; ++r) std::memcpy(dst + r * row_bytes, s.image.ptr(r), row_bytes);
    }
    labels[b] = s.label;
  }
  return batch;
}

std::unique_ptr<Loader> make_loader(BatchDataset dataset, EpochSampler sampler, size_t batch_size, size_t workers) {
  // enforce_ordering keeps batches in sampler order whichever worker finishes first.
  auto options = torch::data::DataLoaderOptions(batch_size).workers(workers).enforce_ordering(true);
  return std::make_unique<Loader>(std::move(dataset), std::move(sampler), std::move(options));
}

Normalization make_normalization(const std::vector<double>& mean, const std::vector<double>& std, int64_t channels,
                                 const torch::Device& device) {
  auto per_channel = [&](const std::vector<double>& v, bool invert) {
    std::vector<float> out;
    for (int64_t c = 0; c < channels; ++c) {
      const double x = v.size() == 1 ? v[0] : v[static_cast<size_t>(c)];
      out.push_back(static_cast<float>(invert ? 1.0 / (255.0 * x) : 255.0 * x));
    }
    return torch::tensor(out).view({1, channels, 1, 1}).to(device);
  };
  return {per_channel(mean, false), per_channel(std, true)};
}

torch::Tensor to_model_input(const torch::Tensor& images, const Normalization& norm, bool channels_last) {
  // permute() of NHWC is NCHW with channels_last strides, so the channels_last conversion is a plain cast.
  // The format is explicit either way: for one channel both layouts have the same bytes, and LibTorch would
  // otherwise guess from the strides which convolution path to take.
  const auto format = channels_last ? torch::MemoryFormat::ChannelsLast : torch::MemoryFormat::Contiguous;
  auto x = images.to(norm.mean.device(), /*non_blocking=*/true)
               .permute({0, 3, 1, 2})
               .to(torch::kFloat, /*non_blocking=*/false, /*copy=*/false, format);
  return (x - norm.mean) * norm.inv_std;
}

}  // namespace trainer
