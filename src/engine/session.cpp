#include "trainer/engine/session.hpp"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "trainer/config/load.hpp"
#include "trainer/data/loader/last_batch.hpp"
#include "trainer/data/pixels/sample_augment.hpp"
#include "trainer/data/sources/data_kinds.hpp"
#include "trainer/data/sources/folder_source.hpp"
#include "trainer/distributed/rank_generators.hpp"
#include "trainer/distributed/replica_check.hpp"
#include "trainer/engine/backend_settings.hpp"
#include "trainer/io/weights.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/models/layout_check.hpp"
#include "trainer/models/sync_batch_norm.hpp"
#include "trainer/optim/optimizer.hpp"
#include "trainer/platform/process.hpp"
#include "trainer/util/clock.hpp"
#include "trainer/util/device.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace fs = std::filesystem;

RunLogs make_run_logs(const fs::path& run_dir) {
  RunLogs logs;
  logs.interactive = stdout_is_terminal();
  auto console = std::make_shared<spdlog::sinks::stdout_color_sink_mt>();
  console->set_pattern("[%H:%M:%S] %v");
  std::vector<spdlog::sink_ptr> file_sinks;
  if (!run_dir.empty()) {
    auto file =
        std::make_shared<spdlog::sinks::basic_file_sink_mt>((run_dir / "train.log").string(), /*truncate=*/false);
    file->set_pattern("[%Y-%m-%d %H:%M:%S.%e] %v");
    file_sinks.push_back(file);
  }
  std::vector<spdlog::sink_ptr> all_sinks{console};
  all_sinks.insert(all_sinks.end(), file_sinks.begin(), file_sinks.end());
  logs.main = std::make_shared<spdlog::logger>("trainer", all_sinks.begin(), all_sinks.end());
  logs.file = std::make_shared<spdlog::logger>("trainer.file", file_sinks.begin(), file_sinks.end());
  for (auto* l : {logs.main.get(), logs.file.get()}) l->flush_on(spdlog::level::info);
  return logs;
}

void apply_threads(const RunConfig& run) {
  const int threads = run.threads > 0 ? static_cast<int>(run.threads)
                                      : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  torch::set_num_threads(threads);
}

namespace {

// Every rank must run rank 0's config: a hash of the resolved config is compared, and all ranks stop together.
void check_same_config(const Session& s) {
  const std::string text = config_to_json(s.config).dump();
  if (const int64_t n = ranks_differing_from_rank0(*s.group, static_cast<int64_t>(std::hash<std::string>{}(text))))
    throw ConfigError(std::to_string(n) + " of " + std::to_string(s.world.size) +
                      " ranks were started with a config other than rank 0's (same file, --set overrides and "
                      "checkpoint needed on every rank)");
}

std::vector<torch::Tensor> detached(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> out;
  for (const auto& t : tensors) out.push_back(t.detach());
  return out;
}

// Each rank's dropout stream (distributed/rank_generators): a resumed run takes back every rank's states when it has as
// many ranks as the run that saved them; otherwise rank 0 keeps the checkpoint's own, and ranks > 0 start anew.
void start_rank_generators(const Session& s, const LoadedCheckpoint* resume) {
  if (resume) {
    const auto rows = resume->rank_generators();
    if (rows && rows->ranks() == s.world.size) return restore_rank_generators(*rows, s.world.rank, s.device);
    s.logs.main->info(
        "resume: {} holds the dropout generator states of {} rank(s) and this run has {}: ranks 1-{} "
        "start new streams (the data order is unchanged)",
        resume->path().string(), rows ? rows->ranks() : 1, s.world.size, s.world.size - 1);
  }
  if (s.world.rank > 0) seed_rank_generators(s.config.run.seed, s.world.rank, s.state.step);
}

}  // namespace

