#include <gtest/gtest.h>

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

// resnet18 with the small stem on 32 px crops of a 3-class ImageNet-layout folder: 12 train, 6 val images.
// model.num_classes is left to the data, as the shipped folder configs do.
struct FolderRun {
  TempDir dir;
  fs::path config;
  explicit FolderRun(json overrides = json::object(), ImageFolderSpec spec = {}) {
    write_image_folder(dir / "imagenet", spec);
    json c = testing::small_folder_config(dir / "imagenet");
    c.merge_patch(overrides);
    config = dir / "config.json";
    write_text(config, c.dump(2));
  }
};

std::map<std::string, torch::Tensor> weights(const fs::path& checkpoint) {
  const LoadedCheckpoint ck(checkpoint);
  auto model = build_model(resolve_config(ck.meta().config).model, {32, 32, 3});
  ck.restore_model(*model);
  std::map<std::string, torch::Tensor> out;
  for (const auto& p : model->named_parameters()) out[p.key()] = p.value();
  for (const auto& b : model->named_buffers()) out[b.key()] = b.value();
  return out;
}

TEST(ImageNetLayout, TrainEvalAndResumeEndToEnd) {
  FolderRun run;
  const fs::path straight = run.dir / "straight", split = run.dir / "split";
  const auto a = trainer_cli("--config " + run.config.string() + " -o " + straight.string());
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("(12 images, 3 classes; random resized crop 32, flip, reduced JPEG decode)"),
            std::string::npos)
      << a.output;
  EXPECT_NE(a.output.find("resize 37, center crop 32"), std::string::npos) << a.output;  // round(32 / 0.875)
  const json resolved = json::parse(read_text(straight / "config.resolved.json"));
  EXPECT_EQ(resolved["data"]["mean"], json({0.485, 0.456, 0.406}));
  EXPECT_EQ(resolved["data"]["augment"]["eval_resize"], 37);
  EXPECT_NE(a.output.find("model.num_classes 3 (from the training data)"), std::string::npos) << a.output;
  EXPECT_EQ(resolved["model"]["num_classes"], 3);
  EXPECT_EQ(LoadedCheckpoint(straight / "last.pt").meta().config["model"]["num_classes"], 3);
  // The config file, still without the count, evaluates the checkpoint: it means the 3 the run resolved.
  const auto eval =
      trainer_cli("eval --checkpoint " + (straight / "last.pt").string() + " --config " + run.config.string());
  EXPECT_EQ(eval.exit_code, 0) << eval.output;

  const auto b1 = trainer_cli("--config " + run.config.string() + " -o " + split.string() + " --stop-after-epoch 1");
  ASSERT_EQ(b1.exit_code, 0) << b1.output;
  const auto b2 = trainer_cli("--resume " + (split / "last.pt").string());
  ASSERT_EQ(b2.exit_code, 0) << b2.output;
  const auto wa = weights(straight / "last.pt"), wb = weights(split / "last.pt");
  ASSERT_EQ(wa.size(), wb.size());
  for (const auto& [name, value] : wa) EXPECT_TRUE(torch::equal(value, wb.at(name))) << name << " differs after resume";

  const auto e = trainer_cli("eval --checkpoint " + (straight / "best.pt").string());
  ASSERT_EQ(e.exit_code, 0) << e.output;
  EXPECT_NE(e.output.find("6 images"), std::string::npos) << e.output;
}

TEST(ImageNetLayout, SmokeRunsOnAFolder) {
  FolderRun run;
  const auto r = trainer_cli("--config " + run.config.string() + " --smoke");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("smoke test passed"), std::string::npos) << r.output;
}

TEST(ImageNetLayout, BadImagesAreSkippedAndLoggedOrStopTheRunPastTheLimit) {
  FolderRun run(json{{"data", {{"max_bad_fraction", 0.1}}}, {"train", {{"epochs", 1}}}});
  const fs::path bad = run.dir / "imagenet" / "train" / "n1" / "img0.JPEG";
  write_text(bad, "this is not a JPEG");
  const auto ok = trainer_cli("--config " + run.config.string() + " -o " + (run.dir / "ok").string());
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("skipped: " + bad.string() + ": not a JPEG, PNG, BMP, WebP, PNM or TIFF image"),
            std::string::npos)
      << ok.output;
  EXPECT_NE(ok.output.find("epoch 1: 1 unreadable training image(s) replaced by others (1 distinct so far)"),
            std::string::npos)
      << ok.output;
  // Eval leaves an unreadable val image out of its figures.
  write_text(run.dir / "imagenet" / "val" / "ILSVRC2012_val_2.JPEG", "truncated");
  const auto e =
      trainer_cli("eval --checkpoint " + (run.dir / "ok" / "last.pt").string() + " --set data.max_bad_fraction=0.2");
  ASSERT_EQ(e.exit_code, 0) << e.output;
  EXPECT_NE(e.output.find("1 unreadable image(s) left out; the figures cover the other 5"), std::string::npos)
      << e.output;
  EXPECT_NE(e.output.find(": 5 images, loss"), std::string::npos) << e.output;
  const auto stop = trainer_cli("--config " + run.config.string() + " -o " + (run.dir / "stop").string() +
                                " --set data.max_bad_fraction=0");
  EXPECT_EQ(stop.exit_code, 2) << stop.output;
  EXPECT_NE(stop.output.find("data: 1 of the 12 train images could not be read, more than data.max_bad_fraction (0, 0 "
                             "images) allows"),
            std::string::npos)
      << stop.output;
}

