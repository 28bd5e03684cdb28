#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "support/fixtures.hpp"
#include "support/image_folder_fixture.hpp"
#include "trainer/data/pixels/image_decode.hpp"
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
  EXPECT_EQ(bmp.format, ImageFormat::bmp);
  EXPECT_EQ(decode_image(encode(".bmp", image), bmp, 3, 2, "x.bmp").cols, 64);  // no reduction outside JPEG
}

// Every format imdecode would pick by content is named and sized from its header before any decode: the formats
// ImageFolder lists are decoded, the others (JPEG 2000, Radiance HDR, ...) refused whatever the file's name.
TEST(ImageDecode, EveryFormatIsSizedFromItsHeaderAndOthersAreRefused) {
  const cv::Mat image = testing::class_image(1, 64, 48, 0);
  const std::vector<std::pair<std::string, ImageFormat>> formats{
      {".bmp", ImageFormat::bmp}, {".webp", ImageFormat::webp}, {".ppm", ImageFormat::pnm},
      {".pgm", ImageFormat::pnm}, {".pbm", ImageFormat::pnm},   {".tiff", ImageFormat::tiff}};
  cv::Mat grey;
  cv::cvtColor(image, grey, cv::COLOR_BGR2GRAY);
  for (const auto& [ext, format] : formats) {
    std::vector<uint8_t> bytes;
    if (!cv::imencode(ext, ext == ".pgm" || ext == ".pbm" ? grey : image, bytes)) continue;
    const ImageInfo info = probe_image(bytes);
    EXPECT_EQ(info.format, format) << ext;
    EXPECT_EQ(info.width, 64) << ext;
    EXPECT_EQ(info.height, 48) << ext;
    EXPECT_EQ(decode_image(bytes, info, 3, 1, "x.jpg").size(), cv::Size(64, 48)) << ext;
  }
  std::vector<uint8_t> lossless;  // WebP's lossless frame header
  ASSERT_TRUE(cv::imencode(".webp", image, lossless, {cv::IMWRITE_WEBP_QUALITY, 101}));
  EXPECT_EQ(probe_image(lossless).width, 64);
  EXPECT_EQ(probe_image(lossless).height, 48);
  for (const std::string ext : {".hdr", ".jp2", ".pfm", ".sr", ".pam"}) {
    std::vector<uint8_t> bytes;
    try {
      if (!cv::imencode(ext, ext == ".hdr" || ext == ".pfm" ? [&] {
            cv::Mat f;
            image.convertTo(f, CV_32F, 1.0 / 255);
            return f;
          }() : image, bytes))
        continue;
    } catch (const cv::Exception&) {  // an OpenCV built without that codec
      continue;
    }
    EXPECT_EQ(probe_image(bytes).format, ImageFormat::other) << ext;
    EXPECT_NE(decode_error(bytes).find("/data/x.JPEG: not a JPEG, PNG, BMP, WebP, PNM or TIFF image"),
              std::string::npos)
        << ext;
  }
  // A TIFF whose first directory declares 30000 x 30000 (2.7 GB decoded) is refused from its header.
  std::vector<uint8_t> tiff = encode(".tiff", image);
  const size_t directory = tiff[4] | tiff[5] << 8 | tiff[6] << 16 | static_cast<size_t>(tiff[7]) << 24;
  for (size_t e = 0, n = tiff[directory] | tiff[directory + 1] << 8; e < n; ++e) {
    const size_t at = directory + 2 + 12 * e;
    const int tag = tiff[at] | tiff[at + 1] << 8;
    if (tag == 256 || tag == 257) {  // SHORT or LONG: the low 16 bits first either way in little-endian
      tiff[at + 8] = 30000 & 0xFF;
      tiff[at + 9] = 30000 >> 8;
    }
  }
  EXPECT_EQ(probe_image(tiff).width, 30000);
  EXPECT_NE(decode_error(tiff).find("30000x30000 pixels, more than the 178956970"), std::string::npos)
      << decode_error(tiff);
}