std::unique_ptr<Loader> make_train_loader(const Session& s, int64_t epoch, size_t start_batch, int64_t epochs) {
  TrainLoaderOptions o;
  o.drop_last = s.drop_last;
  o.seed = static_cast<uint64_t>(s.config.run.seed);
  o.epoch = epoch;
  o.epochs = epochs;
  o.start_batch = start_batch;
  o.pin_memory = s.device.is_cuda();
  o.intake = s.decode.decoder;
  o.bad = s.train_bad;
  o.rank = static_cast<size_t>(s.world.rank);
  o.world = static_cast<size_t>(s.world.size);
  return make_train_loader(s.train_data, s.config.data, o);
}

void sync_buffers(Session& s) {
  if (!s.group) return;
  s.group->broadcast(detached(s.model->buffers()), 0);
  if (s.ema) s.group->broadcast(detached(s.ema->model().buffers()), 0);
}

namespace {

// ---- the stages of make_session, in their order ----

// Who and where: the config, logs and group; every rank has rank 0's config; the device, threads and backend
// switches. An unknown model.arch fails here, before the data is opened.
Session start_session(Config config, fs::path run_dir, RunLogs logs, std::shared_ptr<Collectives> group) {
  Session s;
  s.config = std::move(config);
  s.run_dir = std::move(run_dir);
  s.logs = std::move(logs);
  s.group = std::move(group);
  if (s.group) s.world = s.group->world();
  if (s.group) check_same_config(s);
  model_row(s.config.model.arch);
  s.device = s.group ? s.group->device() : select_device(s.config.run.device);
  make_current(s.device);
  apply_threads(s.config.run);
  apply_backend_settings(s.config.run);
  return s;
}

// Both splits, model.num_classes from the training set when the config leaves it to the data, and their shapes
// checked against the model. Opening a folder dataset lists every file (1.28 million for ImageNet): the log
// says how long it took.
void open_data(Session& s) {
  const Config& c = s.config;
  const auto open_start = Clock::now();
  // data.val_fraction: a new run chooses its validation images once and records them (config and checkpoints).
  if (c.data.val_fraction > 0 && c.data.val_files.empty()) {
    s.config.data.val_files = choose_validation_files(c.data);
    s.logs.main->info("data.val_fraction {}: {} images held out for validation (data.split_seed {})",
                      c.data.val_fraction, c.data.val_files.size(), c.data.split_seed);
  }
  s.train_data = make_source(c, Split::train);
  const bool classes_from_data = c.model.num_classes == 0;
  if (classes_from_data) s.config.model.num_classes = static_cast<int64_t>(s.train_data->class_names().size());
  s.eval_data = make_source(c, Split::eval);
  const double open_seconds = seconds_since(open_start);
  const auto train_shape = s.train_data->shape(), eval_shape = s.eval_data->shape();
  // Eval images may be larger than training images (FixRes) when the model takes any size.
  const bool sizes_differ = train_shape.height != eval_shape.height || train_shape.width != eval_shape.width;
  if (train_shape.channels != eval_shape.channels || (sizes_differ && !model_row(c.model.arch).any_input_size))
    throw DataError("train and eval images differ in shape: " + s.train_data->describe() + " vs " +
                    s.eval_data->describe() +
                    (sizes_differ ? "; " + c.model.arch +
                                        " takes one input size (set data.augment.eval_crop to "
                                        "data.augment.image_size)"
                                  : ""));
  s.logs.main->info("train data: {}", s.train_data->describe());
  if (const SampleAugment augment(c.data.augment); augment.active() || c.data.repeated_augmentation.repeats > 1)
    s.logs.main->info("train augmentation: {}{}", augment.active() ? augment.describe() : "none",
                      c.data.repeated_augmentation.repeats > 1
                          ? ", repeated augmentation x" + std::to_string(c.data.repeated_augmentation.repeats)
                          : "");
  s.logs.main->info("eval data:  {}", s.eval_data->describe());
  s.logs.main->info("data opened in {:.2f}s", open_seconds);
  // Where the JPEGs are decoded, said once (image folders only).
  s.decode = open_run_decoder(c, s.device, s.logs.main);
  if (data_kind_row(c.data.kind).image_files) s.logs.main->info("decode: {}", s.decode.describe());
  if (classes_from_data) s.logs.main->info("model.num_classes {} (from the training data)", c.model.num_classes);
  s.train_bad = std::make_shared<BadSamples>("train", s.train_data->size(), c.data.max_bad_fraction, s.logs.main);
  s.eval_bad = std::make_shared<BadSamples>("eval", s.eval_data->size(), c.data.max_bad_fraction, s.logs.main);
}

// A second copy of the model, in the run's layout, that averages the weights.
std::unique_ptr<WeightEma> make_ema(const Session& s) {
  auto shadow = build_model(s.config.model, s.train_data->shape());
  place_model(*shadow, s.device, s.layout.channels_last);
  return std::make_unique<WeightEma>(s.config.train.ema, std::move(shadow), *s.model);
}

// train.class_weights balanced: N / (classes x n_c) per class of the training set (0 for a class without images).
torch::Tensor balanced_class_weights(const Session& s) {
  const auto classes = static_cast<int64_t>(s.config.model.num_classes);
  std::vector<double> counts(static_cast<size_t>(classes), 0.0);
  for (size_t i = 0; i < s.train_data->size(); ++i) counts.at(static_cast<size_t>(s.train_data->label(i))) += 1;
  std::vector<float> weights;
  for (const double n : counts)
    weights.push_back(n > 0 ? static_cast<float>(static_cast<double>(s.train_data->size()) / (classes * n)) : 0.0f);
  const auto [low, high] = std::minmax_element(weights.begin(), weights.end());
  s.logs.main->info("train.class_weights balanced: from {:.3f} (the most frequent class) to {:.3f}", *low, *high);
  return torch::tensor(weights).to(s.device);
}

// The model from the seeded generator (or `start`'s weights for a new run), the last-batch rule, the
// self-checked layout on the device, then what trains it: optimizer, normalisation, precision, scaler, EMA.
void build_model_and_optimizer(Session& s, const LoadedCheckpoint* resume, const StartWeights& start) {
  const Config& c = s.config;
  const ImageShape shape = s.train_data->shape();
  // Initialisation draws from LibTorch's default generator: seed it so the same seed gives the same start.
  torch::manual_seed(static_cast<uint64_t>(c.run.seed));
  s.model = build_model(c.model, shape);
  if (!resume && !start.empty()) {
    const WeightsReport report = load_start_weights(
        *s.model, c.model, start, [&](const std::string& note) { s.logs.main->info("{}: {}", start.source, note); });
    s.logs.main->info("{}: {}", start.source, describe(report));
  }
  const LastBatch last_batch = last_batch_rule(s.train_data->size(), c.data, s.world.size, has_batch_norm(*s.model));
  s.drop_last = last_batch.drop;
  if (!last_batch.note.empty()) s.logs.main->info("{}", last_batch.note);
  s.layout = place_in_checked_layout(*s.model, c.model, shape, s.device,
                                     [&](const std::string& warning) { s.logs.main->warn("{}", warning); });
  s.frozen = FrozenLayers(*s.model, c.model.freeze);
  const BlockOf& block_of = model_row(c.model.arch).block_of;
  s.optimizer = make_optimizer(c.optim, *s.model, block_of);
  s.lr_mult = lr_multipliers(c.optim, *s.model, block_of);
  s.norm = make_normalization(c.data.mean, c.data.std, c.model.in_channels, s.device);
  s.step_options = step_options(c.train, s.device);
  if (c.train.class_weights == ClassWeights::balanced) s.step_options.class_weights = balanced_class_weights(s);
  s.scaler = LossScaler(c.train.amp, s.step_options.uses_scaler());
  if (c.train.ema.enabled) s.ema = make_ema(s);
  int64_t parameters = 0;
  for (const auto& p : s.model->parameters()) parameters += p.numel();
  s.logs.main->info("model: {} ({} parameters) on {}, {}", c.model.arch, parameters, s.device.str(),
                    describe_runtime());
  s.logs.main->info("layout: {}{}; {}", s.layout.channels_last ? "channels_last" : "contiguous",
                    s.layout.checked ? " (kernels self-checked)" : "", describe_backend_settings());
}

// A run resumed on another data.kind (config_for_checkpoint lets an image folder change for its shards and back)
// continues where it stopped only on the same photos in the same order, as `trainer shards make` packs them: the
// classes and the count must be the run's.
void check_same_photos(const Session& s, const LoadedCheckpoint& resume) {
  const CheckpointMeta& m = resume.meta();
  const std::string saved_kind = m.config.value("data", nlohmann::json::object()).value("kind", "");
  if (saved_kind.empty() || saved_kind == enum_name(data_kinds(), s.config.data.kind)) return;
  const auto images = static_cast<int64_t>(s.train_data->size());
  if (s.train_data->class_names() == m.class_names && (m.train_images == 0 || m.train_images == images)) return;
  throw CheckpointError(resume.path().string() + " trained on " + std::to_string(m.train_images) + " images in " +
                        std::to_string(m.class_names.size()) + " classes (data.kind " + saved_kind +
                        "); the training data now (" + s.train_data->describe() + ") holds " + std::to_string(images) +
                        " in " + std::to_string(s.train_data->class_names().size()) +
                        (s.train_data->class_names() == m.class_names ? " classes" : " other classes") +
                        ": another data.kind resumes only on the same photos (`trainer shards make` packs a folder "
                        "in its order)");
}

// The checkpoint's weights, optimizer state, loss scale, EMA, generators and position (also mid-epoch). The
// generators come last: building a model above draws from them.
void restore_from_checkpoint(Session& s, const LoadedCheckpoint& resume) {
  resume.restore_model(*s.model);
  resume.restore_optimizer(*s.optimizer);
  const CheckpointMeta& m = resume.meta();
  s.scaler.load_state(m.scaler);
  if (s.ema) {
    // A run that turns EMA on at resume starts the average from the restored weights.
    if (resume.restore_ema(s.ema->model())) s.ema->set_updates(m.ema_updates);
    else s.ema = make_ema(s);
  }
  resume.restore_rng();
  check_same_photos(s, resume);
  s.state = m;  // its TrainState part
  // A mid-epoch position counts batches of the saved data.batch_size; a resume with another (the global batch over
  // another number of ranks, say) continues after the same images of the epoch's order, or says why it cannot.
  const int64_t saved_batch = m.config.value("data", nlohmann::json::object()).value("batch_size", int64_t{0});
  const int64_t batch = s.config.data.batch_size;
  if (m.batch_in_epoch > 0 && saved_batch > 0 && saved_batch != batch) {
    const int64_t images = m.batch_in_epoch * saved_batch;
    if (images % batch != 0)
      throw CheckpointError(resume.path().string() + " stopped after " + std::to_string(images) + " images of epoch " +
                            std::to_string(m.epoch + 1) + " (" + std::to_string(m.batch_in_epoch) + " batches of " +
                            std::to_string(saved_batch) + "); data.batch_size " + std::to_string(batch) +
                            " does not divide them, so the epoch cannot continue where it " +
                            "stopped: resume with a batch size that divides " + std::to_string(images));
    s.state.batch_in_epoch = images / batch;
  }
  s.logs.main->info("resumed from {}: {} epoch(s){}, {} step(s) done", resume.path().string(), s.state.epoch,
                    m.batch_in_epoch ? " and " + std::to_string(m.batch_in_epoch) + " batch(es)" : "", s.state.step);
}

// Buckets over the parameters that train now (a frozen one never gets a gradient to wait for).
void make_grad_reducer(Session& s) {
  std::vector<torch::Tensor> training;
  for (const auto& p : s.model->parameters())
    if (p.requires_grad()) training.push_back(p);
  s.reducer.reset();  // its hooks come off before new ones go on
  s.reducer = std::make_unique<GradReducer>(std::move(training), *s.group,
                                            static_cast<int64_t>(s.config.run.dist_bucket_mb * 1024 * 1024));
}

// Data-parallel: one starting point, rank 0's weights (fresh, init_from or resumed), EMA and statistics; each
// rank's dropout stream; synchronised BatchNorm when asked; then the gradient buckets that average the ranks.
void join_process_group(Session& s, const LoadedCheckpoint* resume) {
  const Config& c = s.config;
  s.group->broadcast(detached(s.model->parameters()), 0);
  if (s.ema) s.group->broadcast(detached(s.ema->model().parameters()), 0);
  sync_buffers(s);
  start_rank_generators(s, resume);
  if (c.model.sync_batchnorm) {
    auto* group = s.group.get();
    const int64_t layers =
        sync_batch_norm(*s.model, [group](const std::vector<torch::Tensor>& t) { group->all_reduce_sum(t); });
    if (layers == 0)
      s.logs.main->warn("model.sync_batchnorm: {} has no BatchNorm layer; nothing to synchronise", c.model.arch);
    else
      s.logs.main->info("model.sync_batchnorm: {} BatchNorm layers take their statistics over {} ranks", layers,
                        s.world.size);
  }
  make_grad_reducer(s);
  s.logs.main->info(
      "data-parallel: rank {} of {} ({} launcher, {}), {} gradient buckets, {:.1f} MiB all-reduced "
      "per step",
      s.world.rank, s.world.size, s.world.launcher, enum_name(dist_backends(), s.group->backend()),
      s.reducer->buckets(), static_cast<double>(s.reducer->bytes_per_step()) / (1024.0 * 1024.0));
}

}  // namespace

