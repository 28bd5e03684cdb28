#include "trainer/data/pixels/jpeg_region_decoder.hpp"

// jpeglib.h needs FILE and size_t declared first.
#include <jerror.h>
#include <jpeglib.h>
#include <cstddef>
#include <cstdio>

#include <algorithm>
#include <csetjmp>
#include <stdexcept>
#include <string>

#include "trainer/util/error.hpp"

namespace trainer {

namespace {

// One spare column each side of the region: the fancy upsampler computes a cropped row's first and last pixel
// as an image edge.
constexpr int64_t kSpareColumns = 1;
// And at least four columns: a crop two pixels wide holds one chroma column with 4:2:x sampling, which the
// upsampler treats differently from the same column of a wider row (the differential test found it).
constexpr int64_t kMinColumns = 4;

struct Plan {
  int channels, reduction;
  JDIMENSION left, width, top, height;  // the columns asked of jpeg_crop_scanline, the rows kept
};

struct Decoded {
  JDIMENSION left = 0, width = 0;  // the columns jpeg_crop_scanline gave (left moved to an iMCU boundary)
};

}  // namespace

struct JpegRegionDecoder::State {
  // libjpeg reports a fatal error through error_exit, which must not return. A C++ exception must not cross
  // libjpeg's C frames either, so it jumps back to decode_rows, which has no object with a destructor in scope.
  struct ErrorManager {
    jpeg_error_mgr pub;
    std::jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
  };

  jpeg_decompress_struct cinfo{};
  ErrorManager error{};
  std::vector<uint8_t> pixels;  // the decoded rows, reused from image to image
  std::vector<JSAMPROW> rows;

  static void on_error(j_common_ptr c) {
    auto* e = reinterpret_cast<ErrorManager*>(c->err);
    (*c->err->format_message)(c, e->message);
    std::longjmp(e->jump, 1);
  }

  // Warnings (corrupt data that libjpeg fills in and goes on, as OpenCV's decode does) are not printed from the
  // loader's workers.
  static void on_message(j_common_ptr) {}

