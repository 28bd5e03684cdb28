#include "trainer/data/device/decode_choice.hpp"

#include "trainer/data/pixels/sample_augment.hpp"
#include "trainer/data/sources/data_kinds.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

DecodeChoice choose_decode(const Config& c, const torch::Device& device, bool nvjpeg_available) {
  const DecodeDevice asked = c.data.decode;
  const std::string key = "data.decode " + enum_name(decode_devices(), asked);
  if (asked == DecodeDevice::cpu) return {DecodeDevice::cpu, "cpu (data.decode cpu)"};
  if (!data_kind_row(c.data.kind).image_files)
    return {DecodeDevice::cpu, "cpu (data.kind " + enum_name(data_kinds(), c.data.kind) + " has no image files)"};
  if (asked == DecodeDevice::cuda) {
    if (!nvjpeg_available)
      throw ConfigError(key +
                        ": this trainer was built without nvJPEG (nvjpeg.h was not found when it was built; "
                        "Debian: nvidia-cuda-dev with the CUDA LibTorch); use auto or cpu");
    if (!device.is_cuda())
      throw ConfigError(key + ": the run is on " + device.str() +
                        ", and nvJPEG decodes on a CUDA device; use auto "
                        "or cpu");
  } else if (!nvjpeg_available || !device.is_cuda()) {
    return {DecodeDevice::cpu, std::string("cpu (data.decode auto: ") +
                                   (device.is_cuda() ? "this build has no nvJPEG)" : "the run is on the CPU)")};
  }
  if (SampleAugment(c.data.augment).pixels())
    return {DecodeDevice::cpu, "cpu (" + key +
                                   ": the AutoAugment policy or ColorJitter works on the CPU's Pillow-exact pixels, "
                                   "so the images are decoded there)"};
  return {DecodeDevice::cuda, "cuda (" + key + ": nvJPEG on " + device.str() + ")"};
}

RunDecoder open_run_decoder(const Config& c, const torch::Device& device, std::shared_ptr<spdlog::logger> log) {
  RunDecoder d{choose_decode(c, device, nvjpeg_built()), nullptr};
  if (!d.choice.gpu()) return d;
  try {
    d.decoder = make_batch_decoder(DecodeDevice::cuda, device, log);
  } catch (const TrainError& e) {
    // auto takes the GPU where it can: nvJPEG that cannot be opened (a driver too old for it, say) leaves the
    // decode to the CPU, said once; data.decode cuda asked for nvJPEG, so there it ends the run, naming the call.
    if (c.data.decode != DecodeDevice::automatic) throw;
    d.choice = {DecodeDevice::cpu, "cpu (data.decode auto: " + e.message() + ")"};
    if (log) log->warn("decode: {}", d.choice.reason);
  }
  return d;
}

}  // namespace trainer
