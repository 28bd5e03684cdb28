#include <gtest/gtest.h>

#include <functional>

#include "support/fixtures.hpp"
#include "support/image_folder_fixture.hpp"
#include "trainer/data/device/model_input.hpp"
#include "trainer/data/loader/batch_dataset.hpp"
#include "trainer/data/loader/loaders.hpp"
#include "trainer/data/pixels/image_decode.hpp"
#include "trainer/data/sources/folder_source.hpp"
#include "trainer/engine/evaluate.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/util/error.hpp"

namespace trainer {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

DataConfig folder_config(const fs::path& root, int64_t size = 16) {
  DataConfig d;
  d.kind = DataKind::imagenet;
  d.root = root.string();
  d.augment.image_size = size;
  d.augment.eval_resize = size + size / 7;
  return d;
}

torch::Tensor epoch_images(std::shared_ptr<const ImageSource> source, int64_t epoch, size_t workers) {
  auto loader = make_loader(BatchDataset(source, false, {5, epoch}, nullptr),
                            EpochSampler({source->size(), 4, 5, epoch, true, false, 0}), 4, workers, 3);
  std::vector<torch::Tensor> batches;
  for_each_batch(*loader, [&](ImageBatch& b) {
    batches.push_back(b.images);
    return true;
  });
  return torch::cat(batches);
}

TEST(FolderSource, ReadsTheTrainAndValSplitsOfAnImageNetLayout) {
  TempDir dir;
  testing::write_image_folder(dir.path());
  const auto train = open_image_folder(folder_config(dir.path()), true, 3, 3);
  EXPECT_EQ(train->size(), 12u);
  EXPECT_EQ(train->class_names(), (std::vector<std::string>{"n0", "n1", "n2"}));
  EXPECT_EQ(train->label(0), 0);
  EXPECT_EQ(train->label(11), 2);
  EXPECT_EQ(train->shape().height, 16);
  EXPECT_EQ(train->shape().channels, 3);
  const auto val = open_image_folder(folder_config(dir.path()), false, 3, 3);
  EXPECT_EQ(val->size(), 6u);
  EXPECT_EQ(val->label(5), 2);
  // Class 0's colour is red (BGR 40,40,220 in the file): RGB puts it in channel 0.
  const Sample s = val->read(0);
  const cv::Vec3b px = s.image.at<cv::Vec3b>(8, 8);
  EXPECT_GT(px[0], 150);
  EXPECT_LT(px[2], 100);
  const auto grey = open_image_folder(folder_config(dir.path()), true, 3, 1);
  EXPECT_EQ(grey->read(1).image.channels(), 1);  // a PNG, decoded as grey
  EXPECT_NE(testing::error_of<DataError>([&] {
              open_image_folder(folder_config(dir.path()), true, 5, 3);
            }).find("3 classes, but model.num_classes is 5"),
            std::string::npos);
}

TEST(FolderSource, ValClassFoldersAreUsedWhenThereIsNoLabelFile) {
  TempDir dir;
  testing::write_image_folder(dir.path(), {3, 2, 2, /*val_label_file=*/false});
  const auto val = open_image_folder(folder_config(dir.path()), false, 3, 3);
  EXPECT_EQ(val->size(), 6u);
  EXPECT_EQ(val->label(2), 1);
  fs::remove_all(dir / "val" / "n2");
  EXPECT_NE(testing::error_of<DataError>([&] {
              open_image_folder(folder_config(dir.path()), false, 3, 3);
            }).find("same 3 class folders"),
            std::string::npos);
  DataConfig missing = folder_config(dir.path());
  missing.train_dir = "nope";
  EXPECT_NE(testing::error_of<DataError>([&] { open_image_folder(missing, true, 3, 3); }).find("nope: no such folder"),
            std::string::npos);
}

TEST(FolderSource, ClassNamesFileGivesReadableNames) {
  TempDir dir;
  testing::write_image_folder(dir.path());
  testing::write_text(dir / "synsets.txt", "n0 tench, Tinca tinca\nn2 goldfish\n");
  DataConfig d = folder_config(dir.path());
  d.class_names_file = "synsets.txt";
  EXPECT_EQ(open_image_folder(d, true, 3, 3)->class_names(),
            (std::vector<std::string>{"tench, Tinca tinca", "n1", "goldfish"}));
}

TEST(FolderSource, SamplesArePureFunctionsOfSeedEpochAndIndex) {
  TempDir dir;
  testing::write_image_folder(dir.path());
  const auto train = open_image_folder(folder_config(dir.path()), true, 3, 3);
  const torch::Tensor serial = epoch_images(train, 2, 0);
  EXPECT_TRUE(torch::equal(serial, epoch_images(train, 2, 1)));
  EXPECT_TRUE(torch::equal(serial, epoch_images(train, 2, 3)));
  EXPECT_FALSE(torch::equal(serial, epoch_images(train, 3, 2))) << "a new epoch draws new crops";
  const Sample a = train->read(4, {5, 2}), b = train->read(4, {5, 2}), c = train->read(4, {6, 2});
  EXPECT_EQ(cv::norm(a.image, b.image, cv::NORM_INF), 0);
  EXPECT_GT(cv::norm(a.image, c.image, cv::NORM_INF), 0) << "another seed, another crop";
  const auto val = open_image_folder(folder_config(dir.path()), false, 3, 3);
  EXPECT_EQ(cv::norm(val->read(1, {1, 0}).image, val->read(1, {9, 4}).image, cv::NORM_INF), 0)
      << "eval is deterministic";
}

TEST(FolderSource, ReducedDecodeMatchesFullDecodeClosely) {
  TempDir dir;
  const fs::path cls = dir / "train" / "n0";
  fs::create_directories(cls);
  cv::imwrite((cls / "big.jpg").string(), testing::class_image(0, 640, 480, 1));
  DataConfig d = folder_config(dir.path(), 64);
  d.augment.scale = {0.9, 1.0};  // crops >= 64 * 4 px: decodes at 1/4 or 1/2
  const auto reduced = open_image_folder(d, true, 1, 3);
  d.decode_reduce = DecodeReduce::off;
  const auto full = open_image_folder(d, true, 1, 3);
  for (int64_t epoch = 0; epoch < 4; ++epoch) {
    const Sample r = reduced->read(0, {1, epoch}), f = full->read(0, {1, epoch});
    const double mean_abs = cv::norm(r.image, f.image, cv::NORM_L1) / static_cast<double>(r.image.total() * 3);
    EXPECT_LT(mean_abs, 6.0) << "epoch " << epoch;
  }
}

TEST(FolderSource, BadImagesAreReplacedCountedAndLimited) {
  TempDir dir;
  testing::write_image_folder(dir.path(), {2, 5, 1, true});
  const fs::path corrupt = dir / "train" / "n0" / "img0.JPEG", truncated = dir / "train" / "n1" / "img2.JPEG";
  testing::write_text(corrupt, "not an image at all");
  auto bytes = read_file_bytes(truncated);
  bytes.resize(bytes.size() / 2);
  testing::write_bytes(truncated, bytes, false);
  const auto train = open_image_folder(folder_config(dir.path()), true, 2, 3);
  ASSERT_EQ(train->size(), 10u);
  std::vector<size_t> all(10);
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;

  auto bad = std::make_shared<BadSamples>("train", train->size(), 0.2, nullptr);
  const ImageBatch batch = BatchDataset(train, false, {3, 1}, bad).get_batch(all);
  EXPECT_EQ(bad->distinct(), 2u);
  EXPECT_EQ(bad->take_failed_reads(), 2u);
  EXPECT_EQ(bad->take_failed_reads(), 0u);
  // The replacement of sample 0 is another sample, rendered and labelled as that sample.
  const ImageBatch again = BatchDataset(train, false, {3, 1}, bad).get_batch(all);
  EXPECT_TRUE(torch::equal(batch.images, again.images)) << "replacements are deterministic";
  EXPECT_EQ(bad->distinct(), 2u) << "each bad file counts once";
  bool found = false;
  for (size_t j = 1; j < 10 && !found; ++j)
    if (j != 7 && torch::equal(batch.images[0], batch.images[static_cast<int64_t>(j)])) {
      found = true;
      EXPECT_EQ(batch.labels[0].item<int64_t>(), train->label(j));
    }
  EXPECT_TRUE(found) << "slot 0 holds a copy of another sample of this batch";

  auto strict = std::make_shared<BadSamples>("train", train->size(), 0.1, nullptr);  // 1 of 10 allowed
  const std::string error = testing::error_of<DataError>([&] {
    BatchDataset(train, false, {3, 1}, strict).get_batch(all);
  });
  EXPECT_NE(error.find("2 of the 10 train images could not be read, more than data.max_bad_fraction (0.1, 1 images)"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("img2.JPEG: truncated JPEG"), std::string::npos) << error;
  EXPECT_NE(
      testing::error_of<DataError>([&] { BatchDataset(train, false).get_batch({0}); }).find("img0.JPEG: not a JPEG, PNG"),
      std::string::npos);
}

TEST(FolderSource, EvalDropsUnreadableImagesInsteadOfCountingDuplicates) {
  TempDir dir;
  testing::write_image_folder(dir.path(), {3, 2, 4, false});  // val/<class>/: removing a file removes its entry
  const fs::path corrupt = dir / "val" / "n1" / "ILSVRC2012_val_6.JPEG";
  testing::write_text(corrupt, "not an image");
  const DataConfig d = folder_config(dir.path());
  const auto val = open_image_folder(d, false, 3, 3);
  ASSERT_EQ(val->size(), 12u);

  // BadSlot::drop: the slot is zeroed and labelled kDroppedLabel; the failure is recorded once.
  std::vector<size_t> all(12);
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  auto bad = std::make_shared<BadSamples>("eval", val->size(), 0.2, nullptr);
  const ImageBatch batch = BatchDataset(val, false, {}, bad, BadSlot::drop).get_batch(all);
  EXPECT_EQ(bad->distinct(), 1u);
  int64_t dropped_slot = -1;
  for (int64_t b = 0; b < 12; ++b)
    if (batch.labels[b].item<int64_t>() == kDroppedLabel) dropped_slot = b;
  ASSERT_GE(dropped_slot, 0);
  EXPECT_EQ(val->label(static_cast<size_t>(dropped_slot)), 1);
  EXPECT_EQ(batch.images[dropped_slot].sum().item<int64_t>(), 0);

  // evaluate() over the folder with the bad file gives the figures of the folder without it.
  ModelConfig m;
  m.num_classes = 10;
  m.arch = "resnet18";
  m.stem = StemKind::small;
  m.num_classes = 3;
  m.in_channels = 3;
  torch::manual_seed(3);
  auto model = build_model(m, val->shape());
  EvalOptions options;
  options.batch_size = 5;  // the dropped slot sits inside a batch, not at its end
  options.norm = make_normalization({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}, 3, torch::kCPU);
  options.bad = std::make_shared<BadSamples>("eval", val->size(), 0.2, nullptr);
  const EvalResult with_bad = evaluate(*model, val, options);
  fs::remove(corrupt);
  options.bad = nullptr;
  const EvalResult without = evaluate(*model, open_image_folder(d, false, 3, 3), options);
  EXPECT_EQ(with_bad.count, 11);
  EXPECT_EQ(with_bad.dropped, 1);
  EXPECT_EQ(with_bad.read, 12);
  EXPECT_EQ(without.count, 11);
  EXPECT_EQ(without.dropped, 0);
  EXPECT_EQ(with_bad.correct1, without.correct1);
  EXPECT_EQ(with_bad.correct5, without.correct5);
  EXPECT_NEAR(with_bad.loss_sum, without.loss_sum, 1e-4 * std::abs(without.loss_sum));
  EXPECT_GT(with_bad.loss_sum, 0.0);
}

}  // namespace
}  // namespace trainer
