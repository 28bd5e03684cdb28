// The header probe (JPEG SOF, PNG IHDR) and the crop planner after it (data/pixels/image_decode.hpp,
// transform.hpp), for the train and the eval transform: the region a render reads must lie inside the image
// decoded at the planned reduction, whatever size the header claims.
#include "fuzz/fuzz_support.hpp"
#include "trainer/data/pixels/image_decode.hpp"
#include "trainer/data/pixels/jpeg_region_decoder.hpp"
#include "trainer/data/pixels/transform.hpp"

#include <cstdlib>

TRAINER_FUZZ_TARGET(image_probe) {
  const std::vector<uint8_t> bytes(data, data + size);
  const trainer::ImageInfo info = trainer::probe_image(bytes);
  if (info.height <= 0 || info.width <= 0) return 0;
  for (const bool train : {true, false}) {
    trainer::TransformSpec spec;
    spec.train = train;
    const trainer::SamplePlan plan = trainer::plan_sample(spec, info.height, info.width, size);
    const int reduction = info.format == trainer::ImageFormat::jpeg ? trainer::decode_reduction(plan, spec) : 1;
    const int64_t full_h = trainer::reduced_size(info.height, reduction);
    const int64_t full_w = trainer::reduced_size(info.width, reduction);
    const trainer::PixelRegion r = trainer::read_region(full_h, full_w, info.height, info.width, plan, spec);
    if (r.left < 0 || r.top < 0 || r.width <= 0 || r.height <= 0 || r.left + r.width > full_w ||
        r.top + r.height > full_h)
      std::abort();  // a planned region outside the image: the decoder would refuse a sample the file can give
  }
  return 0;
}
