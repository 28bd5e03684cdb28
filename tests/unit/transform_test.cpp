#include <gtest/gtest.h>

#include <opencv2/imgproc.hpp>

#include <cmath>

#include "trainer/data/pixels/transform.hpp"

namespace trainer {
namespace {

TransformSpec train_spec() {
  TransformSpec s;
  s.size = 224;
  return s;
}

TEST(RandomResizedCrop, BoxesFollowTorchvisionsRanges) {
  const TransformSpec spec = train_spec();
  const int64_t h = 375, w = 500;
  double area_sum = 0, ratio_min = 10, ratio_max = 0, flips = 0;
  const int n = 4000;
  for (int i = 0; i < n; ++i) {
    const SamplePlan p = plan_sample(spec, h, w, static_cast<uint64_t>(i));
    const CropBox& b = p.box;
    ASSERT_EQ(b.left, std::floor(b.left));  // whole pixels, as torchvision's (i, j, h, w)
    ASSERT_GE(b.left, 0);
    ASSERT_GE(b.top, 0);
    ASSERT_LE(b.left + b.width, w);
    ASSERT_LE(b.top + b.height, h);
    const double area = b.width * b.height / static_cast<double>(h * w);
    // Rounding each side to whole pixels moves the area and ratio a little past the sampled ranges.
    ASSERT_GE(area, 0.08 * 0.97);
    ASSERT_LE(area, 1.0);
    const double ratio = b.width / b.height;
    ratio_min = std::min(ratio_min, ratio);
    ratio_max = std::max(ratio_max, ratio);
    ASSERT_GE(ratio, 0.75 * 0.97);
    ASSERT_LE(ratio, 4.0 / 3.0 * 1.03);
    area_sum += area;
    flips += p.flip;
  }
  // Uniform area in [0.08, 1] has mean 0.54; attempts that do not fit (large areas at extreme ratios) are
  // redrawn, which pulls the mean down: torchvision 0.14's get_params gives 0.4348 on 500x375 (20000 draws).
  EXPECT_NEAR(area_sum / n, 0.435, 0.015);
  EXPECT_LT(ratio_min, 0.77);
  EXPECT_GT(ratio_max, 1.30);
  EXPECT_NEAR(flips / n, 0.5, 0.03);
}

TEST(RandomResizedCrop, FallsBackToTheCenterClampedToTheRatioRange) {
  TransformSpec spec = train_spec();
  spec.scale_min = 0.9;  // no 90% crop fits a 10:1 image at ratios 3/4..4/3: all ten attempts fail
  SplitMix64 rng(1);
  CropBox wide = random_resized_crop(100, 1000, spec, rng);
  EXPECT_EQ(wide.left, 433);  // w = round(100 * 4/3) = 133, left = (1000 - 133) / 2
  EXPECT_EQ(wide.top, 0);
  EXPECT_EQ(wide.width, 133);
  EXPECT_EQ(wide.height, 100);
  CropBox tall = random_resized_crop(1000, 100, spec, rng);
  EXPECT_EQ(tall.left, 0);
  EXPECT_EQ(tall.top, 433);
  EXPECT_EQ(tall.width, 100);
  EXPECT_EQ(tall.height, 133);
  spec.scale_min = 1.0;  // full-area crops of a square fit only at ratio ~1; the fallback is the whole image
  for (uint64_t seed = 0; seed < 20; ++seed) {
    SplitMix64 r(seed);
    const CropBox whole = random_resized_crop(300, 300, spec, r);
    EXPECT_EQ(whole.left, 0);
    EXPECT_EQ(whole.top, 0);
    EXPECT_EQ(whole.width, 300);
    EXPECT_EQ(whole.height, 300);
  }
}

TEST(ResizeCenterCrop, MatchesTorchvisionsResizeThenCenterCrop) {
  TransformSpec spec = train_spec();
  spec.train = false;
  spec.resize = 256;
  // 500x375 (w x h): Resize(256) gives 341x256 (int(256 * 500 / 375)), CenterCrop(224) starts at
  // (round(58.5) = 58, 16). In source pixels that is x = 58 * 500/341, width 224 * 500/341.
  const CropBox b = resize_center_crop(375, 500, spec);
  EXPECT_NEAR(b.left, 58.0 * 500 / 341, 1e-9);
  EXPECT_NEAR(b.top, 16.0 * 375 / 256, 1e-9);
  EXPECT_NEAR(b.width, 224.0 * 500 / 341, 1e-9);
  EXPECT_NEAR(b.height, 224.0 * 375 / 256, 1e-9);
  const SamplePlan p = plan_sample(spec, 375, 500, 7);
  EXPECT_FALSE(p.flip);
  EXPECT_EQ(p.box.left, b.left);
  EXPECT_EQ(plan_sample(spec, 375, 500, 8).box.left, b.left);  // eval ignores the seed
}

TEST(DecodeReduction, PicksTheLargestScaleThatKeepsTheCropAtTheOutputSize) {
  TransformSpec spec = train_spec();
  auto reduction = [&](double w, double h) { return decode_reduction({{0, 0, w, h}, false, {}}, spec); };
  EXPECT_EQ(reduction(2000, 1800), 8);
  EXPECT_EQ(reduction(1000, 900), 4);  // 1000/8 = 125 < 224, 900/4 = 225 >= 224
  EXPECT_EQ(reduction(448, 448), 2);
  EXPECT_EQ(reduction(447, 2000), 1);  // 447 / 2 < 224
  spec.reduce = false;
  EXPECT_EQ(reduction(2000, 1800), 1);
}

TEST(Render, CropsTheBoxAtAnyDecodeScaleFlipsAndTurnsBgrIntoRgb) {
  TransformSpec spec;
  spec.size = 4;
  spec.interpolation = Interpolation::nearest;
  // Source 8x8: left half blue (BGR 255,0,0), right half red (0,0,255).
  cv::Mat full(8, 8, CV_8UC3, cv::Scalar(255, 0, 0));
  full(cv::Rect(4, 0, 4, 8)).setTo(cv::Scalar(0, 0, 255));
  cv::Mat half;
  cv::resize(full, half, cv::Size(4, 4), 0, 0, cv::INTER_AREA);
  cv::Mat out(4, 4, CV_8UC3);
  const SamplePlan right{{4, 0, 4, 8}, false, {}};
  for (const cv::Mat* decoded : {&full, &half}) {
    render(whole_image(*decoded), 8, 8, right, spec, out);
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 4; ++c) ASSERT_EQ(out.at<cv::Vec3b>(r, c), cv::Vec3b(255, 0, 0)) << "red, as RGB";
  }
  const uchar* data = out.data;
  render(whole_image(full), 8, 8, {{0, 0, 8, 8}, true, {}}, spec, out);
  EXPECT_EQ(out.data, data) << "rendered in place";
  EXPECT_EQ(out.at<cv::Vec3b>(0, 0), cv::Vec3b(255, 0, 0)) << "flipped: red on the left";
  EXPECT_EQ(out.at<cv::Vec3b>(0, 3), cv::Vec3b(0, 0, 255));
}

}  // namespace
}  // namespace trainer
