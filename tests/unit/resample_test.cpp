#include "trainer/data/pixels/resample.hpp"

#include <gtest/gtest.h>

namespace trainer {
namespace {

TEST(Resample, ShrinkWeighsNeighboursWithPillowsWidenedTriangleFilter) {
  // 4 -> 2 pixels: each output pixel spans two source pixels, so the triangle filter covers four of them;
  // Pillow's weights are (0.75, 0.75, 0.25) / 1.75 around the first centre and (0.25, 0.75, 0.75) / 1.75 at
  // the second, in 22-bit fixed point: (0*.75 + 100*.75 + 200*.25) / 1.75 = 71.4, (100*.25 + 200*.75 + 40*.75)
  // / 1.75 = 117.1, truncated after adding half of the last bit.
  const uint8_t row[4] = {0, 100, 200, 40};
  const cv::Mat src(1, 4, CV_8UC1, const_cast<uint8_t*>(row));
  cv::Mat out(1, 2, CV_8UC1);
  resample(src, ResampleFilter::bilinear, {0, 2.0}, {0, 1.0}, false, false, out);
  EXPECT_EQ(out.at<uint8_t>(0, 0), 71);
  EXPECT_EQ(out.at<uint8_t>(0, 1), 117);
  resample(src, ResampleFilter::bilinear, {0, 2.0}, {0, 1.0}, true, false, out);
  EXPECT_EQ(out.at<uint8_t>(0, 0), 117) << "mirrored";
  EXPECT_EQ(out.at<uint8_t>(0, 1), 71);
}

TEST(Resample, KeepsConstantsAndCopiesAtScaleOne) {
  cv::Mat flat(37, 53, CV_8UC3, cv::Scalar(10, 128, 250)), out(24, 24, CV_8UC3);
  for (ResampleFilter f : {ResampleFilter::bilinear, ResampleFilter::bicubic}) {
    resample(flat, f, {0, 53.0 / 24}, {0, 37.0 / 24}, false, false, out);
    for (int r = 0; r < out.rows; ++r)
      for (int c = 0; c < out.cols; ++c) ASSERT_EQ(out.at<cv::Vec3b>(r, c), cv::Vec3b(10, 128, 250));
    resample(flat, f, {0, 53.0 / 24}, {0, 37.0 / 24}, false, true, out);
    EXPECT_EQ(out.at<cv::Vec3b>(5, 5), cv::Vec3b(250, 128, 10)) << "channels swapped";
  }
  cv::Mat noise(24, 24, CV_8UC3), copy(24, 24, CV_8UC3);
  cv::randu(noise, 0, 256);
  for (ResampleFilter f : {ResampleFilter::bilinear, ResampleFilter::bicubic}) {
    resample(noise, f, {0, 1.0}, {0, 1.0}, false, false, copy);
    EXPECT_EQ(cv::norm(noise, copy, cv::NORM_INF), 0.0);
  }
  // `first` offsets into the resized image: a crop at (3, 2) of a same-size resize is a shifted copy.
  cv::Mat shifted(10, 10, CV_8UC3);
  resample(noise, ResampleFilter::bicubic, {3, 1.0}, {2, 1.0}, false, false, shifted);
  EXPECT_EQ(cv::norm(noise(cv::Rect(3, 2, 10, 10)), shifted, cv::NORM_INF), 0.0);
}

TEST(Resample, RefusesMismatchedTypes) {
  cv::Mat src(8, 8, CV_8UC3), gray(4, 4, CV_8UC1), wide(4, 4, CV_16UC3);
  EXPECT_THROW(resample(src, ResampleFilter::bilinear, {0, 2}, {0, 2}, false, false, gray), std::invalid_argument);
  EXPECT_THROW(resample(wide, ResampleFilter::bilinear, {0, 1}, {0, 1}, false, false, wide), std::invalid_argument);
}

}  // namespace
}  // namespace trainer
