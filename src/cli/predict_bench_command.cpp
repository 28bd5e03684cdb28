// `trainer bench predict`: the latency of a trained model's forward pass on a fixed batch, from its checkpoint or
// from an exported ONNX (OpenCV DNN) or TorchScript file, so deployment choices are compared on the same input.
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <cstdio>

#include "trainer/cli/bench_support.hpp"
#include "trainer/cli/commands.hpp"
#include "trainer/cli/options.hpp"
#include "trainer/cli/predictor.hpp"
#include "trainer/util/clock.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace {

// `trainer bench predict`: forward-pass latency of a checkpoint or an exported file on random input.
struct PredictBenchArgs {
  ModelSource source;  // --checkpoint FILE, or --model FILE (ONNX or TorchScript) [--trust-model]
  int64_t batch = 1;
  int64_t warmup = 5;
  int64_t runs = 20;
  bool json = false;
};

}  // namespace

int run_predict_bench(const PredictBenchArgs& a) {
  if (a.runs < 1 || a.warmup < 0 || a.batch < 1)
    throw UsageError("bench predict: --runs and --batch must be >= 1 and --warmup >= 0");
  Predictor p = open_predictor(a.source.checkpoint, a.source.model, a.source.trust_model);
  auto generator = at::detail::createCPUGenerator(/*seed_val=*/1);
  torch::Tensor x = torch::randn({a.batch, p.input.channels, p.input.height, p.input.width}, generator, torch::kFloat);
  x = x.to(p.device).contiguous(p.channels_last ? torch::MemoryFormat::ChannelsLast : torch::MemoryFormat::Contiguous);
  torch::NoGradGuard no_grad;
  std::vector<double> ms;
  for (int64_t i = 0; i < a.warmup + a.runs; ++i) {
    const auto start = Clock::now();
    const torch::Tensor logits = p.model->forward(x).to(torch::kCPU);  // the copy waits for a GPU to finish
    if (i >= a.warmup) ms.push_back(seconds_since(start) * 1e3);
  }
  const double med = median(ms);
  const std::string what = a.source.model.empty() ? a.source.checkpoint : a.source.model;
  if (a.json) {
    std::printf("%s\n", nlohmann::json{{"file", what},
                                       {"arch", p.config.model.arch},
                                       {"batch", a.batch},
                                       {"threads", torch::get_num_threads()},
                                       {"ms", ms},
                                       {"ms_median", med},
                                       {"ms_per_image", med / static_cast<double>(a.batch)}}
                            .dump()
                            .c_str());
    return 0;
  }
  std::printf("%s (%s): batch %lld, median %.2f ms over %lld runs (%.2f ms per image, min %.2f ms), %d threads\n",
              what.c_str(), p.config.model.arch.c_str(), static_cast<long long>(a.batch), med,
              static_cast<long long>(a.runs), med / static_cast<double>(a.batch),
              *std::min_element(ms.begin(), ms.end()), torch::get_num_threads());
  return 0;
}

void add_predict_bench_command(CLI::App& bench, Commands& commands) {
  auto args = std::make_shared<PredictBenchArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "predict", "forward-pass latency of a checkpoint or an exported ONNX / TorchScript file on a fixed batch");
  add_model_source_options(*cmd, args->source);
  cmd->add_option("--batch", args->batch, "images per forward pass")->capture_default_str();
  cmd->add_option("--warmup", args->warmup, "untimed passes first")->capture_default_str();
  cmd->add_option("--runs", args->runs, "timed passes")->capture_default_str();
  add_json_flag(*cmd, args->json);
  commands.push_back({cmd, [args] { return run_predict_bench(*args); }});
}

}  // namespace trainer
