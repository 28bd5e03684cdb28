#include <torch/torch.h>

#include "trainer/cli/commands.hpp"
#include "trainer/data/device/batch_decoder.hpp"
#include "trainer/util/device.hpp"

namespace trainer {

std::string version_text() {
  std::string text = std::string("trainer ") + TRAINER_VERSION + "\n" + describe_runtime() + "\n" + "JPEG decode: CPU" +
                     (nvjpeg_built() ? " and nvJPEG (data.decode cuda)" : "") + "\n";
  for (int64_t i = 0; i < static_cast<int64_t>(torch::cuda::device_count()); ++i)
    text += "  cuda:" + std::to_string(i) + "\n";
  return text;
}

}  // namespace trainer
