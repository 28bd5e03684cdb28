// An image file as a loader worker reads it (data/sources/folder_source.hpp): read, probe, plan, decode (the
// JPEG region decode, or OpenCV's whole decode for other files and formats), render into the batch slot. The
// input's length picks the transform (train or eval) and the channels (3 or 1), so both paths are reached.
// Headers over 4 megapixels are skipped, as libjpeg-turbo's own fuzzers skip large images: a damaged file that
// size decodes for seconds, and the lane looks for crashes, not for slow decodes.
#include "fuzz/fuzz_support.hpp"
#include "trainer/data/pixels/image_decode.hpp"
#include "trainer/data/sources/folder_source.hpp"

TRAINER_FUZZ_TARGET(image_decode) {
  const std::vector<uint8_t> bytes(data, data + size);
  const trainer::ImageInfo info = trainer::probe_image(bytes);
  if (info.height * info.width > (int64_t{4} << 20)) return 0;
  const auto& scratch = trainer::fuzz::scratch();
  scratch.write("image", {reinterpret_cast<const char*>(data), size});
  trainer::FileList files;
  files.add("image", 0);
  trainer::TransformSpec spec;
  spec.train = size % 2 == 0;
  spec.size = 32;
  spec.resize = 36;
  const int channels = size % 4 < 2 ? 3 : 1;
  const trainer::FolderSource source(scratch.path(), files, {"class"}, spec, channels);
  // The batch slot, allocated as the loader allocates it (BatchDataset) before a worker renders into it.
  cv::Mat slot(static_cast<int>(spec.size), static_cast<int>(spec.size), channels == 3 ? CV_8UC3 : CV_8UC1);
  trainer::fuzz::refused_cleanly([&] { source.read_into(0, {}, slot); });
  return 0;
}
