// The partial JPEG decode against the whole decode: for every chroma layout libjpeg-turbo's region decode takes,
// baseline and progressive, with and without restart markers, at every DCT reduction, regions touching each edge
// and 1-17 pixels wide and high, the region's pixels equal the same pixels of OpenCV's whole decode, byte for
// byte; and a sample rendered from the region equals one rendered from the whole decode, on every transform path.
#include <gtest/gtest.h>

#include <jpeglib.h>
#include <cstdio>
#include <cstdlib>
#include <opencv2/imgcodecs.hpp>

#include <functional>
#include <random>
#include <thread>

#include "trainer/data/pixels/jpeg_region_decoder.hpp"
#include "trainer/data/pixels/sample_pixels.hpp"
#include "trainer/util/error.hpp"

namespace trainer {
namespace {

struct Layout {
  const char* name;
  int channels, h, v;  // the luma sampling factors (chroma 1x1)
};

// 4:4:4, 4:2:2, 4:2:0, 4:4:0 and grey.
const Layout kLayouts[] = {{"444", 3, 1, 1}, {"422", 3, 2, 1}, {"420", 3, 2, 2}, {"440", 3, 1, 2}, {"grey", 1, 1, 1}};

// Smooth colour gradients with noise on top: every block has detail, and the chroma varies from block to block.
cv::Mat test_image(int rows, int cols, int channels, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> noise(-40, 40);
  cv::Mat m(rows, cols, CV_8UC(channels));
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      for (int ch = 0; ch < channels; ++ch) {
        const int base = (ch == 0 ? 7 * r + 3 * c : ch == 1 ? 255 - 5 * c : 4 * (r + c) + 60) % 256;
        m.ptr<uint8_t>(r)[c * channels + ch] = static_cast<uint8_t>(std::clamp(base + noise(rng), 0, 255));
      }
  return m;
}

std::vector<uint8_t> encode_jpeg(const cv::Mat& image, const Layout& layout, bool progressive, int restart_interval) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buffer, &size);
  c.image_width = static_cast<JDIMENSION>(image.cols);
  c.image_height = static_cast<JDIMENSION>(image.rows);
  c.input_components = image.channels();
  c.in_color_space = image.channels() == 3 ? JCS_EXT_BGR : JCS_GRAYSCALE;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 85, TRUE);
  if (image.channels() == 3) {
    c.comp_info[0].h_samp_factor = layout.h;
    c.comp_info[0].v_samp_factor = layout.v;
    for (int k = 1; k < 3; ++k) c.comp_info[k].h_samp_factor = c.comp_info[k].v_samp_factor = 1;
  }
  if (progressive) jpeg_simple_progression(&c);
  c.restart_interval = static_cast<unsigned int>(restart_interval);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(image.ptr<uint8_t>(static_cast<int>(c.next_scanline)));
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::vector<uint8_t> bytes(buffer, buffer + size);
  std::free(buffer);
  return bytes;
}

// Regions of a w x h image: at each corner and edge, in the middle, one pixel, whole rows and columns, and sizes
// 1-17 at offsets around the 8- and 16-pixel block edges.
std::vector<PixelRegion> regions(int64_t w, int64_t h) {
  std::vector<PixelRegion> out = {{0, 0, w, h}, {0, 0, 1, 1}, {w - 1, h - 1, 1, 1}, {0, h - 1, w, 1}, {w - 1, 0, 1, h}};
  for (int64_t size = 1; size <= 17; ++size)
    for (int64_t left : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{8}, int64_t{15}, int64_t{16}, w - size})
      for (int64_t top : {int64_t{0}, int64_t{9}, h - size}) {
        const int64_t rw = std::min(size, w), rh = std::min(size + 2, h);
        const int64_t l = std::clamp<int64_t>(left, 0, w - rw), t = std::clamp<int64_t>(top, 0, h - rh);
        out.push_back({l, t, rw, rh});
      }
  return out;
}

// Differing bytes between the region decode and the same region of the whole decode.
size_t region_mismatch(JpegRegionDecoder& decoder, const std::vector<uint8_t>& bytes, const ImageInfo& info,
                       int channels, int reduction, const PixelRegion& r) {
  const cv::Mat whole = decode_image(bytes, info, channels, reduction, "whole.jpg");
  const DecodedPixels got = decoder.decode(bytes, info, channels, reduction, r, "region.jpg");
  EXPECT_EQ(got.full_width, whole.cols);
  EXPECT_EQ(got.full_height, whole.rows);
  const cv::Mat want = whole(cv::Rect(static_cast<int>(r.left), static_cast<int>(r.top), static_cast<int>(r.width),
                                      static_cast<int>(r.height)));
  if (got.pixels.size() != want.size() || got.pixels.type() != want.type()) return static_cast<size_t>(-1);
  cv::Mat diff;
  cv::compare(got.pixels, want, diff, cv::CMP_NE);
  return static_cast<size_t>(cv::countNonZero(diff.reshape(1)));
}