Session make_session(Config config, fs::path run_dir, RunLogs logs, const LoadedCheckpoint* resume,
                     std::shared_ptr<Collectives> group, const StartWeights& start) {
  // ---- who and where: config, logs, the group's agreement on the config, device and backend settings ----
  Session s = start_session(std::move(config), std::move(run_dir), std::move(logs), std::move(group));
  // ---- the data: both splits opened and counted; the class count from the training set ----
  open_data(s);
  // ---- the model on its device in its checked layout, and what trains it ----
  build_model_and_optimizer(s, resume, start);
  // ---- a resumed run: every saved state back, generators last ----
  if (resume) restore_from_checkpoint(s, *resume);
  // ---- model.freeze as it stands at this epoch ----
  apply_freeze_schedule(s);
  // ---- data-parallel: rank 0's starting point on every rank, then gradient averaging ----
  if (s.group) join_process_group(s, resume);
  // ---- the metrics files (a resumed run keeps the rows up to its step) ----
  if (!s.run_dir.empty())
    s.metrics = std::make_unique<MetricsSink>(s.run_dir, resume ? std::optional<int64_t>(s.state.step) : std::nullopt,
                                              s.config.run.tensorboard);
  return s;
}

void train_mode(Session& s) {
  s.model->train();
  s.frozen.keep_norms_in_eval();
}

bool apply_freeze_schedule(Session& s) {
  if (!s.frozen.any()) return false;
  const int64_t until = s.config.train.unfreeze_at_epoch;
  const bool frozen = until == 0 || s.state.epoch < until;
  if (s.frozen.applied() && frozen == s.frozen.frozen()) return false;
  s.frozen.set(frozen);
  if (frozen)
    s.logs.main->info("model.freeze: {} values frozen ({} BatchNorm layers keep their statistics){}",
                      s.frozen.frozen_values(), s.frozen.norms(),
                      until > 0 ? fmt::format(" for the first {} epoch(s)", until) : std::string());
  else
    s.logs.main->info("model.freeze lifted{}: every layer trains",
                      until > 0 ? fmt::format(" after epoch {}", until) : std::string());
  if (s.group && s.reducer) make_grad_reducer(s);
  return true;
}

}  // namespace trainer