// A PNM header read as OpenCV's PxM decoder reads it: the byte that ends a number is consumed with it, so "88816#8828"
// is two numbers, not one and a comment. The fuzz lane's 29-byte file had OpenCV allocate 2.4 GB past a probe that
// read 88816 x 16.
TEST(ImageDecode, APnmHeaderIsReadAsOpenCvReadsIt) {
  const std::string text("P4\n 88816#8828<88\0\0\0\0\0\0\0\0\n 16", 29);
  const std::vector<uint8_t> bytes(text.begin(), text.end());
  const ImageInfo info = probe_image(bytes);
  EXPECT_EQ(info.format, ImageFormat::pnm);
  EXPECT_EQ(info.width, 88816);
  EXPECT_EQ(info.height, 8828);
  EXPECT_NE(decode_error(bytes).find("88816x8828 pixels, more than the 178956970"), std::string::npos)
      << decode_error(bytes);
  const std::string commented = "P5\n# a comment\n4 # another\n3\n255\n" + std::string(12, '\x7f');
  const ImageInfo grey = probe_image({commented.begin(), commented.end()});
  EXPECT_EQ(grey.width, 4);
  EXPECT_EQ(grey.height, 3);
  EXPECT_EQ(decode_image({commented.begin(), commented.end()}, grey, 1, 1, "x.pgm").size(), cv::Size(4, 3));
}

