#include <gtest/gtest.h>

#include <algorithm>

#include "e2e/e2e_support.hpp"
#include "support/image_folder_fixture.hpp"
#include "trainer/config/load.hpp"
#include "trainer/engine/resolve_config.hpp"
#include "trainer/io/checkpoint.hpp"
#include "trainer/models/factory.hpp"

namespace trainer {
namespace {

using namespace trainer::testing;
using nlohmann::json;

ClassifierPtr load_weights(const fs::path& checkpoint) {
  const LoadedCheckpoint ck(checkpoint);
  const Config c = resolve_config(ck.meta().config);
  auto model = build_model(c.model, ck.meta().input);
  ck.restore_model(*model);
  return model;
}

// Every parameter and buffer of two models is equal, bit for bit.
void expect_same_weights(const torch::nn::Module& a, const torch::nn::Module& b, const std::string& what) {
  const auto pb = b.named_parameters();
  for (const auto& item : a.named_parameters())
    EXPECT_TRUE(torch::equal(item.value(), pb[item.key()])) << item.key() << " differs " << what;
  const auto bb = b.named_buffers();
  for (const auto& item : a.named_buffers())
    EXPECT_TRUE(torch::equal(item.value(), bb[item.key()])) << item.key() << " differs " << what;
}

// Rows without their timing columns, which are the only values allowed to differ.
std::vector<json> metric_rows(const fs::path& run_dir) {
  std::vector<json> rows;
  std::istringstream lines(read_text(run_dir / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    json row = json::parse(line);
    for (const char* timing : {"images_per_s", "data_wait_s", "compute_s"}) row.erase(timing);
    rows.push_back(row);
  }
  return rows;
}

// 2 epochs straight vs 1 epoch, stop, resume for the 2nd: identical weights, optimizer state and metrics.
TEST(Resume, IsBitIdenticalToAnUninterruptedRun) {
  SmallRun run(json{{"model", {{"dropout", 0.2}}}});  // dropout: the RNG state must be restored too
  const fs::path straight = run.dir / "straight", split = run.dir / "split";
  const auto a = trainer_cli("--config " + run.config.string() + " -o " + straight.string());
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const auto b1 = trainer_cli("--config " + run.config.string() + " -o " + split.string() + " --stop-after-epoch 1");
  ASSERT_EQ(b1.exit_code, 0) << b1.output;
  ASSERT_EQ(LoadedCheckpoint(split / "last.pt").meta().epoch, 1);
  const auto b2 = trainer_cli("--resume " + (split / "last.pt").string());
  ASSERT_EQ(b2.exit_code, 0) << b2.output;

  const LoadedCheckpoint ca(straight / "last.pt"), cb(split / "last.pt");
  EXPECT_EQ(cb.meta().epoch, 2);
  EXPECT_EQ(ca.meta().step, cb.meta().step);
  EXPECT_EQ(ca.meta().best, cb.meta().best);
  EXPECT_EQ(ca.meta().config, cb.meta().config);
  expect_same_weights(*load_weights(straight / "last.pt"), *load_weights(split / "last.pt"), "after resume");
  EXPECT_EQ(metric_rows(straight), metric_rows(split));
  EXPECT_GE(metric_rows(split).size(), 4u);
}

// train.early_stopping: with min_delta 0.5 no evaluation after the first improves, so patience 2 ends a 6-epoch
// run after epoch 3 (exit 0, last.pt saved there, the reason in the log). Stopped after epoch 2 and resumed, the
// count carries over: that run ends after epoch 3 too, with the same weights and metrics. Resuming an ended run
// trains nothing.
TEST(EarlyStopping, EndsTheRunAndItsCountSurvivesAResume) {
  SmallRun run(json{{"train", {{"epochs", 6}, {"early_stopping", {{"patience", 2}, {"min_delta", 0.5}}}}}});
  const fs::path straight = run.dir / "straight", split = run.dir / "split";
  const auto a = trainer_cli("--config " + run.config.string() + " -o " + straight.string());
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("early stopping: eval top1 has not improved by more than 0.5 in 2 evaluation(s)"),
            std::string::npos)
      << a.output;
  EXPECT_NE(a.output.find("stopped early after epoch 3 of 6"), std::string::npos) << a.output;
  const LoadedCheckpoint ca(straight / "last.pt");
  EXPECT_EQ(ca.meta().epoch, 3);
  EXPECT_EQ(ca.meta().evals_without_improvement, 2);
  ASSERT_TRUE(fs::exists(straight / "best.pt"));

  const auto b1 = trainer_cli("--config " + run.config.string() + " -o " + split.string() + " --stop-after-epoch 2");
  ASSERT_EQ(b1.exit_code, 0) << b1.output;
  EXPECT_EQ(LoadedCheckpoint(split / "last.pt").meta().evals_without_improvement, 1);
  const auto b2 = trainer_cli("--resume " + (split / "last.pt").string());
  ASSERT_EQ(b2.exit_code, 0) << b2.output;
  const LoadedCheckpoint cb(split / "last.pt");
  EXPECT_EQ(cb.meta().epoch, 3);
  EXPECT_EQ(cb.meta().step, ca.meta().step);
  expect_same_weights(*load_weights(straight / "last.pt"), *load_weights(split / "last.pt"), "after resume");
  EXPECT_EQ(metric_rows(straight), metric_rows(split));

  const auto again = trainer_cli("--resume " + (straight / "last.pt").string());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("nothing left to train"), std::string::npos) << again.output;
  EXPECT_EQ(LoadedCheckpoint(straight / "last.pt").meta().epoch, 3);
}

// Straight run vs the same run stopped after `stop_step` (mid-epoch, at the end of a log interval) and resumed:
// the same weights, EMA, scaler state and metrics, bit for bit.
void expect_mid_epoch_resume_is_exact(const json& overrides, int64_t stop_step) {
  SmallRun run(overrides);
  const fs::path straight = run.dir / "straight", split = run.dir / "split";
  const auto a = trainer_cli("--config " + run.config.string() + " -o " + straight.string());
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const auto b1 = trainer_cli("--config " + run.config.string() + " -o " + split.string() + " --stop-after-step " +
                              std::to_string(stop_step));
  ASSERT_EQ(b1.exit_code, 0) << b1.output;
  const LoadedCheckpoint mid(split / "last.pt");
  ASSERT_EQ(mid.meta().step, stop_step);
  ASSERT_EQ(mid.meta().epoch, 0);
  ASSERT_GT(mid.meta().batch_in_epoch, 0);
  const auto b2 = trainer_cli("--resume " + (split / "last.pt").string());
  ASSERT_EQ(b2.exit_code, 0) << b2.output;
  EXPECT_NE(b2.output.find("resumed from " + (split / "last.pt").string() + ": 0 epoch(s) and " +
                           std::to_string(mid.meta().batch_in_epoch) + " batch(es)"),
            std::string::npos)
      << b2.output;

  const LoadedCheckpoint ca(straight / "last.pt"), cb(split / "last.pt");
  EXPECT_EQ(ca.meta().step, cb.meta().step);
  EXPECT_EQ(ca.meta().best, cb.meta().best);
  EXPECT_EQ(ca.meta().scaler, cb.meta().scaler);
  EXPECT_EQ(ca.meta().ema_updates, cb.meta().ema_updates);
  expect_same_weights(*load_weights(straight / "last.pt"), *load_weights(split / "last.pt"),
                      "after a mid-epoch resume");
  const Config c = resolve_config(ca.meta().config);
  if (c.train.ema.enabled) {
    auto ea = build_model(c.model, ca.meta().input), eb = build_model(c.model, cb.meta().input);
    ASSERT_TRUE(ca.restore_ema(*ea));
    ASSERT_TRUE(cb.restore_ema(*eb));
    expect_same_weights(*ea, *eb, "in the EMA after a mid-epoch resume");
  }
  auto rows_a = metric_rows(straight), rows_b = metric_rows(split);
  // Epoch rows summarise what each process saw; the resumed epoch's row covers only its second part.
  auto drop_epoch_rows = [](std::vector<json>& rows) {
    rows.erase(std::remove_if(rows.begin(), rows.end(), [](const json& r) { return r["kind"] == "epoch"; }),
               rows.end());
  };
  drop_epoch_rows(rows_a);
  drop_epoch_rows(rows_b);
  EXPECT_EQ(rows_a, rows_b);
}

TEST(Resume, MidEpochIsBitIdenticalWithTheFullRecipe) {
  // Two loader workers, AdamW, accumulation over 2 batches, clipping, mixup and CutMix, label smoothing, EMA,
  // dropout: every piece of state a resume must restore.
  expect_mid_epoch_resume_is_exact(json{{"model", {{"dropout", 0.2}}},
                                        {"optim", {{"name", "adamw"}, {"lr", 0.002}, {"weight_decay", 0.05}}},
                                        {"train",
                                         {{"accumulate_steps", 2},
                                          {"clip_grad_norm", 1.0},
                                          {"label_smoothing", 0.1},
                                          {"mix", {{"mixup_alpha", 0.2}, {"cutmix_alpha", 1.0}}},
                                          {"ema", {{"enabled", true}, {"decay", 0.9}, {"warmup", true}}}}}},
                                   4);
}

// Stochastic depth draws from the same generator the checkpoint saves: a resumed EfficientNet drops the same
// samples' branches as one that never stopped (rate 0.5, so most steps drop some).
TEST(Resume, MidEpochIsBitIdenticalWithStochasticDepth) {
  expect_mid_epoch_resume_is_exact(
      json{{"model", {{"arch", "efficientnet_b0"}, {"in_channels", 1}, {"stochastic_depth", 0.5}}},
           {"data", {{"limit_train", 160}, {"limit_eval", 32}}},
           {"train", {{"epochs", 1}}}},
      4);  // of 5 batches, where a train row is logged (log_every 4)
}

// Swin's stochastic depth goes through the same call and generator: a Swin-T resumed mid-epoch (32 px photos,
// rate 0.5) drops the same samples' branches as one that never stopped.
TEST(SwinResume, MidEpochIsBitIdenticalWithStochasticDepth) {
  TempDir photos;
  write_image_folder(photos.path(), {2, 5, 1, true});
  expect_mid_epoch_resume_is_exact(
      json{{"data",
            {{"kind", "imagenet"},
             {"root", photos.path().string()},
             {"batch_size", 4},
             {"eval_batch_size", 4},
             {"augment", {{"image_size", 32}}}}},
           {"model", {{"arch", "swin_t"}, {"in_channels", 3}, {"num_classes", 2}, {"stochastic_depth", 0.5}}},
           {"train", {{"epochs", 1}, {"log_every", 2}}}},
      2);  // of 3 batches, where a train row is logged
}

TEST(Resume, MidEpochIsBitIdenticalWithEveryAugmentation) {
  // Colour jitter, RandAugment with magnitude noise, random erasing with noise, repeated augmentation, two
  // workers: every draw is f(seed, epoch, index, copy), so the resumed half sees the same pixels.
  expect_mid_epoch_resume_is_exact(json{{"data",
                                         {{"repeated_augmentation", {{"repeats", 3}}},
                                          {"augment",
                                           {{"color_jitter", {{"brightness", 0.4}, {"contrast", 0.4}}},
                                            {"auto_augment", {{"name", "randaugment"}, {"magnitude_std", 0.5}}},
                                            {"random_erasing", {{"prob", 0.5}, {"value", "random"}}}}}}}},
                                   4);
}

TEST(Resume, MidEpochIsBitIdenticalWithAugMix) {
  expect_mid_epoch_resume_is_exact(
      json{{"data", {{"augment", {{"auto_augment", "augmix"}, {"random_erasing", {{"prob", 0.25}}}}}}}}, 4);
}

TEST(Resume, MidEpochIsBitIdenticalUnderBfloat16Autocast) {
  expect_mid_epoch_resume_is_exact(json{{"train", {{"amp", {{"enabled", true}, {"dtype", "bfloat16"}}}}}}, 4);
}

TEST(Resume, Float16AutocastOnCpuIsAClearConfigError) {
  SmallRun run(json{{"train", {{"amp", {{"enabled", true}, {"dtype", "float16"}}}}}});
  const auto r = trainer_cli("--config " + run.config.string() + " -o " + (run.dir / "r").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("train.amp.dtype: float16 autocast needs CUDA"), std::string::npos) << r.output;
  SmallRun shared(
      json{{"train", {{"epochs", 1}, {"amp", {{"enabled", true}, {"dtype", "float16"}, {"cuda_only", true}}}}}});
  const auto ok = trainer_cli("--config " + shared.config.string() + " -o " + (shared.dir / "r").string());
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find(", float32"), std::string::npos) << ok.output;
}