TEST(JpegRegion, EqualsTheSameRegionOfTheWholeDecodeByteForByte) {
  JpegRegionDecoder decoder;
  size_t checked = 0;
  for (const Layout& layout : kLayouts)
    for (const bool progressive : {false, true})
      for (const int restart : {0, 2})
        for (const auto& [w, h] : std::vector<std::pair<int, int>>{{61, 45}, {48, 33}, {17, 70}, {3, 2}}) {
          const auto bytes = encode_jpeg(test_image(h, w, layout.channels, static_cast<uint32_t>(w * h)), layout,
                                         progressive, restart);
          const ImageInfo info = probe_image(bytes);
          ASSERT_TRUE(JpegRegionDecoder::takes(info)) << layout.name << (progressive ? " progressive" : "");
          ASSERT_EQ(info.progressive_huffman, progressive);
          for (const int reduction : {1, 2, 4, 8})
            for (const int channels : {3, 1}) {
              const int64_t rw = reduced_size(w, reduction), rh = reduced_size(h, reduction);
              for (const PixelRegion& r : regions(rw, rh)) {
                ASSERT_EQ(region_mismatch(decoder, bytes, info, channels, reduction, r), 0u)
                    << layout.name << (progressive ? " progressive" : " baseline") << " restart " << restart << ", "
                    << w << "x" << h << " at 1/" << reduction << " as " << channels << " channels: region " << r.width
                    << "x" << r.height << "+" << r.left << "+" << r.top;
                ++checked;
              }
            }
        }
  EXPECT_GT(checked, 5000u);
}

TEST(JpegRegion, PhotoSizedImagesAtEveryReduction) {
  // Real block counts: the iMCU rows and columns that skipping and cropping work in, far from the small images'.
  JpegRegionDecoder decoder;
  for (const Layout& layout : {kLayouts[2], kLayouts[1]})
    for (const bool progressive : {false, true}) {
      const auto bytes = encode_jpeg(test_image(375, 500, 3, 7), layout, progressive, 0);
      const ImageInfo info = probe_image(bytes);
      for (const int reduction : {1, 2, 4})
        for (const PixelRegion& r : std::vector<PixelRegion>{{101, 77, 200, 150}, {0, 200, 333, 175}, {250, 0, 250, 1}})
          EXPECT_EQ(region_mismatch(decoder, bytes, info, 3, reduction,
                                    {r.left / reduction, r.top / reduction, std::max<int64_t>(1, r.width / reduction),
                                     std::max<int64_t>(1, r.height / reduction)}),
                    0u)
              << layout.name << " 1/" << reduction;
    }
}

TEST(JpegRegion, DecodersOnSeveralThreadsAtOnceGiveTheSamePixels) {
  const auto bytes = encode_jpeg(test_image(120, 160, 3, 3), kLayouts[2], true, 0);
  const ImageInfo info = probe_image(bytes);
  const cv::Mat whole = decode_image(bytes, info, 3, 1, "x.jpg");
  std::vector<size_t> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < mismatches.size(); ++t)
    threads.emplace_back([&, t] {
      JpegRegionDecoder decoder;
      for (int i = 0; i < 50; ++i) {
        const PixelRegion r{static_cast<int64_t>(i + t), static_cast<int64_t>(i), 60, 50};
        const DecodedPixels got = decoder.decode(bytes, info, 3, 1, r, "x.jpg");
        cv::Mat diff;
        cv::compare(got.pixels, whole(cv::Rect(static_cast<int>(r.left), static_cast<int>(r.top), 60, 50)), diff,
                    cv::CMP_NE);
        mismatches[t] += static_cast<size_t>(cv::countNonZero(diff.reshape(1)));
      }
    });
  for (auto& t : threads) t.join();
  for (size_t m : mismatches) EXPECT_EQ(m, 0u);
}

TEST(JpegRegion, RefusesRegionsOutsideTheImageBeforeLibjpegSeesThem) {
  JpegRegionDecoder decoder;
  const auto bytes = encode_jpeg(test_image(20, 30, 3, 1), kLayouts[2], false, 0);
  const ImageInfo info = probe_image(bytes);
  for (const PixelRegion& r : std::vector<PixelRegion>{
           {0, 0, 0, 5}, {0, 0, 5, 0}, {-1, 0, 5, 5}, {0, -1, 5, 5}, {26, 0, 5, 5}, {0, 16, 5, 5}, {0, 0, 31, 20}})
    EXPECT_THROW(decoder.decode(bytes, info, 3, 1, r, "x.jpg"), std::invalid_argument)
        << r.width << "x" << r.height << "+" << r.left << "+" << r.top;
  // At 1/2 the image is 15x10.
  EXPECT_THROW(decoder.decode(bytes, info, 3, 2, {0, 0, 16, 10}, "x.jpg"), std::invalid_argument);
  EXPECT_NO_THROW(decoder.decode(bytes, info, 3, 2, {0, 0, 15, 10}, "x.jpg"));
}

