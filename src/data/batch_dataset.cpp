#include "trainer/data/batch_dataset.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>

#include "trainer/util/error.hpp"
#include "trainer/util/hash.hpp"

namespace trainer {

namespace {

// Sample replacements for a bad slot: a fixed sequence per (seed, epoch, slot sample).
constexpr int kReplacementAttempts = 16;

std::string without_prefix(const std::string& what) {
  const std::string prefix = "data: ";
  return what.compare(0, prefix.size(), prefix) == 0 ? what.substr(prefix.size()) : what;
}

}  // namespace

BatchDataset::BatchDataset(std::shared_ptr<const ImageSource> source, bool pin_memory, ReadContext context,
                           std::shared_ptr<BadSamples> bad, BadSlot bad_slot)
    : source_(std::move(source)),
      shape_(source_->shape()),
      pin_memory_(pin_memory),
      context_(context),
      bad_(std::move(bad)),
      bad_slot_(bad_slot) {}

ImageBatch BatchDataset::get_batch(std::vector<size_t> indices) {
  const auto n = static_cast<int64_t>(indices.size());
  auto options = torch::TensorOptions().dtype(torch::kUInt8).pinned_memory(pin_memory_);
  ImageBatch batch{torch::empty({n, shape_.height, shape_.width, shape_.channels}, options),
                   torch::empty({n}, torch::kInt64)};
  const int h = static_cast<int>(shape_.height), w = static_cast<int>(shape_.width);
  const int type = CV_8UC(static_cast<int>(shape_.channels));
  const size_t sample_bytes = static_cast<size_t>(shape_.height * shape_.width * shape_.channels);
  auto* out = batch.images.data_ptr<uint8_t>();
  auto* labels = batch.labels.data_ptr<int64_t>();
  for (int64_t b = 0; b < n; ++b) {
    // The slot is a view of the batch tensor: sources write the final pixels there, with no copy after.
    cv::Mat slot(h, w, type, out + static_cast<size_t>(b) * sample_bytes);
    const size_t wanted = indices[static_cast<size_t>(b)];
    size_t index = wanted;
    bool dropped = false;
    for (int attempt = 1;; ++attempt) {
      try {
        source_->read_into(index, context_, slot);
        break;
      } catch (const DataError& e) {
        if (!bad_) throw;
        bad_->record(index, without_prefix(e.what()));
        if (bad_slot_ == BadSlot::drop) {
          slot.setTo(cv::Scalar::all(0));
          dropped = true;
          break;
        }
        if (attempt == kReplacementAttempts)
          throw DataError("sample " + std::to_string(wanted) + " and " + std::to_string(attempt - 1) +
                          " replacements could not be read; the last: " + without_prefix(e.what()));
        const uint64_t h64 = hash_combine(hash_combine(context_.seed ^ 0xBAD5A3B1Eull, static_cast<uint64_t>(context_.epoch)),
                                          hash_combine(wanted, static_cast<uint64_t>(attempt)));
        index = static_cast<size_t>(h64 % source_->size());
      }
    }
    if (slot.data != out + static_cast<size_t>(b) * sample_bytes)
      throw std::logic_error("image source reallocated the batch slot of sample " + std::to_string(wanted));
    labels[b] = dropped ? kDroppedLabel : source_->label(index);
  }
  return batch;
}

std::unique_ptr<Loader> make_loader(BatchDataset dataset, EpochSampler sampler, size_t batch_size, size_t workers,
                                    size_t prefetch) {
  // enforce_ordering keeps batches in sampler order whichever worker finishes first. max_jobs bounds the
  // batches in flight (queued, being prepared or ready); every worker needs one to stay busy. Without workers
  // it must stay 0: LibTorch would queue that many batches for threads that do not exist, and lose them.
  auto options = torch::data::DataLoaderOptions(batch_size)
                     .workers(workers)
                     .max_jobs(workers == 0 ? 0 : std::max(prefetch, workers))
                     .enforce_ordering(true);
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

namespace {

// One pass over a CPU batch: uint8 NHWC in, (v - mean[c]) * inv_std[c] out in the requested layout, the same
// float operations as the tensor ops below (so the same bits), but reading the bytes once and writing each
// float once instead of three passes over a 38 MiB float batch (64 x 224 x 224 x 3).
torch::Tensor normalize_on_cpu(const torch::Tensor& images, const Normalization& norm, torch::MemoryFormat format) {
  const int64_t n = images.size(0), h = images.size(1), w = images.size(2), c = images.size(3);
  auto out = torch::empty({n, c, h, w}, torch::TensorOptions().dtype(torch::kFloat).memory_format(format));
  const auto mean_t = norm.mean.to(torch::kFloat).contiguous(), inv_t = norm.inv_std.to(torch::kFloat).contiguous();
  const float* mean = mean_t.data_ptr<float>();
  const float* inv = inv_t.data_ptr<float>();
  const uint8_t* in = images.data_ptr<uint8_t>();
  float* dst = out.data_ptr<float>();
  const int64_t plane = h * w, sample = plane * c;
  const bool pixel_order = format == torch::MemoryFormat::ChannelsLast || c == 1;
  constexpr int64_t kBlock = 48;
  std::array<float, kBlock> m{}, v{};
  for (int64_t k = 0; k < kBlock; ++k) {
    m[static_cast<size_t>(k)] = mean[k % c];
    v[static_cast<size_t>(k)] = inv[k % c];
  }
  at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      const uint8_t* src = in + s * sample;
      float* o = dst + s * sample;
      if (pixel_order) {
        // Blocks of kBlock values repeat the channel pattern (kBlock is a multiple of 1, 2, 3 and 4), so the
        // fixed-length inner loop is contiguous and vectorises.
        int64_t i = 0;
        for (; i + kBlock <= sample; i += kBlock)
          for (int64_t k = 0; k < kBlock; ++k) o[i + k] = (static_cast<float>(src[i + k]) - m[k]) * v[k];
        for (; i < sample; ++i) o[i] = (static_cast<float>(src[i]) - mean[i % c]) * inv[i % c];
      } else {
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t p = 0; p < plane; ++p)
            o[ch * plane + p] = (static_cast<float>(src[p * c + ch]) - mean[ch]) * inv[ch];
      }
    }
  });
  return out;
}

}  // namespace

torch::Tensor to_model_input(const torch::Tensor& images, const Normalization& norm, bool channels_last) {
  // The format is explicit either way: for one channel both layouts have the same bytes, and LibTorch would
  // otherwise guess from the strides which convolution path to take.
  const auto format = channels_last ? torch::MemoryFormat::ChannelsLast : torch::MemoryFormat::Contiguous;
  if (norm.mean.device().is_cpu() && images.is_cpu() && images.scalar_type() == torch::kUInt8 &&
      images.dim() == 4 && images.is_contiguous())
    return normalize_on_cpu(images, norm, format);
  // permute() of NHWC is NCHW with channels_last strides, so the channels_last conversion is a plain cast.
  auto x = images.to(norm.mean.device(), /*non_blocking=*/true)
               .permute({0, 3, 1, 2})
               .to(torch::kFloat, /*non_blocking=*/false, /*copy=*/false, format);
  // In place: one float batch allocated instead of three.
  return x.sub_(norm.mean).mul_(norm.inv_std);
}

}  // namespace trainer
