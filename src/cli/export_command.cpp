#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "trainer/cli/commands.hpp"
#include "trainer/cli/options.hpp"
#include "trainer/config/load.hpp"
#include "trainer/data/pixels/transform.hpp"
#include "trainer/data/sources/data_kinds.hpp"
#include "trainer/deploy/export_format.hpp"
#include "trainer/engine/checkpoint_config.hpp"
#include "trainer/io/weights.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/util/atomic_file.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

namespace {

struct ExportArgs {
  std::string checkpoint;         // --checkpoint FILE
  std::string output;             // --output FILE
  std::string format;             // --format (default: from the output's extension)
  bool ema = false;               // --ema: the checkpoint's EMA weights
  int64_t opset = 0;              // --opset N (ONNX; 0: 17)
  std::string batch = "dynamic";  // --batch dynamic|N (ONNX)
};

}  // namespace

using nlohmann::json;

namespace {

// What a deployer needs beside the graph, the same keys in every format. Values are text; lists go in as JSON
// so Python reads them back with json.loads.
Metadata export_metadata(const Config& c, const CheckpointMeta& meta, bool ema) {
  const auto& in = meta.input;
  const TransformSpec eval = image_file_transform(c.data, in);
  return {{"producer", "trainer " TRAINER_VERSION},
          {"arch", c.model.arch},
          {"num_classes", std::to_string(c.model.num_classes)},
          {"in_channels", std::to_string(c.model.in_channels)},
          {"stem", enum_name(stem_kinds(), c.model.stem)},
          {"input_shape", json({in.channels, in.height, in.width}).dump()},  // C, H, W of the training images
          {"mean", json(c.data.mean).dump()},
          {"std", json(c.data.std).dump()},
          {"eval_resize", std::to_string(eval.resize)},  // shorter side, then a center crop to input_shape
          {"interpolation", enum_name(interpolations(), eval.interpolation)},
          {"class_names", json(meta.class_names).dump()},
          {"weights", ema ? "ema" : "raw"},
          {"epoch", std::to_string(meta.epoch)},
          {"step", std::to_string(meta.step)},
          {"config", meta.config.dump()}};
}

NamedTensors float_copies(const std::vector<std::pair<std::string, torch::Tensor>>& items) {
  NamedTensors out;
  for (const auto& [name, t] : items) {
    torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
    out.emplace_back(name, c.is_floating_point() ? c.to(torch::kFloat) : c);
  }
  return out;
}

int64_t parse_batch(const std::string& batch) {
  if (batch == "dynamic") return 0;
  try {
    size_t used = 0;
    const long long n = std::stoll(batch, &used);
    if (used == batch.size() && n > 0) return n;
  } catch (const std::exception&) {
  }
  throw UsageError("--batch: expected dynamic or a batch size > 0, got \"" + batch + "\"");
}

// Runs the serialized file as a deployer would and compares its logits with the model's on a fixed batch of
// normalised-scale noise; returns the largest difference. Throws ExportError past the tolerance.
double check_against_model(const ExportFormat& format, const std::string& bytes, Classifier& model,
                           const ImageShape& in, int64_t batch, const std::string& output) {
  const DeployedModel deployed = format.open(bytes, output);
  auto generator = at::detail::createCPUGenerator(/*seed_val=*/20261204);
  const torch::Tensor x = torch::randn({batch, in.channels, in.height, in.width}, generator, torch::kFloat);
  torch::NoGradGuard no_grad;
  const torch::Tensor expected = model.forward(x);
  const torch::Tensor got = deployed.model->forward(x);
  if (got.sizes() != expected.sizes())
    throw ExportError(output + ": the " + format.name + " file gives logits of shape " + c10::str(got.sizes()) +
                      ", the checkpoint " + c10::str(expected.sizes()) + "; nothing was written");
  const double diff = (got - expected).abs().max().item<double>();
  const double scale = std::max(1.0, expected.abs().max().item<double>());
  if (!(diff <= 1e-4 * scale))
    throw ExportError(output + ": the " + format.name + " file's logits differ from the checkpoint's by " +
                      std::to_string(diff) + " (tolerance " + std::to_string(1e-4 * scale) + "); nothing was written");
  return diff;
}

}  // namespace

