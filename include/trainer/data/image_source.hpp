// One dataset format = one ImageSource. A source knows how many samples it has, their labels (cheaply, no
// decode) and how to read one as uint8 HxWxC. read() is called from several loader threads at once.
//   auto src = make_source(config.data, Split::train, config.model.num_classes);
//   Sample s = src->read(0);  // s.image: CV_8UC1 or CV_8UC3
#pragma once

#include <opencv2/core.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/data/image_shape.hpp"

namespace trainer {

struct Sample {
  cv::Mat image;  // uint8, HxWxC (C = 1 or 3); may share memory with the source: treat as read-only
  int64_t label = 0;
};

class ImageSource {
 public:
  virtual ~ImageSource() = default;
  virtual size_t size() const = 0;
  virtual int64_t label(size_t i) const = 0;
  // Thread-safe; throws DataError naming the file when a sample cannot be read.
  virtual Sample read(size_t i) const = 0;
  virtual const std::vector<std::string>& class_names() const = 0;
  // The shape every sample has after loading (the batch shape without the batch dimension).
  virtual ImageShape shape() const = 0;
  // For logs: "MNIST IDX /data/train-images-idx3-ubyte.gz (60000 images)".
  virtual std::string describe() const = 0;
};

}  // namespace trainer