TEST(ImageNetLayout, LayoutMistakesAreExit2BeforeTraining) {
  FolderRun run;
  const fs::path labels = run.dir / "imagenet" / "val_label.txt";
  write_text(labels, "ILSVRC2012_val_1.JPEG 0\r\nILSVRC2012_val_2.JPEG 7\r\n");
  auto r = trainer_cli("--config " + run.config.string() + " -o " + (run.dir / "a").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(labels.string() + ":2: class index \"7\" is not in [0, 3)"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(run.dir / "a" / "last.pt"));
  r = trainer_cli("--config " + run.config.string() + " -o " + (run.dir / "b").string() + " --set model.num_classes=4");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("3 classes, but model.num_classes is 4 (leave model.num_classes out, or 0, to take the "
                          "folder's count)"),
            std::string::npos)
      << r.output;
  fs::remove_all(run.dir / "imagenet" / "train");
  r = trainer_cli("--config " + run.config.string() + " -o " + (run.dir / "c").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find((run.dir / "imagenet" / "train").string() + ": no such folder"), std::string::npos)
      << r.output;
}

// doctor reads a sample of the files as the first epoch will and sets the rate beside the decoders' (a slow disk or
// an antivirus scanning every JPEG is named, not guessed); the folder's name is in another script, with a space.
TEST(ImageNetLayout, DoctorMeasuresTheDiskAgainstTheDecoders) {
  FolderRun run;
  const fs::path data = run.dir / fs::u8path(u8"数据 集");
  fs::rename(run.dir / "imagenet", data);
  const auto r = trainer_cli("doctor --config " + run.config.string() + " --set 'data.root=" + utf8(data) + "' -o " +
                             (run.dir / "r").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const size_t line = r.output.find(" disk ");
  ASSERT_NE(line, std::string::npos) << r.output;
  const std::string disk = r.output.substr(line, r.output.find('\n', line) - line);
  EXPECT_NE(disk.find("read 12 files in "), std::string::npos) << disk;
  EXPECT_NE(disk.find(" files/s, "), std::string::npos) << disk;
  EXPECT_NE(disk.find(" MB/s; 2 worker(s) decode about "), std::string::npos) << disk;
  EXPECT_NE(r.output.find("12/12 sampled images read"), std::string::npos) << r.output;
}

TEST(ImageNetLayout, BenchDataTimesThePipelineAndTheDecodeCeiling) {
  FolderRun run;  // 12 train images, batches of 4, 3 per epoch: 9 batches cross two epoch boundaries
  auto r = trainer_cli("bench data --config " + run.config.string() +
                       " --set data.prefetch=2 --warmup 1 --batches 9 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The JSON is the last line (objects nest in it: parse from the line's start).
  auto last_line = [](const std::string& text) {
    const auto at = text.rfind("\n{");
    return text.substr(at == std::string::npos ? text.find('{') : at + 1);
  };
  json out = json::parse(last_line(r.output));
  EXPECT_EQ(out["mode"], "pipeline");
  // Where the workers' time went: every worker read images, and at most the files' pixels were decoded.
  ASSERT_FALSE(out["stages"]["workers"].empty()) << out.dump();
  for (const auto& w : out["stages"]["workers"]) {
    EXPECT_GT(w["images"].get<int64_t>(), 0);
    EXPECT_GT(w["median_ms"]["decode"].get<double>(), 0.0);
    EXPECT_GT(w["decoded_pixel_share"].get<double>(), 0.0);
    EXPECT_LE(w["decoded_pixel_share"].get<double>(), 1.0);
  }
  EXPECT_EQ(out["images"], 36);
  EXPECT_EQ(out["warmup"], 1);
  EXPECT_GT(out["first_batch_s"].get<double>(), 0.0);
  EXPECT_EQ(out["bad_images"], 0);
  // Batches are written again, not allocated: 2 in flight, 1 with the consumer and 1 the consumer is letting go
  // make 4 blocks at most for 10 batches or more (those in flight at the end included); one float input.
  const json& memory = out["memory"];
  EXPECT_GE(memory["batches_made"].get<int64_t>(), 10) << memory.dump();
  EXPECT_GE(memory["new_batch_blocks"].get<int64_t>(), 1) << memory.dump();
  EXPECT_LE(memory["new_batch_blocks"].get<int64_t>(), 4) << memory.dump();
  EXPECT_EQ(memory["new_input_blocks"], 1) << memory.dump();
  EXPECT_GE(memory["page_faults_per_batch"].get<double>(), 0.0) << memory.dump();  // known on Linux
  EXPECT_GT(out["images_per_s"].get<double>(), 0.0);
  EXPECT_GE(out["normalize_ms_per_batch"].get<double>(), 0.0);
  r = trainer_cli("bench data --config " + run.config.string() + " --set data.prefetch=2 --decode-only --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  out = json::parse(last_line(r.output));
  EXPECT_EQ(out["warmup"], 4) << "by default, the batches the pipeline takes to fill up: prefetch + 2";
  EXPECT_EQ(out["mode"], "decode_only");
  EXPECT_EQ(out["images"], 12);
  EXPECT_GT(out["images_per_s"].get<double>(), 0.0);
  r = trainer_cli("bench data --config " + run.config.string() + " --batches 0");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--batches must be >= 1"), std::string::npos) << r.output;
  r = trainer_cli("bench data --config " + run.config.string() + " --warmup -2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--warmup >= 0"), std::string::npos) << r.output;
  r = trainer_cli("bench data --config " + run.config.string() +
                  " --decode-only --set data.kind=synthetic --set data.synthetic.channels=3");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--decode-only times the decode of image files; data.kind synthetic has none"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace trainer
