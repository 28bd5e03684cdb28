#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>

#include "support/fixtures.hpp"
#include "support/image_folder_fixture.hpp"
#include "trainer/data/image_decode.hpp"
#include "trainer/util/error.hpp"

namespace trainer {
namespace {

std::vector<uint8_t> encode(const std::string& ext, const cv::Mat& image) {
  std::vector<uint8_t> bytes;
  EXPECT_TRUE(cv::imencode(ext, image, bytes));
  return bytes;
}

std::string decode_error(const std::vector<uint8_t>& bytes) {
  try {
    decode_image(bytes, probe_image(bytes), 3, 1, "/data/x.JPEG");
  } catch (const DataError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ImageDecode, ProbesJpegAndPngSizesFromTheHeader) {
  const cv::Mat image = testing::class_image(1, 64, 48, 0);
  const ImageInfo jpeg = probe_image(encode(".jpg", image));
  EXPECT_EQ(jpeg.format, ImageFormat::jpeg);
  EXPECT_EQ(jpeg.width, 64);
  EXPECT_EQ(jpeg.height, 48);
  EXPECT_FALSE(jpeg.truncated);
  const ImageInfo png = probe_image(encode(".png", image));
  EXPECT_EQ(png.format, ImageFormat::png);
  EXPECT_EQ(png.width, 64);
  EXPECT_EQ(png.height, 48);
  const ImageInfo bmp = probe_image(encode(".bmp", image));
  EXPECT_EQ(bmp.format, ImageFormat::other);
  EXPECT_EQ(bmp.height, 0);  // decoded to learn the size
  EXPECT_EQ(decode_image(encode(".bmp", image), bmp, 3, 2, "x.bmp").cols, 64);  // no reduction outside JPEG
}

TEST(ImageDecode, ReducedJpegDecodeScalesBothSides) {
  const auto bytes = encode(".jpg", testing::class_image(0, 64, 48, 0));
  const ImageInfo info = probe_image(bytes);
  for (int r : {1, 2, 4, 8}) {
    const cv::Mat m = decode_image(bytes, info, 3, r, "x.jpg");
    EXPECT_EQ(m.cols, 64 / r);
    EXPECT_EQ(m.rows, 48 / r);
    EXPECT_EQ(m.channels(), 3);
  }
  const cv::Mat full = decode_image(bytes, info, 3, 1, "x.jpg"), half = decode_image(bytes, info, 3, 2, "x.jpg");
  cv::Mat shrunk;
  cv::resize(full, shrunk, half.size(), 0, 0, cv::INTER_AREA);
  EXPECT_LT(cv::norm(shrunk, half, cv::NORM_L1) / static_cast<double>(half.total() * 3), 4.0) << "same picture";
}

TEST(ImageDecode, GreyAndAlphaImagesBecomeThreeChannels) {
  cv::Mat grey(20, 30, CV_8UC1, cv::Scalar(77));
  const cv::Mat g = decode_image(encode(".png", grey), probe_image(encode(".png", grey)), 3, 1, "g.png");
  ASSERT_EQ(g.channels(), 3);
  EXPECT_EQ(g.at<cv::Vec3b>(5, 5), cv::Vec3b(77, 77, 77));
  cv::Mat bgra(20, 30, CV_8UC4, cv::Scalar(10, 20, 30, 128));
  const auto bytes = encode(".png", bgra);
  const cv::Mat a = decode_image(bytes, probe_image(bytes), 3, 1, "a.png");
  ASSERT_EQ(a.channels(), 3);
  EXPECT_EQ(a.at<cv::Vec3b>(0, 0), cv::Vec3b(10, 20, 30));  // alpha dropped, as PIL's convert("RGB")
  const cv::Mat one = decode_image(bytes, probe_image(bytes), 1, 1, "a.png");
  EXPECT_EQ(one.channels(), 1);
  cv::Mat deep(10, 10, CV_16UC3, cv::Scalar(257 * 200, 0, 65535));
  const auto deep_bytes = encode(".png", deep);
  const cv::Mat d = decode_image(deep_bytes, probe_image(deep_bytes), 3, 1, "d.png");
  EXPECT_EQ(d.depth(), CV_8U);
  EXPECT_EQ(d.at<cv::Vec3b>(0, 0), cv::Vec3b(200, 0, 255));
}

TEST(ImageDecode, TruncatedAndCorruptFilesAreDataErrorsNamingTheFile) {
  auto bytes = encode(".jpg", testing::class_image(2, 64, 48, 3));
  auto cut = bytes;
  cut.resize(bytes.size() / 2);
  EXPECT_TRUE(probe_image(cut).truncated);
  EXPECT_NE(decode_error(cut).find("/data/x.JPEG: truncated JPEG"), std::string::npos) << decode_error(cut);
  const std::vector<uint8_t> garbage(500, 0x5A);
  EXPECT_NE(decode_error(garbage).find("/data/x.JPEG: cannot decode"), std::string::npos) << decode_error(garbage);
  testing::TempDir dir;
  try {
    read_file_bytes(dir / "missing.jpg");
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.jpg: cannot open"), std::string::npos);
  }
  testing::write_text(dir / "empty.jpg", "");
  EXPECT_THROW(read_file_bytes(dir / "empty.jpg"), DataError);
}

}  // namespace
}  // namespace trainer
