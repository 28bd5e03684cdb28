#include "trainer/cli/doctor_checks.hpp"

#include <torch/torch.h>

#include "trainer/models/layout_check.hpp"
#include "trainer/util/device.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

// The channels_last self-check (models/layout_check.hpp) for the config's model at its image size on its device,
// or, without a config, for a ResNet-18 with the small stem at 32x32 on the CPU: its last stage's 1x1 stride-2
// convolution (256 -> 512 channels on 8x8 maps) is the shape seen computed wrongly by one LibTorch build.
void check_layout(Report& report, DoctorContext& context) {
  const Config* config = context.config ? &*context.config : nullptr;
  const std::optional<ImageShape>& shape = context.train_shape;
  ModelConfig model;
  ImageShape input{32, 32, 3};
  torch::Device device = torch::kCPU;
  if (config) {
    model = config->model;
    if (model.num_classes == 0) model.num_classes = 10;  // resolved from the data at run time; any count probes alike
    input = shape.value_or(
        ImageShape{config->data.augment.image_size, config->data.augment.image_size, config->model.in_channels});
    try {
      device = select_device(config->run.device);
    } catch (const Error&) {
      return;  // reported by the config and cuda lines
    }
  } else {
    model.arch = "resnet18";
    model.stem = StemKind::small;
    model.in_channels = 3;
    model.num_classes = 10;
  }
  const std::string subject =
      model.arch + " at " + std::to_string(input.height) + "x" + std::to_string(input.width) + " on " + device.str();
  try {
    const KernelLayout layout = choose_layout(true, model_layout_probe(model, input, device), subject);
    if (layout.warning.empty())
      report.add(Verdict::ok, "layout",
                 "channels_last kernels match a float64 reference for " + subject + " (relative error " +
                     describe_error(layout.error) + ")");
    else
      report.add(Verdict::warning, "layout", layout.warning,
                 "runs asking for channels_last fall back by themselves; model.channels_last false avoids the check");
  } catch (const Error& e) {
    report.add(Verdict::failed, "layout", e.message(), "use another LibTorch build");
  } catch (const std::exception& e) {
    report.add(Verdict::failed, "layout",
               subject + ": " + std::string(e.what()).substr(0, std::string(e.what()).find('\n')));
  }
}

}  // namespace trainer