  bool decode_rows(const uint8_t* data, size_t size, const Plan& p, Decoded& out);
};

// The libjpeg calls, between a setjmp and the longjmps of on_error: only plain data in scope. Returns false
// (with the error's message in error.message) when libjpeg gave up.
bool JpegRegionDecoder::State::decode_rows(const uint8_t* data, size_t size, const Plan& p, Decoded& out) {
  jpeg_decompress_struct* c = &cinfo;
  if (setjmp(error.jump)) {
    jpeg_abort_decompress(c);
    return false;
  }
  jpeg_mem_src(c, data, static_cast<unsigned long>(size));
  jpeg_read_header(c, TRUE);
  // OpenCV's settings (IMREAD_COLOR / IMREAD_GRAYSCALE / IMREAD_REDUCED_*), libjpeg's defaults otherwise: the
  // slow-integer DCT and fancy upsampling, as Pillow decodes too.
  c->scale_num = 1;
  c->scale_denom = static_cast<unsigned int>(p.reduction);
  c->out_color_space = p.channels == 1 ? JCS_GRAYSCALE : JCS_EXT_BGR;
  c->dct_method = JDCT_ISLOW;
  c->do_fancy_upsampling = TRUE;
  jpeg_start_decompress(c);
  if (p.left + p.width > c->output_width || p.top + p.height > c->output_height) {
    // The frame disagrees with the header the probe parsed: decode nothing rather than crop out of bounds.
    std::snprintf(error.message, sizeof(error.message), "frame size %ux%u differs from the header parsed",
                  c->output_width, c->output_height);
    jpeg_abort_decompress(c);
    return false;
  }
  out.left = p.left;
  out.width = p.width;
  if (out.left > 0 || out.width < c->output_width) jpeg_crop_scanline(c, &out.left, &out.width);
  const size_t stride = static_cast<size_t>(out.width) * static_cast<size_t>(p.channels);
  for (JDIMENSION r = 0; r < p.height; ++r) rows[r] = pixels.data() + r * stride;
  if (p.top > 0) jpeg_skip_scanlines(c, p.top);
  for (JDIMENSION done = 0; done < p.height;) {
    const JDIMENSION n = jpeg_read_scanlines(c, rows.data() + done, p.height - done);
    if (n == 0) {  // cannot happen with an in-memory source, which never suspends
      std::snprintf(error.message, sizeof(error.message), "no scanlines returned");
      jpeg_abort_decompress(c);
      return false;
    }
    done += n;
  }
  // The rows below the region are not wanted: abort resets the object for the next image without decoding them.
  jpeg_abort_decompress(c);
  return true;
}

JpegRegionDecoder::JpegRegionDecoder() : state_(std::make_unique<State>()) {
  state_->cinfo.err = jpeg_std_error(&state_->error.pub);
  state_->error.pub.error_exit = State::on_error;
  state_->error.pub.output_message = State::on_message;
  jpeg_create_decompress(&state_->cinfo);
}

JpegRegionDecoder::~JpegRegionDecoder() { jpeg_destroy_decompress(&state_->cinfo); }

bool JpegRegionDecoder::takes(const ImageInfo& info) {
  return info.format == ImageFormat::jpeg && !info.truncated && info.height > 0 && info.width > 0 &&
         info.sample_bits == 8 && (info.sequential_huffman || info.progressive_huffman) &&
         (info.components == 1 || info.components == 3) && info.common_sampling;
}

int64_t reduced_size(int64_t size, int reduction) { return (size + reduction - 1) / reduction; }

DecodedPixels JpegRegionDecoder::decode(const std::vector<uint8_t>& bytes, const ImageInfo& info, int channels,
                                        int reduction, PixelRegion region, const std::filesystem::path& file) {
  const int64_t full_w = reduced_size(info.width, reduction), full_h = reduced_size(info.height, reduction);
  if ((channels != 1 && channels != 3) || (reduction != 1 && reduction != 2 && reduction != 4 && reduction != 8) ||
      region.width < 1 || region.height < 1 || region.left < 0 || region.top < 0 ||
      region.left + region.width > full_w || region.top + region.height > full_h)
    throw std::invalid_argument("JpegRegionDecoder: region " + std::to_string(region.width) + "x" +
                                std::to_string(region.height) + "+" + std::to_string(region.left) + "+" +
                                std::to_string(region.top) + " is not in the " + std::to_string(full_w) + "x" +
                                std::to_string(full_h) + " image");
  int64_t left = std::max<int64_t>(0, region.left - kSpareColumns);
  int64_t right = std::min(full_w, region.left + region.width + kSpareColumns);
  if (right - left < kMinColumns) {
    right = std::min(full_w, left + kMinColumns);
    left = std::max<int64_t>(0, right - kMinColumns);
  }
  const Plan plan{channels,
                  reduction,
                  static_cast<JDIMENSION>(left),
                  static_cast<JDIMENSION>(right - left),
                  static_cast<JDIMENSION>(region.top),
                  static_cast<JDIMENSION>(region.height)};
  // jpeg_crop_scanline moves the left edge to an iMCU boundary (at most 15 pixels, with the chroma layouts taken):
  // room for the widest result with a margin, so libjpeg only writes into memory that is there.
  const size_t widest = static_cast<size_t>(std::min<int64_t>(full_w, right - left + 64));
  State& s = *state_;
  const size_t need = widest * static_cast<size_t>(channels) * static_cast<size_t>(region.height);
  if (s.pixels.size() < need) s.pixels.resize(need);
  if (s.rows.size() < static_cast<size_t>(region.height)) s.rows.resize(static_cast<size_t>(region.height));
  Decoded got;
  if (!s.decode_rows(bytes.data(), bytes.size(), plan, got))
    throw DataError(file.string() + ": cannot decode (" + s.error.message + ")");
  if (got.left > plan.left || got.left + got.width < plan.left + plan.width || got.width > widest)
    throw std::logic_error("jpeg_crop_scanline gave columns outside those asked");
  const int type = CV_8UC(channels);
  const cv::Mat rows(static_cast<int>(region.height), static_cast<int>(got.width), type, s.pixels.data(),
                     static_cast<size_t>(got.width) * static_cast<size_t>(channels));
  const int x0 = static_cast<int>(region.left - static_cast<int64_t>(got.left));
  return {rows(cv::Range::all(), cv::Range(x0, x0 + static_cast<int>(region.width))), full_w, full_h, region.left,
          region.top};
}

}  // namespace trainer