TEST(JpegRegion, ADamagedFileIsADataErrorNamingItAndTheDecoderStaysUsable) {
  JpegRegionDecoder decoder;
  const auto good = encode_jpeg(test_image(40, 40, 3, 2), kLayouts[2], false, 0);
  const ImageInfo info = probe_image(good);
  // The quantization tables' marker (DQT) renamed to an unknown one that libjpeg cannot skip over.
  auto bad = good;
  for (size_t i = 2; i + 1 < bad.size(); ++i)
    if (bad[i] == 0xFF && bad[i + 1] == 0xDB) {
      bad[i + 1] = 0xC8;  // JPG extension marker: libjpeg refuses the file
      break;
    }
  try {
    decoder.decode(bad, info, 3, 1, {0, 0, 40, 40}, "/photos/bad.jpg");
    ADD_FAILURE() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("/photos/bad.jpg: cannot decode ("), std::string::npos) << e.what();
  }
  // A header that disagrees with the probe's (a frame larger than the one parsed) decodes nothing.
  ImageInfo lying = info;
  lying.width = 80;
  EXPECT_THROW(decoder.decode(good, lying, 3, 1, {50, 0, 20, 20}, "/photos/lying.jpg"), DataError);
  const cv::Mat whole = decode_image(good, info, 3, 1, "x.jpg");
  const DecodedPixels after = decoder.decode(good, info, 3, 1, {5, 6, 20, 21}, "x.jpg");
  cv::Mat diff;
  cv::compare(after.pixels, whole(cv::Rect(5, 6, 20, 21)), diff, cv::CMP_NE);
  EXPECT_EQ(cv::countNonZero(diff.reshape(1)), 0) << "the decoder works after an error";
}

TEST(JpegRegion, TakesOnlyTheFilesItDecodesExactly) {
  const auto bytes = encode_jpeg(test_image(16, 16, 3, 1), kLayouts[2], false, 0);
  const ImageInfo info = probe_image(bytes);
  EXPECT_TRUE(JpegRegionDecoder::takes(info));
  EXPECT_EQ(info.sample_bits, 8);
  for (auto change : std::vector<std::function<void(ImageInfo&)>>{
           [](ImageInfo& i) { i.truncated = true; }, [](ImageInfo& i) { i.components = 4; },
           [](ImageInfo& i) { i.sample_bits = 12; }, [](ImageInfo& i) { i.common_sampling = false; },
           [](ImageInfo& i) { i.sequential_huffman = false; }, [](ImageInfo& i) { i.width = 0; },
           [](ImageInfo& i) { i.format = ImageFormat::png; }}) {
    ImageInfo other = info;
    change(other);
    EXPECT_FALSE(JpegRegionDecoder::takes(other));
  }
}

// render_sample (region decode, then render) against the whole decode then render, over random plans on each
// transform path: train and eval, bilinear, bicubic and nearest, reduced decode on and off.
TEST(JpegRegion, RenderedSamplesEqualRenderingTheWholeDecode) {
  size_t compared = 0;
  for (const Layout& layout : {kLayouts[2], kLayouts[0], kLayouts[4]})
    for (const bool progressive : {false, true}) {
      const int channels = layout.channels;
      const auto bytes = encode_jpeg(test_image(213, 301, channels, 11), layout, progressive, 0);
      const ImageInfo info = probe_image(bytes);
      for (const Interpolation interpolation :
           {Interpolation::bilinear, Interpolation::bicubic, Interpolation::nearest})
        for (const bool train : {true, false})
          for (const bool reduce : {true, false})
            for (uint64_t seed = 0; seed < 12; ++seed) {
              TransformSpec spec;
              spec.train = train;
              spec.size = seed % 3 == 0 ? 24 : 56;
              spec.resize = spec.size + 8 * static_cast<int64_t>(seed % 4);
              spec.interpolation = interpolation;
              spec.reduce = reduce;
              const SamplePlan plan = plan_sample(spec, info.height, info.width, seed);
              const int reduction = decode_reduction(plan, spec);
              cv::Mat want(static_cast<int>(spec.size), static_cast<int>(spec.size), CV_8UC(channels));
              cv::Mat got = want.clone();
              render(whole_image(decode_image(bytes, info, channels, reduction, "x.jpg")), info.height, info.width,
                     plan, spec, want);
              SampleTimes times;
              render_sample(bytes, info, plan, spec, channels, "x.jpg", got, &times);
              cv::Mat diff;
              cv::compare(got, want, diff, cv::CMP_NE);
              ASSERT_EQ(cv::countNonZero(diff.reshape(1)), 0)
                  << layout.name << (train ? " train" : " eval") << " filter " << static_cast<int>(interpolation)
                  << " reduce " << reduce << " seed " << seed;
              EXPECT_LE(times.pixels_decoded,
                        reduced_size(info.height, reduction) * reduced_size(info.width, reduction));
              ++compared;
            }
    }
  EXPECT_EQ(compared, 3u * 2 * 3 * 2 * 2 * 12);
}

}  // namespace
}  // namespace trainer