int run_export(const ExportArgs& args) {
  if (args.checkpoint.empty()) throw UsageError("export needs --checkpoint FILE");
  if (args.output.empty()) throw UsageError("export needs --output FILE");
  const ExportFormat format = format_for_output(args.format, args.output);
  const int64_t batch = parse_batch(args.batch);
  if (!format.takes_opset_and_batch && (args.opset != 0 || batch != 0))
    throw UsageError("--opset and --batch apply to --format onnx, not " + format.name);
  const std::filesystem::path folder = std::filesystem::absolute(args.output).parent_path();
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec))
    throw ExportError(args.output + ": the folder " + folder.string() + " does not exist");

  const LoadedCheckpoint checkpoint(args.checkpoint);
  const Config c = config_for_checkpoint(checkpoint, "", {}).config;
  const ImageShape& input = checkpoint.meta().input;
  if (input.channels == 0)
    throw CheckpointError(args.checkpoint +
                          ": records no input shape (written by an older trainer); resume it to re-save");
  auto model = model_from_checkpoint(checkpoint, c.model, input, args.ema);
  // The device only: Module::to(dtype) would make the integer buffers (num_batches_tracked) float as well, and
  // the exported file would then not load back into a model strictly. float_copies makes the floats float32.
  model->to(torch::kCPU);
  model->eval();
  const std::optional<LayerGraph> graph = model->inference_graph();
  if (format.needs_graph && !graph)
    throw ExportError("model.arch " + c.model.arch + " has no inference graph, so it cannot be exported as " +
                      format.name + " (its weights under torchvision's names can: -o model.safetensors)");
  ExportRequest request;
  if (graph) request.graph = *graph;
  request.parameters = float_copies(model->named_parameters().pairs());
  request.buffers = float_copies(model->named_buffers().pairs());
  request.metadata = export_metadata(c, checkpoint.meta(), args.ema);
  request.input = input;
  request.num_classes = c.model.num_classes;
  request.opset = args.opset;
  request.batch = batch;

  const auto start = std::chrono::steady_clock::now();
  const std::string bytes = format.serialize(request);
  std::string checked = "weights only, not run";
  if (format.open) {
    const double diff = check_against_model(format, bytes, *model, input, batch > 0 ? batch : 2, args.output);
    checked = "runs: its logits match the checkpoint's within " + c10::str(diff);
  }
  // A failed write is a WriteError naming the file and the cause (exit 1), as for every file the trainer writes.
  write_file_atomically(args.output, [&](const ByteSink& sink) { sink(bytes.data(), bytes.size()); });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const std::string shape = format.takes_opset_and_batch
                                ? ", " + (batch > 0 ? "batch " + std::to_string(batch) : std::string("dynamic batch")) +
                                      ", opset " + std::to_string(args.opset ? args.opset : kDefaultOnnxOpset)
                                : "";
  int64_t values = 0;
  for (const auto* set : {&request.parameters, &request.buffers})
    for (const auto& item : *set) values += item.second.numel();
  std::printf(
      "exported %s (%s, epoch %lld, step %lld, %s weights) as %s%s: %zu tensors, %lld values -> %s "
      "(%.1f MB, %.2f s)\n",
      args.checkpoint.c_str(), c.model.arch.c_str(), static_cast<long long>(checkpoint.meta().epoch),
      static_cast<long long>(checkpoint.meta().step), args.ema ? "EMA" : "raw", format.name.c_str(), shape.c_str(),
      request.parameters.size() + request.buffers.size(), static_cast<long long>(values), args.output.c_str(),
      static_cast<double>(bytes.size()) / 1e6, seconds);
  std::printf("  input: float32 [N, %lld, %lld, %lld], normalised with the metadata's mean and std; output: logits\n",
              static_cast<long long>(input.channels), static_cast<long long>(input.height),
              static_cast<long long>(input.width));
  std::printf("  checked: %s\n  metadata: %s\n", checked.c_str(), format.metadata_where.c_str());
  return 0;
}

void add_export_command(CLI::App& app, Commands& commands) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "export", "write a checkpoint as a deployable file (ONNX, TorchScript) or torchvision-named safetensors");
  add_checkpoint_option(*cmd, args->checkpoint);
  cmd->add_option("-o,--output", args->output, "file to write (the extension names the format without --format)")
      ->required();
  cmd->add_option("--format", args->format, join(export_format_names()) + " (default: from the extension)");
  cmd->add_flag("--ema", args->ema, "export the checkpoint's EMA weights");
  cmd->add_option("--opset", args->opset, "ONNX operator set, 13 or newer (default 17)");
  cmd->add_option("--batch", args->batch, "ONNX batch dimension: dynamic (default) or a fixed size");
  commands.push_back({cmd, [args] { return run_export(*args); }});
}

}  // namespace trainer
