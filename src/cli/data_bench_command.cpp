// `trainer bench data`: the training input pipeline as a run builds it, timed without a model.
#include <torch/torch.h>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <limits>
#include <thread>

#include "trainer/cli/bench_support.hpp"
#include "trainer/cli/commands.hpp"
#include "trainer/cli/options.hpp"
#include "trainer/config/load.hpp"
#include "trainer/data/device/batch_decoder.hpp"
#include "trainer/data/device/decode_choice.hpp"
#include "trainer/data/device/device_stager.hpp"
#include "trainer/data/device/model_input.hpp"
#include "trainer/data/loader/loaders.hpp"
#include "trainer/data/loader/pipeline_profile.hpp"
#include "trainer/data/pixels/image_decode.hpp"
#include "trainer/data/pixels/random_erasing.hpp"
#include "trainer/data/sources/data_kinds.hpp"
#include "trainer/data/sources/image_source.hpp"
#include "trainer/engine/resolve_config.hpp"
#include "trainer/engine/session.hpp"
#include "trainer/models/layout_check.hpp"
#include "trainer/platform/process.hpp"
#include "trainer/util/clock.hpp"
#include "trainer/util/device.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace {

// Reads and decodes every file at full size, the files split over `threads` threads: the ceiling for a
// pipeline that decodes at full resolution.
double decode_rate(const ImageSource& source, size_t threads, size_t& decoded) {
  std::atomic<size_t> next{0};
  const auto start = Clock::now();
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      std::vector<uint8_t> bytes;  // one buffer per thread, as the loader's workers keep
      for (size_t i = next++; i < source.size(); i = next++) {
        source.read_encoded(i, bytes);
        decode_image(bytes, probe_image(bytes), 3, 1, source.sample_name(i));
      }
    });
  for (auto& t : pool) t.join();
  decoded = source.size();
  return static_cast<double>(decoded) / seconds_since(start);
}

// --decode-only: every image of the training split (a folder's files, shards' members) read and decoded whole on
// data.workers threads, once to warm the page cache (as the pipeline's warmup does), once timed.
double bench_decode_only(const Config& c, size_t workers, nlohmann::json& out) {
  if (!data_kind_row(c.data.kind).image_files)
    throw UsageError("bench data --decode-only times the decode of image files; data.kind " +
                     enum_name(data_kinds(), c.data.kind) + " has none");
  const auto train = make_source(c, Split::train);
  size_t decoded = 0;
  decode_rate(*train, std::max<size_t>(1, workers), decoded);
  const double rate = decode_rate(*train, std::max<size_t>(1, workers), decoded);
  out["mode"] = "decode_only";
  out["images"] = decoded;
  return rate;
}

// Training: one loader whose epochs follow each other, taken from until the batches asked are done. Evaluation: a
// new loader for every pass over the split, as each evaluation makes one, so the rate holds what starting and
// draining it costs.
std::function<std::unique_ptr<Loader>()> loader_maker(const DataBenchArgs& a, const Config& c,
                                                      std::shared_ptr<const ImageSource> source,
                                                      std::shared_ptr<BadSamples> bad, size_t batch_size,
                                                      const torch::Device& target,
                                                      std::shared_ptr<const DecodeIntake> intake,
                                                      std::shared_ptr<PipelineProfile> profile) {
  const size_t workers = static_cast<size_t>(c.data.workers);
  if (a.eval)
    return [=] {
      return make_eval_loader(source, batch_size, workers, static_cast<size_t>(c.data.prefetch),
                              /*pin_memory=*/target.is_cuda(), bad, intake, profile);
    };
  return [=] {
    TrainLoaderOptions o;
    o.drop_last = c.data.drop_last == Switch::on;
    o.seed = static_cast<uint64_t>(c.run.seed);
    o.epochs = kEndless;
    o.pin_memory = target.is_cuda();
    o.intake = intake;
    o.bad = bad;
    o.profile = profile;
    return make_train_loader(source, c.data, o);
  };
}

