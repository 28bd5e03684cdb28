// An MNIST-format IDX pair (data/sources/mnist_idx.hpp), plain or gzip: the input's first two bytes give the
// length of the images file (little-endian), the rest after it is the labels file. Opened as a run opens it, then
// its first and last images read into a slot.
#include "fuzz/fuzz_support.hpp"
#include "trainer/data/sources/mnist_idx.hpp"

TRAINER_FUZZ_TARGET(idx) {
  if (size < 2) return 0;
  const size_t images_size = std::min<size_t>(size - 2, data[0] | size_t{data[1]} << 8);
  const char* bytes = reinterpret_cast<const char*>(data) + 2;
  const auto& scratch = trainer::fuzz::scratch();
  const trainer::IdxFiles files{scratch.write("images-idx3-ubyte", {bytes, images_size}),
                                scratch.write("labels-idx1-ubyte", {bytes + images_size, size - 2 - images_size})};
  trainer::fuzz::refused_cleanly([&] {
    const trainer::MnistIdx idx(files, 0);
    if (idx.size() > 0) {  // then the file holds at least one image's bytes
      const trainer::ImageShape shape = idx.shape();
      cv::Mat slot(static_cast<int>(shape.height), static_cast<int>(shape.width), CV_8UC1);  // as the loader's
      idx.read_into(0, {}, slot);
      idx.read_into(idx.size() - 1, {}, slot);
    }
  });
  return 0;
}
