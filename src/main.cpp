// trainer: the table of commands, argv parsed into them, the chosen one run, and errors turned into one line and
// an exit code. Each command declares its own options (src/cli/*_command.cpp).
#include <c10/util/Exception.h>
#include <CLI/CLI.hpp>

#include <functional>
#include <iostream>

#include "trainer/cli/commands.hpp"
#include "trainer/data/pixels/image_decode.hpp"
#include "trainer/platform/process.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"

namespace {

constexpr const char* kUsage =
    "trainer: train and evaluate image classifiers on LibTorch.\n"
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
    "  trainer bench data --config c.json                     time the input pipeline\n"
    "  trainer shards make photos/ shards/                    pack a folder into WebDataset shards";

}  // namespace

// The commands, each defined in its src/cli/<name>_command.cpp. A new command is its file and one row here.
namespace trainer {
void add_eval_command(CLI::App& app, Commands& commands);
void add_predict_command(CLI::App& app, Commands& commands);
void add_plot_command(CLI::App& app, Commands& commands);
void add_doctor_command(CLI::App& app, Commands& commands);
void add_config_command(CLI::App& app, Commands& commands);  // config show, config schema
void add_export_command(CLI::App& app, Commands& commands);
void add_weights_command(CLI::App& app, Commands& commands);  // weights list, weights get
void add_shards_command(CLI::App& app, Commands& commands);   // shards make, shards check
void add_bench_command(CLI::App& app, Commands& commands);    // bench (--arch or --config), bench data, predict
void add_train_command(CLI::App& app, Commands& commands);    // the top level: trainer --config / --resume
}  // namespace trainer

namespace {

// Train comes last: its options live on the top level, which counts as parsed whatever the command.
constexpr void (*kCommands[])(CLI::App&, trainer::Commands&) = {
    trainer::add_eval_command,    trainer::add_predict_command, trainer::add_plot_command,
    trainer::add_doctor_command,  trainer::add_config_command,  trainer::add_export_command,
    trainer::add_weights_command, trainer::add_shards_command,  trainer::add_bench_command,
    trainer::add_train_command,
};

// The one error handler: a failure is one line on stderr and an exit code (2 for usage and config mistakes).
int run_reporting_errors(const std::function<int()>& run) {
  try {
    return run();
  } catch (const trainer::Error& e) {
    std::cerr << "error: " << trainer::first_line(e.what()) << "\n";
    return e.exit_code();
  } catch (const c10::Error& e) {
    std::cerr << "error: libtorch: " << trainer::first_line(e.what_without_backtrace()) << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << trainer::first_line(e.what()) << "\n";
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  trainer::keep_freed_memory_for_reuse();
  trainer::run_image_ops_on_calling_thread();
  CLI::App app{kUsage, "trainer"};
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "print the version, LibTorch's version and the devices, then exit");
  trainer::Commands commands;
  for (auto add : kCommands) add(app, commands);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "error: usage: " << e.what() << " (see trainer --help)\n";
    return 2;
  }

  return run_reporting_errors([&] {
    if (version) {
      std::cout << trainer::version_text();
      return 0;
    }
    if (argc == 1) {
      std::cout << app.help();
      return 2;
    }
    for (const trainer::Command& command : commands)
      if (command.app->parsed()) return command.run();
    return 2;  // unreachable: the top level is always parsed
  });
}