std::string fixed(double value, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

// Per worker: median milliseconds per image of each stage, each stage's share of the worker's time, and the share
// of the files' pixels decoded; and the median time to get a batch's memory. Warm-up batches included.
nlohmann::json stage_report(const PipelineProfile& profile) {
  nlohmann::json workers = nlohmann::json::array();
  for (const WorkerProfile& w : profile.workers()) {
    nlohmann::json medians, share;
    double busy = 0;
    for (double t : w.total_s) busy += t;
    for (size_t k = 0; k < kSampleStages; ++k) {
      medians[sample_stage_name(k)] = w.median_ms[k];
      share[sample_stage_name(k)] = busy > 0 ? w.total_s[k] / busy : 0.0;
    }
    workers.push_back(
        {{"images", w.samples},
         {"median_ms", medians},
         {"time_share", share},
         {"decoded_pixel_share",
          w.pixels_full > 0 ? static_cast<double>(w.pixels_decoded) / static_cast<double>(w.pixels_full) : 0.0}});
  }
  return {{"workers", workers}, {"batch_memory_ms", 1000.0 * median(profile.batch_memory_s())}};
}

// The pipeline as a run builds it, through what a step does with a batch before the model (to the device,
// decoded there with data.decode cuda, float, normalised, erased, channels_last): a.warmup batches, then a.batches
// timed.
double bench_pipeline(const DataBenchArgs& a, const Config& c, size_t batch_size, nlohmann::json& out) {
  const auto source = make_source(c, a.eval ? Split::eval : Split::train);
  auto bad = std::make_shared<BadSamples>(a.eval ? "eval" : "train", source->size(), c.data.max_bad_fraction, nullptr);
  // data.decode as a run on run.device resolves it: with the GPU decode, batches go to the device, are decoded
  // and normalised there, as in training; otherwise normalisation is timed on the CPU.
  const torch::Device device = select_device(c.run.device);
  const RunDecoder decode = open_run_decoder(c, device, nullptr);
  const std::shared_ptr<BatchDecoder> decoder = decode.decoder;
  const torch::Device target = decoder ? device : torch::Device(torch::kCPU);
  const auto norm = make_normalization(c.data.mean, c.data.std, c.model.in_channels, target);
  auto profile = std::make_shared<PipelineProfile>();
  const auto next_loader = loader_maker(a, c, source, bad, batch_size, target, decoder, profile);
  const bool channels_last = wants_channels_last(c.model, target);
  const int64_t total = a.warmup + a.batches;
  int64_t seen = 0, images = 0, input_blocks = 0;
  double normalize_s = 0, first_batch_s = 0;
  const Clock::time_point began = Clock::now();
  Clock::time_point start = began;
  int64_t faults_at_start = page_faults();
  torch::Tensor last, input_buffer;
  while (seen < total) {
    auto loader = next_loader();
    const StageDecode stage{decoder.get(), {bad, a.eval ? BadSlot::drop : BadSlot::replace}};
    for_each_device_batch(*loader, target, stage, std::numeric_limits<size_t>::max(), [&](ImageBatch& batch) {
      const auto before = Clock::now();
      // (the block's address, not a handle: a second handle would keep to_model_input from reusing it)
      const auto block = [&] {
        return input_buffer.defined() ? input_buffer.storage().unsafeGetStorageImpl() : nullptr;
      };
      const auto* previous_block = block();
      auto x = to_model_input(batch.images, norm, channels_last, &input_buffer);
      if (block() != previous_block) ++input_blocks;
      if (batch.erase.defined()) erase_batch(x, batch.erase, c.data.augment.random_erasing.value);
      if (target.is_cuda()) last = x;  // (on the CPU, holding it would keep to_model_input from reusing it)
      if (++seen == 1) first_batch_s = seconds_since(began);  // start-up: threads, first files, first batch
      if (seen == a.warmup) {
        if (target.is_cuda()) x.sum().item<float>();  // the warm-up's device work done before the clock starts
        start = Clock::now();
        faults_at_start = page_faults();
      }
      if (seen > a.warmup) {
        images += batch.labels.size(0);  // read, decoded or found unreadable: no device sync to count them
        normalize_s += seconds_since(before);
      }
      return seen < total;
    });
  }
  if (target.is_cuda() && last.defined()) last.sum().item<float>();  // the last batch's device work, timed
  const int64_t faults = page_faults() - faults_at_start;
  out["decode"] = enum_name(decode_devices(), decode.choice.where);
  if (decoder) {
    const DecodeCounts n = decoder->take_counts();
    out["decoded_by"] = {
        {"gpu", n.gpu}, {"cpu", n.cpu}, {"refused", n.refused}, {"failed", n.failed}, {"failed_calls", n.failed_calls}};
  }
  if (const CudaMemory m = cuda_peak_memory(target); m.known) out["cuda_peak_allocated_mib"] = m.peak_allocated_mib;
  out["mode"] = a.eval ? "eval_pipeline" : "pipeline";
  out["images"] = images;
  out["bad_images"] = bad->distinct();
  out["normalize_ms_per_batch"] = 1000.0 * normalize_s / static_cast<double>(a.batches);
  out["first_batch_s"] = first_batch_s;
  const double rate = static_cast<double>(images) / seconds_since(start);
  out["stages"] = stage_report(*profile);
  // What a steady state that allocates nothing shows whatever the machine's speed: batch blocks stop growing
  // after the first few, and the timed batches fault in next to no pages.
  // (Pinned batches, on CUDA, come from LibTorch's caching host allocator, which reuses them itself: each counts
  // as a new block here.)
  const ImageShape shape = source->shape();
  constexpr double kMiB = 1024.0 * 1024.0;
  out["memory"] = {
      {"batches_made", profile->batch_memory_s().size()},
      {"new_batch_blocks", profile->new_batch_blocks()},
      {"pinned", target.is_cuda()},
      {"prefetch", c.data.prefetch},
      {"batch_mib",
       static_cast<double>(batch_size) * static_cast<double>(shape.height * shape.width * shape.channels) / kMiB},
      {"new_input_blocks", input_blocks},
      {"input_mib", input_buffer.defined() ? static_cast<double>(input_buffer.storage().nbytes()) / kMiB : 0.0},
      {"page_faults_per_batch", faults < 0 ? -1.0 : static_cast<double>(faults) / a.batches}};
  return rate;
}

void print_data_bench(const DataBenchArgs& a, const nlohmann::json& out, size_t workers) {
  if (a.json) {
    std::printf("%s\n", out.dump().c_str());
    return;
  }
  std::printf("%s: %.1f images/s (%lld images, %zu threads), peak RSS %.0f MiB\n",
              a.decode_only ? "decode only (full size)"
              : a.eval      ? "eval pipeline"
                            : "train pipeline",
              out["images_per_s"].get<double>(), static_cast<long long>(out["images"].get<int64_t>()),
              std::max<size_t>(1, workers), out["peak_rss_mib"].get<double>());
  if (a.decode_only) return;
  std::printf("  start-up: the first batch after %.2f s; then %lld untimed batches before the timed ones\n",
              out["first_batch_s"].get<double>(), static_cast<long long>(out["warmup"].get<int64_t>()));
  std::printf("  main thread: %.1f ms per batch turning uint8 into normalised float\n",
              out["normalize_ms_per_batch"].get<double>());
  const nlohmann::json& memory = out["memory"];
  std::printf(
      "  memory: %zu %sbatch blocks of %.1f MiB for %zu batches made (prefetch %lld), %lld float input block(s) of "
      "%.1f MiB; %.1f page faults per timed batch\n",
      memory["new_batch_blocks"].get<size_t>(), memory["pinned"].get<bool>() ? "pinned " : "",
      memory["batch_mib"].get<double>(), memory["batches_made"].get<size_t>(),
      static_cast<long long>(memory["prefetch"].get<int64_t>()),
      static_cast<long long>(memory["new_input_blocks"].get<int64_t>()), memory["input_mib"].get<double>(),
      memory["page_faults_per_batch"].get<double>());
  const nlohmann::json& stages = out["stages"];
  std::printf("  batch memory: %.3f ms per batch (median: a recycled batch, or a new one)\n",
              stages["batch_memory_ms"].get<double>());
  size_t n = 0;
  for (const auto& w : stages["workers"]) {
    std::string medians, shares;
    for (size_t k = 0; k < kSampleStages; ++k) {
      const char* name = sample_stage_name(k);
      medians += std::string(k ? ", " : "") + name + " " + fixed(w["median_ms"][name].get<double>(), 2);
      shares += std::string(k ? ", " : "") + name + " " + fixed(100.0 * w["time_share"][name].get<double>(), 0) + "%";
    }
    std::printf(
        "  worker %zu: %zu images; ms per image (median): %s; share of its time: %s; decoded %.0f%% of the "
        "files' pixels\n",
        ++n, w["images"].get<size_t>(), medians.c_str(), shares.c_str(),
        100.0 * w["decoded_pixel_share"].get<double>());
  }
}

}  // namespace

