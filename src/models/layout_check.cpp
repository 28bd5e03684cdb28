#include "trainer/models/layout_check.hpp"

#include <ATen/Context.h>
#include <torch/torch.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <tuple>

#include "trainer/models/factory.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/torch_compat.hpp"

namespace trainer {

namespace {

// Sets oneDNN on or off while it lives; the previous setting comes back after.
class MkldnnSetting {
 public:
  explicit MkldnnSetting(bool on) : previous_(at::globalContext().userEnabledMkldnn()) {
    at::globalContext().setUserEnabledMkldnn(on);
  }
  ~MkldnnSetting() { at::globalContext().setUserEnabledMkldnn(previous_); }
  MkldnnSetting(const MkldnnSetting&) = delete;
  MkldnnSetting& operator=(const MkldnnSetting&) = delete;

 private:
  bool previous_;
};

// Building a model draws its initial weights from LibTorch's default generator: the run's stream is put back.
class KeepCpuGenerator {
 public:
  KeepCpuGenerator() : state_(compat::cpu_rng_state()) {}
  ~KeepCpuGenerator() { compat::set_cpu_rng_state(state_); }
  KeepCpuGenerator(const KeepCpuGenerator&) = delete;
  KeepCpuGenerator& operator=(const KeepCpuGenerator&) = delete;

 private:
  torch::Tensor state_;
};

// The probe's state: one set of weights and one input, and their float64 contiguous output on the CPU (float64
// convolutions never take the oneDNN path, so the reference does not share the kernels under test).
struct ProbeState {
  ModelConfig config;
  ImageShape input;
  torch::Device device{torch::kCPU};
  std::unordered_map<std::string, torch::Tensor> weights;
  torch::Tensor x;
  torch::Tensor reference;
};

std::shared_ptr<ProbeState> make_probe_state(const ModelConfig& model, const ImageShape& input,
                                             const torch::Device& device) {
  auto state = std::make_shared<ProbeState>();
  state->config = model;
  state->input = input;
  state->device = device;
  torch::NoGradGuard no_grad;
  KeepCpuGenerator keep;
  torch::manual_seed(0);  // fresh weights and a fixed input
  ClassifierPtr reference = build_model(model, input);
  state->x = torch::randn({2, input.channels, input.height, input.width});
  for (const auto& item : reference->named_parameters()) state->weights[item.key()] = item.value().detach().clone();
  for (const auto& item : reference->named_buffers()) state->weights[item.key()] = item.value().detach().clone();
  // Floating-point tensors only, as PyTorch's Module.double() (LibTorch's to(dtype) would also turn an index
  // buffer, Swin's relative_position_index, into doubles).
  for (auto& t : reference->parameters()) t.set_data(t.to(torch::kDouble));
  for (auto& t : reference->buffers())
    if (t.is_floating_point()) t.set_data(t.to(torch::kDouble));
  reference->eval();
  state->reference = reference->forward(state->x.to(torch::kDouble));
  return state;
}

double probe_error(const ProbeState& state, bool channels_last, bool mkldnn) {
  torch::NoGradGuard no_grad;
  KeepCpuGenerator keep;
  ClassifierPtr model = build_model(state.config, state.input);
  {
    auto params = model->named_parameters();
    auto buffers = model->named_buffers();
    for (const auto& [name, value] : state.weights) {
      torch::Tensor* target = params.find(name);
      if (!target) target = buffers.find(name);
      if (target) target->copy_(value);
    }
  }
  model->eval();
  place_model(*model, state.device, channels_last);
  // TF32 would round float32 products to 10-bit mantissas: probe the float32 kernels themselves.
  auto& context = at::globalContext();
  const bool tf32_conv = context.allowTF32CuDNN();
  // The string setter is the one every LibTorch has (2.11 has no enum overload).
  const auto precision = context.float32MatmulPrecision();
  const char* matmul_precision = precision == at::Float32MatmulPrecision::HIGHEST ? "highest"
                                 : precision == at::Float32MatmulPrecision::HIGH  ? "high"
                                                                                  : "medium";
  context.setAllowTF32CuDNN(false);
  context.setFloat32MatmulPrecision("highest");
  torch::Tensor out;
  {
    MkldnnSetting setting(mkldnn);
    const auto format = channels_last ? torch::MemoryFormat::ChannelsLast : torch::MemoryFormat::Contiguous;
    out = model->forward(state.x.to(state.device).contiguous(format)).to(torch::kCPU, torch::kDouble);
  }
  context.setAllowTF32CuDNN(tf32_conv);
  context.setFloat32MatmulPrecision(matmul_precision);
  const double scale = state.reference.abs().max().item<double>();
  const double error = (out - state.reference).abs().max().item<double>() / std::max(scale, 1e-30);
  return std::isfinite(error) ? error : 1e30;
}

}  // namespace

std::string describe_error(double error) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2g", error);
  return text;
}

