// One dataset format = one ImageSource. A source knows how many samples it has, their labels (cheaply, no
// decode) and how to produce one as uint8 HxWxC, augmented for a given epoch. read_into() is called from
// several loader threads at once and writes straight into a slot of the batch tensor.
//   auto src = make_source(config, Split::train);
//   Sample s = src->read(0, {seed, /*epoch=*/3});  // s.image: CV_8UC1 or CV_8UC3, src->shape()
#pragma once

#include <opencv2/core.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/data/pixels/image_shape.hpp"
#include "trainer/util/hash.hpp"

namespace trainer {

struct EncodedImage;  // data/pixels/encoded_image.hpp: only the sources that defer files need its definition
struct SampleTimes;   // data/pixels/sample_pixels.hpp

struct Sample {
  cv::Mat image;  // uint8, HxWxC (C = 1 or 3)
  int64_t label = 0;
};

// Where a sample's randomness comes from: augmentation is a pure function of (seed, epoch, sample index), so
// batches do not depend on the worker count and a resumed run sees what an uninterrupted one would.
struct ReadContext {
  uint64_t seed = 0;
  int64_t epoch = 0;
  int64_t copy = 0;              // repeated augmentation: which copy of the image in this epoch (0 for the first)
  SampleTimes* times = nullptr;  // `trainer bench data`: where this sample's time goes (sources that decode files)
};

// The seed of sample i's augmentation draws.
inline uint64_t sample_seed(const ReadContext& context, size_t i) {
  const uint64_t seed = hash_combine(hash_combine(context.seed, static_cast<uint64_t>(context.epoch)), i);
  return context.copy == 0 ? seed : hash_combine(seed, static_cast<uint64_t>(context.copy));
}

class ImageSource {
 public:
  virtual ~ImageSource() = default;
  virtual size_t size() const = 0;
  virtual int64_t label(size_t i) const = 0;
  // Thread-safe. Writes sample i into `out`, which already has shape() and type CV_8UC(channels) (a view of
  // the batch tensor: it must not be reallocated). Throws DataError naming the file when it cannot be read.
  virtual void read_into(size_t i, const ReadContext& context, cv::Mat& out) const = 0;
  // Device decode: as read_into, except that a file the GPU decodes (gpu_decodable) is left encoded in
  // `deferred` (bytes, header and plan) and true is returned; `out` is then untouched. Sources without image
  // files always write `out`.
  virtual bool read_or_defer(size_t i, const ReadContext& context, cv::Mat& out, EncodedImage& deferred) const {
    read_into(i, context, out);
    return false;
  }
  // The encoded image file of sample i as stored (a folder's file, a shard's member), for the read and decode rates
  // of `bench data --decode-only` and doctor; false for sources without image files.
  virtual bool read_encoded(size_t /*i*/, std::vector<uint8_t>& /*bytes*/) const { return false; }
  // A hint from the loader as it plans a batch: these samples are read soon, about in this order. Sources whose
  // reads wait on a network start fetching them (ShardSource over http); the others ignore it. Thread-safe and cheap.
  virtual void prefetch(const std::vector<size_t>& /*indices*/) const {}
  virtual const std::vector<std::string>& class_names() const = 0;
  // The shape every sample has after loading (the batch shape without the batch dimension).
  virtual ImageShape shape() const = 0;
  // For logs: "MNIST IDX /data/train-images-idx3-ubyte.gz (60000 images)".
  virtual std::string describe() const = 0;
  // Which sample i is, for per-image reports: the file path of an image folder, "images-file#index" for IDX.
  virtual std::string sample_name(size_t i) const { return "#" + std::to_string(i); }
  // What the source did on its own since the last call, for a line in the log at the end of an epoch ("2 more
  // shard(s) copied into the cache ..."); empty when nothing happened. Thread-safe.
  virtual std::string take_news() const { return {}; }

  // One sample in its own buffer (tests and tools; the loader uses read_into).
  Sample read(size_t i, const ReadContext& context = {}) const {
    const ImageShape s = shape();
    Sample sample{cv::Mat(static_cast<int>(s.height), static_cast<int>(s.width), CV_8UC(static_cast<int>(s.channels))),
                  label(i)};
    read_into(i, context, sample.image);
    return sample;
  }
};

}  // namespace trainer