// Each scan of a progressive JPEG is a pass over the whole image: past 500 the file is refused before decoding.
TEST(ImageDecode, AProgressiveJpegOfTooManyScansIsRefused) {
  const cv::Mat image = testing::class_image(1, 64, 48, 0);
  std::vector<uint8_t> progressive;
  ASSERT_TRUE(cv::imencode(".jpg", image, progressive, {cv::IMWRITE_JPEG_PROGRESSIVE, 1}));
  const ImageInfo info = probe_image(progressive);
  EXPECT_GT(info.scans, 1);
  EXPECT_LE(info.scans, kMostJpegScans);
  EXPECT_EQ(decode_image(progressive, info, 3, 1, "x.jpg").cols, 64);
  std::vector<uint8_t> many(progressive.begin(), progressive.end() - 2);  // before the end marker
  for (int i = 0; i < 600; ++i) many.insert(many.end(), {0xFF, 0xDA, 0x00, 0x02});
  many.insert(many.end(), {0xFF, 0xD9});
  EXPECT_EQ(probe_image(many).scans, info.scans + 600);
  EXPECT_NE(decode_error(many).find("x.JPEG: a progressive JPEG of " + std::to_string(info.scans + 600) +
                                    " scans, more than the 500"),
            std::string::npos)
      << decode_error(many);
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
  EXPECT_NE(decode_error(garbage).find("/data/x.JPEG: not a JPEG, PNG, BMP, WebP, PNM or TIFF image"),
            std::string::npos)
      << decode_error(garbage);
  auto png = encode(".png", testing::class_image(2, 64, 48, 3));  // a PNG header over damaged data
  std::fill(png.begin() + 40, png.end(), uint8_t{0x5A});
  EXPECT_NE(decode_error(png).find("/data/x.JPEG: cannot decode"), std::string::npos) << decode_error(png);
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

// An 8x8 CMYK JPEG as Pillow writes it (Adobe marker, 4 components): left half C=0 M=255 Y=255 K=0 (red),
// right half C=255 M=0 Y=255 K=0 (green). Pillow's own RGB conversion of it gives (255, 0, 0) and (0, 255, 0).
const std::vector<uint8_t> kCmykJpeg = {
    0xff, 0xd8, 0xff, 0xee, 0x00, 0x0e, 0x41, 0x64, 0x6f, 0x62, 0x65, 0x00, 0x64, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff,
    0xdb, 0x00, 0x43, 0x00, 0x02, 0x01, 0x01, 0x01, 0x01, 0x01, 0x02, 0x01, 0x01, 0x01, 0x02, 0x02, 0x02, 0x02, 0x02,
    0x04, 0x03, 0x02, 0x02, 0x02, 0x02, 0x05, 0x04, 0x04, 0x03, 0x04, 0x06, 0x05, 0x06, 0x06, 0x06, 0x05, 0x06, 0x06,
    0x06, 0x07, 0x09, 0x08, 0x06, 0x07, 0x09, 0x07, 0x06, 0x06, 0x08, 0x0b, 0x08, 0x09, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a,
    0x06, 0x08, 0x0b, 0x0c, 0x0b, 0x0a, 0x0c, 0x09, 0x0a, 0x0a, 0x0a, 0xff, 0xc0, 0x00, 0x14, 0x08, 0x00, 0x08, 0x00,
    0x08, 0x04, 0x43, 0x11, 0x00, 0x4d, 0x11, 0x00, 0x59, 0x11, 0x00, 0x4b, 0x11, 0x00, 0xff, 0xc4, 0x00, 0x1f, 0x00,
    0x00, 0x01, 0x05, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02,
    0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0xff, 0xc4, 0x00, 0xb5, 0x10, 0x00, 0x02, 0x01, 0x03, 0x03,
    0x02, 0x04, 0x03, 0x05, 0x05, 0x04, 0x04, 0x00, 0x00, 0x01, 0x7d, 0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12,
    0x21, 0x31, 0x41, 0x06, 0x13, 0x51, 0x61, 0x07, 0x22, 0x71, 0x14, 0x32, 0x81, 0x91, 0xa1, 0x08, 0x23, 0x42, 0xb1,
    0xc1, 0x15, 0x52, 0xd1, 0xf0, 0x24, 0x33, 0x62, 0x72, 0x82, 0x09, 0x0a, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x25, 0x26,
    0x27, 0x28, 0x29, 0x2a, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0x4a,
    0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x73, 0x74, 0x75,
    0x76, 0x77, 0x78, 0x79, 0x7a, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97,
    0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8,
    0xb9, 0xba, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9,
    0xda, 0xe1, 0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
    0xf9, 0xfa, 0xff, 0xda, 0x00, 0x0e, 0x04, 0x43, 0x00, 0x4d, 0x00, 0x59, 0x00, 0x4b, 0x00, 0x00, 0x3f, 0x00, 0x6f,
    0xfc, 0x1f, 0x39, 0xff, 0x00, 0x36, 0xbb, 0xff, 0x00, 0x73, 0xb7, 0xfe, 0xe0, 0x29, 0xbf, 0xf0, 0x63, 0x1f, 0xfc,
    0xdd, 0x17, 0xfd, 0xc9, 0x3f, 0xfb, 0x9f, 0xaf, 0xe7, 0xfe, 0xbf, 0x7f, 0x2b, 0xff, 0xd9,
};

// A few hundred bytes that declare 20036x18757 pixels (375 million): refused as PIL refuses it
// (DecompressionBombError), before anything is allocated, decoded or resampled. A PNG header the same.
TEST(ImageDecode, ImagesOverPilsDecompressionBombLimitAreRefused) {
  auto bytes = encode(".jpg", testing::class_image(1, 64, 48, 0));
  for (size_t i = 2; i + 9 < bytes.size(); ++i)
    if (bytes[i] == 0xFF && bytes[i + 1] == 0xC0) {  // the frame header: height, then width, big-endian
      bytes[i + 5] = 18757 >> 8, bytes[i + 6] = 18757 & 0xFF, bytes[i + 7] = 20036 >> 8, bytes[i + 8] = 20036 & 0xFF;
      break;
    }
  ASSERT_EQ(probe_image(bytes).width, 20036);
  EXPECT_EQ(decode_error(bytes),
            "data: /data/x.JPEG: 20036x18757 pixels, more than the 178956970 an image may have (PIL's "
            "decompression-bomb limit)");
  // 13,378 x 13,377 is 178,957,506 pixels, one row over; 13,377 x 13,378 minus one row is within it.
  EXPECT_THROW(check_image_pixels(13377, 13378, "x.png"), DataError);
  EXPECT_NO_THROW(check_image_pixels(13376, 13378, "x.png"));
}

TEST(ImageDecode, CmykJpegsBecomeThreeChannelColour) {
  const ImageInfo info = probe_image(kCmykJpeg);
  EXPECT_EQ(info.format, ImageFormat::jpeg);
  EXPECT_EQ(info.width, 8);
  EXPECT_EQ(info.height, 8);
  const cv::Mat image = decode_image(kCmykJpeg, info, 3, 1, "cmyk.jpg");
  ASSERT_EQ(image.channels(), 3);
  const auto near = [](cv::Vec3b got, cv::Vec3b want) { return cv::norm(got, want, cv::NORM_INF) <= 8; };
  EXPECT_TRUE(near(image.at<cv::Vec3b>(1, 1), {0, 0, 255})) << image.at<cv::Vec3b>(1, 1) << ": red as BGR";
  EXPECT_TRUE(near(image.at<cv::Vec3b>(6, 6), {0, 255, 0})) << image.at<cv::Vec3b>(6, 6) << ": green";
}

}  // namespace
}  // namespace trainer
