// trainer: parses argv, dispatches to a subcommand, and turns errors into one line and an exit code.
#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>

#include <cstdio>
#include <iostream>

#include "trainer/cli/commands.hpp"
#include "trainer/util/allocator.hpp"
#include "trainer/util/error.hpp"

namespace {

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace

int main(int argc, char** argv) {
  trainer::keep_freed_memory_for_reuse();
  CLI::App app{"trainer: train and evaluate image classifiers on LibTorch.\n"
               "  trainer --config configs/fashion_mnist_cnn.json        train (the default command)\n"
               "  trainer --resume runs/NAME/last.pt                     continue a run\n"
               "  trainer eval --checkpoint runs/NAME/best.pt            evaluate a checkpoint\n"
               "  trainer eval --checkpoint best.pt --predictions p.csv  per-class report, confusion.png\n"
               "  trainer predict --checkpoint best.pt cat.jpg           top-5 classes of images\n"
               "  trainer plot runs/NAME                                 curves.png of a run\n"
               "  trainer doctor --config c.json                         check machine, data and output first\n"
               "  trainer config show --config c.json                    the resolved config (schema: config schema)\n"
               "  trainer export --checkpoint best.pt -o model.safetensors  weights for Python tools\n"
               "  trainer bench --config c.json --mode train             images/s, data wait vs compute, memory\n"
               "  trainer bench --arch resnet50 --batch 16 --size 224    time the training step\n"
               "  trainer bench data --config c.json                     time the input pipeline",
               "trainer"};
  app.require_subcommand(0, 1);
  bool version = false;
  trainer::TrainArgs train;
  app.add_flag("--version", version, "print the version, LibTorch's version and the devices, then exit");
  app.add_option("-c,--config", train.config, "JSON config file (may \"extends\" a parent)");
  app.add_option("--set", train.overrides, "override a config key, e.g. --set optim.lr=0.02 (repeatable)")
      ->type_name("KEY=VALUE")
      ->take_all();
  app.add_option("--resume", train.resume, "continue the run of this checkpoint (its config is reused)");
  app.add_option("-o,--output-dir", train.output_dir, "run folder (default: run.output_dir/run.name)");
  app.add_option("--stop-after-epoch", train.stop_after_epoch,
                 "save and stop after this epoch; --resume continues the same schedule (for time-limited jobs)");
  app.add_option("--stop-after-step", train.stop_after_step,
                 "save and stop after this optimizer step, also mid-epoch; --resume continues exactly there");
  app.add_flag("--smoke", train.smoke, "train a few batches for 2 epochs with a save, a resume and an eval");

  trainer::EvalArgs eval;
  CLI::App* eval_cmd = app.add_subcommand("eval", "evaluate a checkpoint: loss, top-1, top-5, per-class accuracy, confusion matrix and plot");
  eval_cmd->add_option("--checkpoint", eval.checkpoint, "checkpoint file (last.pt or best.pt)")->required();
  eval_cmd->add_option("-c,--config", eval.config, "evaluate with this config's data settings (model must match)");
  eval_cmd->add_option("--set", eval.overrides, "override a config key (repeatable)")->type_name("KEY=VALUE")->take_all();
  eval_cmd->add_option("--split", eval.split, "val, or train (the training images with the eval transform)")
      ->check(CLI::IsMember({"val", "train"}))
      ->capture_default_str();
  eval_cmd->add_flag("--ema", eval.ema, "evaluate the checkpoint's EMA weights");
  eval_cmd->add_option("--output-dir", eval.output_dir, "folder for eval.json and confusion.png (default: the checkpoint's)");
  eval_cmd->add_option("--output", eval.output, "write the JSON report to this file instead");
  eval_cmd->add_option("--predictions", eval.predictions, "CSV with one row per image: path, label, top-5 and probabilities");

  trainer::ExportArgs export_args;
  CLI::App* export_cmd =
      app.add_subcommand("export", "write a checkpoint's weights as torchvision-named safetensors with metadata");
  export_cmd->add_option("--checkpoint", export_args.checkpoint, "checkpoint file (last.pt or best.pt)")->required();
  export_cmd->add_option("-o,--output", export_args.output, "safetensors file to write")->required();

  trainer::BenchArgs bench;
  CLI::App* bench_cmd =
      app.add_subcommand("bench", "time the training step (forward, backward, SGD) of a model on random images");
  bench_cmd->add_option("--arch", bench.arch, "model architecture")->capture_default_str();
  bench_cmd->add_option("--batch", bench.batch, "images per step")->capture_default_str();
  bench_cmd->add_option("--size", bench.size, "square image size in pixels")->capture_default_str();
  bench_cmd->add_option("--classes", bench.classes, "classifier outputs")->capture_default_str();
  bench_cmd->add_option("--stem", bench.stem, "ResNet stem")->check(CLI::IsMember({"imagenet", "small"}))->capture_default_str();
  bench_cmd->add_flag("--channels-last", bench.channels_last, "weights and inputs in channels_last");
  bench_cmd->add_option("--threads", bench.threads, "intra-op threads (0: all cores)")->capture_default_str();
  bench_cmd->add_option("--device", bench.device, "auto, cpu, cuda or cuda:N")->capture_default_str();
  bench_cmd->add_option("--warmup", bench.warmup, "untimed steps first")->capture_default_str();
  bench_cmd->add_option("--steps", bench.steps, "timed steps")->capture_default_str();
  bench_cmd->add_option("--amp", bench.amp, "autocast dtype, as train.amp")
      ->check(CLI::IsMember({"off", "bfloat16", "float16"}))
      ->capture_default_str();
  bench_cmd->add_flag("--loss-scaler", bench.loss_scaler, "do the float16 loss scaler's work in any precision");
  bench_cmd->add_option("--clip", bench.clip, "clip the gradient norm to this value (0: off)")->capture_default_str();
  bench_cmd->add_flag("--ema", bench.ema, "update an EMA of the weights after every step");
  bench_cmd->add_flag("--json", bench.json, "print one JSON line");
  bench_cmd->add_option("-c,--config", bench.config,
                        "time this config's run instead: its data pipeline, its model step, or both (--mode)");
  bench_cmd->add_option("--set", bench.overrides, "with --config: override a config key (repeatable)")
      ->type_name("KEY=VALUE")
      ->take_all();
  bench_cmd->add_option("--mode", bench.mode, "with --config: data (pipeline alone), model (step on random images) or "
                                              "train (both, with the data-wait vs compute split)")
      ->check(CLI::IsMember({"data", "model", "train"}))
      ->capture_default_str();
  trainer::DataBenchArgs data_bench;
  CLI::App* data_bench_cmd =
      bench_cmd->add_subcommand("data", "images/s of a config's training input pipeline, or of the decode alone");
  data_bench_cmd->add_option("-c,--config", data_bench.config, "config whose data section is timed")->required();
  data_bench_cmd->add_option("--set", data_bench.overrides, "override a config key (repeatable)")
      ->type_name("KEY=VALUE")
      ->take_all();
  data_bench_cmd->add_option("--warmup", data_bench.warmup, "untimed batches first")->capture_default_str();
  data_bench_cmd->add_option("--batches", data_bench.batches, "timed batches")->capture_default_str();
  data_bench_cmd->add_flag("--decode-only", data_bench.decode_only,
                           "time only reading and full-size decoding of the same files, on data.workers threads");
  data_bench_cmd->add_flag("--json", data_bench.json, "print one JSON line");

  trainer::PredictArgs predict;
  CLI::App* predict_cmd =
      app.add_subcommand("predict", "top-5 classes of image files, with the checkpoint's own preprocessing");
  predict_cmd->add_option("--checkpoint", predict.checkpoint, "checkpoint file (last.pt or best.pt)")->required();
  predict_cmd->add_option("images", predict.images, "image files")->required();
  predict_cmd->add_flag("--json", predict.json, "print one JSON line");

  trainer::DoctorArgs doctor;
  CLI::App* doctor_cmd = app.add_subcommand(
      "doctor", "check LibTorch, BLAS, threads, every CUDA device and, with --config, the data and output folder");
  doctor_cmd->add_option("-c,--config", doctor.config, "config whose data, output folder and settings are checked");
  doctor_cmd->add_option("--set", doctor.overrides, "override a config key (repeatable)")->type_name("KEY=VALUE")->take_all();
  doctor_cmd->add_option("-o,--output-dir", doctor.output_dir, "run folder to check (default: run.output_dir/run.name)");

  trainer::PlotArgs plot;
  CLI::App* plot_cmd = app.add_subcommand("plot", "draw RUN_DIR/curves.png from the run's metrics");
  plot_cmd->add_option("run_dir", plot.run_dir, "run folder (holds metrics.jsonl)")->required();

  trainer::ConfigShowArgs config_show;
  CLI::App* config_cmd = app.add_subcommand("config", "print the resolved config, or the JSON Schema of every key");
  config_cmd->require_subcommand(1);
  CLI::App* config_show_cmd = config_cmd->add_subcommand("show", "print the config as trainer resolves it");
  config_show_cmd->add_option("-c,--config", config_show.config, "JSON config file")->required();
  config_show_cmd->add_option("--set", config_show.overrides, "override a config key (repeatable)")
      ->type_name("KEY=VALUE")
      ->take_all();
  CLI::App* config_schema_cmd =
      config_cmd->add_subcommand("schema", "print a JSON Schema of the config (type, default, range, description)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "error: usage: " << e.what() << " (see trainer --help)\n";
    return 2;
  }

  try {
    if (version) {
      std::cout << trainer::version_text();
      return 0;
    }
    if (eval_cmd->parsed()) return trainer::run_eval(eval);
    if (predict_cmd->parsed()) return trainer::run_predict(predict);
    if (plot_cmd->parsed()) return trainer::run_plot(plot);
    if (doctor_cmd->parsed()) return trainer::run_doctor(doctor);
    if (config_show_cmd->parsed()) return trainer::run_config_show(config_show);
    if (config_schema_cmd->parsed()) return trainer::run_config_schema();
    if (export_cmd->parsed()) return trainer::run_export(export_args);
    if (data_bench_cmd->parsed()) return trainer::run_data_bench(data_bench);
    if (bench_cmd->parsed()) return bench.config.empty() ? trainer::run_bench(bench) : trainer::run_config_bench(bench);
    if (argc == 1) {
      std::cout << app.help();
      return 2;
    }
    return trainer::run_train(train);
  } catch (const trainer::Error& e) {
    std::cerr << "error: " << first_line(e.what()) << "\n";
    return e.exit_code();
  } catch (const c10::Error& e) {
    std::cerr << "error: libtorch: " << first_line(e.what_without_backtrace()) << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << first_line(e.what()) << "\n";
    return 1;
  }
}