int run_data_bench(const DataBenchArgs& given) {
  if (given.batches < 1 || given.warmup < -1) throw UsageError("bench data: --batches must be >= 1 and --warmup >= 0");
  Config c = resolve_config(given.config, given.overrides);
  apply_allow_pipe(c, given.allow_pipe);
  apply_threads(c.run);
  DataBenchArgs a = given;
  if (a.warmup < 0) a.warmup = c.data.prefetch + 2;
  const size_t workers = static_cast<size_t>(c.data.workers);
  const size_t batch_size = static_cast<size_t>(a.eval ? c.data.eval_batch_size : c.data.batch_size);
  nlohmann::json out = {{"impl", "trainer"}, {"workers", workers}, {"batch", batch_size}, {"warmup", a.warmup}};
  out["images_per_s"] = a.decode_only ? bench_decode_only(c, workers, out) : bench_pipeline(a, c, batch_size, out);
  out["peak_rss_mib"] = peak_resident_mib();
  print_data_bench(a, out, workers);
  return 0;
}

void add_data_bench_command(CLI::App& bench, Commands& commands) {
  auto args = std::make_shared<DataBenchArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "data", "images/s of a config's training or evaluation input pipeline, or of the decode alone");
  add_config_options(*cmd, args->config, args->overrides, "config whose data section is timed", /*required=*/true);
  cmd->add_option("--warmup", args->warmup,
                  "untimed batches first (default: data.prefetch + 2, which the pipeline takes to fill up)");
  cmd->add_option("--batches", args->batches, "timed batches")->capture_default_str();
  add_allow_pipe_flag(*cmd, args->allow_pipe);
  cmd->add_flag("--decode-only", args->decode_only,
                "time only reading and full-size decoding of the same files, on data.workers threads");
  cmd->add_flag(
         "--eval", args->eval,
         "time the evaluation pipeline (eval split, eval transforms, data.eval_batch_size, a new loader per pass)")
      ->excludes("--decode-only");
  add_json_flag(*cmd, args->json);
  commands.push_back({cmd, [args] { return run_data_bench(*args); }});
}

}  // namespace trainer