// Sends `signals` signals (50 ms apart: signals of one kind that arrive together merge into one) to a training
// run once `ready` (a shell condition) holds; returns the output with "rc=N" (the exit status) last.
CommandResult interrupt_run(const SmallRun& run, const fs::path& out, int signals, const std::string& name,
                            const std::string& ready) {
  std::string kill_all;
  for (int i = 0; i < signals; ++i) kill_all += (i ? "sleep 0.05; " : "") + std::string("kill -") + name + " $pid; ";
  const fs::path script = run.dir / ("interrupt-" + out.filename().string() + ".sh");
  write_text(script, std::string(TRAINER_BIN) + " --config " + run.config.string() + " -o " + out.string() + " > " +
                         (run.dir / "out.txt").string() + " 2>&1 &\npid=$!\n" + "for i in $(seq 600); do " + ready +
                         " 2>/dev/null && break; sleep 0.05; done\n" + kill_all + "\nwait $pid\necho rc=$?\n");
  auto r = run_command("bash " + script.string());
  r.output = read_text(run.dir / "out.txt") + r.output;
  return r;
}

std::string logged_a_step(const fs::path& out) { return "grep -q ' step ' " + (out / "train.log").string(); }

TEST(Resume, SigintSavesAMidEpochCheckpointThatResumesExactly) {
  SmallRun run(json{{"train", {{"epochs", 3}, {"log_every", 1}}}});
  const fs::path straight = run.dir / "straight", split = run.dir / "split";
  const auto a = trainer_cli("--config " + run.config.string() + " -o " + straight.string());
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const auto r = interrupt_run(run, split, 1, "INT", logged_a_step(split));
  EXPECT_NE(r.output.find("rc=130"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stopped by SIGINT after step"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("continue with: trainer --resume " + (split / "last.pt").string()), std::string::npos)
      << r.output;
  const LoadedCheckpoint stopped(split / "last.pt");
  EXPECT_LT(stopped.meta().step, 48) << "the signal came before the end";
  const auto b = trainer_cli("--resume " + (split / "last.pt").string());
  ASSERT_EQ(b.exit_code, 0) << b.output;
  expect_same_weights(*load_weights(straight / "last.pt"), *load_weights(split / "last.pt"), "after SIGINT + resume");
}

TEST(Resume, SigtermExits143AndASecondSignalExitsAtOnceKeepingTheLastCheckpoint) {
  SmallRun run(json{{"train", {{"epochs", 3}, {"log_every", 1}}}});
  const auto term = interrupt_run(run, run.dir / "term", 1, "TERM", logged_a_step(run.dir / "term"));
  EXPECT_NE(term.output.find("rc=143"), std::string::npos) << term.output;
  EXPECT_NE(term.output.find("stopped by SIGTERM"), std::string::npos) << term.output;
  // resnet18 steps take long enough on 2 cores that the second signal lands inside one.
  SmallRun slow(json{{"model", {{"arch", "resnet18"}, {"stem", "small"}}},
                     {"train", {{"epochs", 3}, {"log_every", 1}, {"checkpoint_every_steps", 1}}}});
  const fs::path out = slow.dir / "twice";
  const auto twice = interrupt_run(slow, out, 2, "INT", "test -f " + (out / "last.pt").string());
  EXPECT_NE(twice.output.find("rc=130"), std::string::npos) << twice.output;
  EXPECT_NE(twice.output.find("second signal: exiting at once"), std::string::npos) << twice.output;
  // last.pt is a whole checkpoint: the one written before the second signal.
  const LoadedCheckpoint kept(out / "last.pt");
  EXPECT_GE(kept.meta().step, 1);
  EXPECT_NO_THROW(kept.restore_model(*load_weights(out / "last.pt")));
}

TEST(Resume, StepCheckpointsAreKeptAsConfiguredWithEpochAndBestFiles) {
  SmallRun run(json{
      {"train", {{"checkpoint_every_steps", 3}, {"keep_last", 2}, {"keep_every_epochs", 1}, {"best_metric", "loss"}}}});
  const fs::path out = run.dir / "r";
  const auto r = trainer_cli("--config " + run.config.string() + " -o " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> steps;
  for (const auto& e : fs::directory_iterator(out))
    if (e.path().filename().string().rfind("step-", 0) == 0) steps.push_back(e.path().filename().string());
  std::sort(steps.begin(), steps.end());
  // 32 steps: step checkpoints at 3, 6, ..., 30 except the epoch ends; the newest two remain.
  EXPECT_EQ(steps, (std::vector<std::string>{"step-27.pt", "step-30.pt"}));
  EXPECT_EQ(LoadedCheckpoint(out / "step-30.pt").meta().step, 30);
  EXPECT_EQ(LoadedCheckpoint(out / "step-27.pt").meta().step, 27);
  EXPECT_EQ(LoadedCheckpoint(out / "epoch-1.pt").meta().epoch, 1);
  EXPECT_EQ(LoadedCheckpoint(out / "epoch-2.pt").meta().epoch, 2);
  EXPECT_EQ(LoadedCheckpoint(out / "last.pt").meta().step, 32);
  const LoadedCheckpoint best(out / "best.pt");
  ASSERT_TRUE(best.meta().best.has_value());
  EXPECT_GT(*best.meta().best, 0.0) << "best_metric loss: the lowest eval loss";
}

TEST(Resume, ChangingTheOptimizerOrDataKindIsRefusedOtherChangesAreListed) {
  SmallRun run(json{{"train", {{"epochs", 1}}}});
  const fs::path out = run.dir / "r";
  ASSERT_EQ(trainer_cli("--config " + run.config.string() + " -o " + out.string()).exit_code, 0);
  const std::string last = (out / "last.pt").string();
  auto r = trainer_cli("--resume " + last + " --set optim.name=adamw --set train.epochs=2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("cannot continue with optim.name: \"sgd\" -> \"adamw\""), std::string::npos) << r.output;
  r = trainer_cli("--resume " + last + " --set data.kind=synthetic --set train.epochs=2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("cannot continue with data.kind"), std::string::npos) << r.output;
  // A different parameter grouping cannot take the saved optimizer state; the error says how to resume.
  r = trainer_cli("--resume " + last + " --set train.epochs=2 --set optim.decay_norm_and_bias=true");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("optimizer state does not fit"), std::string::npos) << r.output;
  r = trainer_cli("--resume " + last + " --set train.epochs=2 --set train.log_every=2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resume: config change train.epochs: 1 -> 2 (allowed)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("resume: config change train.log_every: 4 -> 2 (allowed)"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace trainer