bool wants_channels_last(const ModelConfig& model, const torch::Device& device) {
  switch (model.channels_last) {
    case Switch::on: return true;
    case Switch::off: return false;
    case Switch::automatic: return device.is_cuda() && model_row(model.arch).channels_last_on_cuda;
  }
  return false;
}

KernelLayout choose_layout(bool channels_last, const LayoutProbe& probe, const std::string& subject) {
  KernelLayout layout;
  layout.channels_last = channels_last;
  if (!channels_last) return layout;  // the contiguous oneDNN path is LibTorch's most used one: not probed
  layout.checked = true;
  const double requested = probe(true, true);
  layout.error = requested;
  if (requested <= kLayoutTolerance) return layout;
  const std::string why = "channels_last convolutions on this LibTorch (" + compat::torch_version() +
                          ") are wrong for " + subject + ": relative error " + describe_error(requested) +
                          " against a float64 reference (tolerance " + describe_error(kLayoutTolerance) + ")";
  const double contiguous = probe(false, true);
  if (contiguous <= kLayoutTolerance) {
    layout.channels_last = false;
    layout.error = contiguous;
    layout.warning = why + "; running in the contiguous layout instead (error " + describe_error(contiguous) + ")";
    return layout;
  }
  const double without_onednn = probe(true, false);
  if (without_onednn <= kLayoutTolerance) {
    layout.mkldnn = false;
    layout.error = without_onednn;
    layout.warning = why + ", and contiguous ones too (error " + describe_error(contiguous) +
                     "); running with oneDNN switched off (error " + describe_error(without_onednn) + "), slower";
    return layout;
  }
  throw TrainError(why + "; contiguous (error " + describe_error(contiguous) + ") and oneDNN off (error " +
                   describe_error(without_onednn) + ") are wrong too: this LibTorch cannot run " + subject);
}

LayoutProbe model_layout_probe(const ModelConfig& model, const ImageShape& input, const torch::Device& device) {
  std::shared_ptr<ProbeState> state;  // built on the first call: a contiguous request never pays for it
  return [=](bool channels_last, bool mkldnn) mutable {
    if (!state) state = make_probe_state(model, input, device);
    return probe_error(*state, channels_last, mkldnn);
  };
}

KernelLayout resolve_layout(const ModelConfig& model, const ImageShape& input, const torch::Device& device) {
  const bool requested = wants_channels_last(model, device);
  // Cached per process: evaluation, the EMA copy and every test in one binary ask again for the same model.
  // The only process-wide state here, on purpose: the kernels under test are process-wide too.
  using Key = std::tuple<std::string, int, int64_t, int64_t, int64_t, int64_t, int64_t, std::string, bool>;
  static std::mutex mutex;
  static std::map<Key, KernelLayout> cache;
  const Key key{model.arch,        static_cast<int>(model.stem),
                model.in_channels, model.num_classes,
                input.height,      input.width,
                input.channels,    device.str(),
                requested};
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it == cache.end()) {
    const std::string subject =
        model.arch + " at " + std::to_string(input.height) + "x" + std::to_string(input.width) + " on " + device.str();
    it = cache.emplace(key, choose_layout(requested, model_layout_probe(model, input, device), subject)).first;
  }
  if (!it->second.mkldnn) at::globalContext().setUserEnabledMkldnn(false);
  return it->second;
}

KernelLayout place_in_checked_layout(Classifier& model, const ModelConfig& config, const ImageShape& input,
                                     const torch::Device& device, const std::function<void(const std::string&)>& warn) {
  KernelLayout layout = resolve_layout(config, input, device);
  if (!layout.warning.empty()) warn("model.channels_last: " + layout.warning);
  place_model(model, device, layout.channels_last);
  return layout;
}

}  // namespace trainer
