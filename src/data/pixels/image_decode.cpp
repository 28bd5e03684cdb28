#include "trainer/data/pixels/image_decode.hpp"

#include <opencv2/imgcodecs.hpp>

#include <memory>

#include "trainer/platform/files.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace fs = std::filesystem;

namespace {

uint32_t be16(const uint8_t* p) { return (uint32_t{p[0]} << 8) | p[1]; }
uint32_t be32(const uint8_t* p) { return (be16(p) << 16) | be16(p + 2); }

// Walks the JPEG marker segments up to the start of scan: the frame header (SOFn) holds the size. The
// entropy-coded data after SOS cannot contain FF D9 (0xFF is byte-stuffed there), so a file without an EOI
// marker after its SOS has been cut short.
void probe_jpeg(const std::vector<uint8_t>& b, ImageInfo& info) {
  const size_t n = b.size();
  size_t pos = 2;
  while (pos + 4 <= n) {
    if (b[pos] != 0xFF) {  // stray bytes before a marker: libjpeg skips them ("extraneous bytes"), and so do we
      ++pos;
      continue;
    }
    const uint8_t marker = b[pos + 1];
    if (marker == 0xFF) {  // fill byte
      ++pos;
      continue;
    }
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD8)) {  // markers without a length
      pos += 2;
      continue;
    }
    const size_t length = be16(&b[pos + 2]);
    if (length < 2) return;
    const bool frame = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (frame && pos + 10 <= n) {
      info.height = be16(&b[pos + 5]);
      info.width = be16(&b[pos + 7]);
      info.sample_bits = b[pos + 4];
      info.components = b[pos + 9];
      info.sequential_huffman = marker == 0xC0 || marker == 0xC1;
      info.progressive_huffman = marker == 0xC2;
      // Sampling factors (H << 4 | V) per component: the first (luma) 1 or 2 each way, the others 1x1.
      info.common_sampling = pos + 10 + 3 * static_cast<size_t>(info.components) <= n;
      for (int c = 0; c < info.components && info.common_sampling; ++c) {
        const uint8_t hv = b[pos + 11 + 3 * static_cast<size_t>(c)];
        const int h = hv >> 4, v = hv & 0x0F;
        info.common_sampling = c == 0 ? (h >= 1 && h <= 2 && v >= 1 && v <= 2) : (h == 1 && v == 1);
      }
    }
    if (marker == 0xDA) {  // start of scan
      bool eoi = false;
      for (size_t i = n - 1; i > pos + 1 && !eoi; --i) eoi = b[i] == 0xD9 && b[i - 1] == 0xFF;
      info.truncated = !eoi;
      return;
    }
    pos += 2 + length;
  }
  info.truncated = true;  // the headers end before any scan
}

}  // namespace

void run_image_ops_on_calling_thread() { cv::setNumThreads(0); }

void read_file_bytes(const fs::path& file, std::vector<uint8_t>& bytes) {
  if (const auto ec = read_file(file, bytes)) throw DataError(file.string() + ": cannot open (" + ec.message() + ")");
  if (bytes.empty()) throw DataError(file.string() + ": empty file");
}

std::vector<uint8_t> read_file_bytes(const fs::path& file) {
  std::vector<uint8_t> bytes;
  read_file_bytes(file, bytes);
  return bytes;
}

ImageInfo probe_image(const std::vector<uint8_t>& b) {
  ImageInfo info;
  static constexpr uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) {
    info.format = ImageFormat::jpeg;
    probe_jpeg(b, info);
  } else if (b.size() >= 24 && std::memcmp(b.data(), png_signature, 8) == 0 && std::memcmp(&b[12], "IHDR", 4) == 0) {
    info.format = ImageFormat::png;
    info.width = be32(&b[16]);
    info.height = be32(&b[20]);
  }
  if (info.height <= 0 || info.width <= 0 || info.height > (1 << 24) || info.width > (1 << 24))
    info.height = info.width = 0;
  return info;
}

bool gpu_decodable(const ImageInfo& info) {
  return info.format == ImageFormat::jpeg && !info.truncated && info.height > 0 && info.width > 0 &&
         info.sequential_huffman && (info.components == 1 || info.components == 3) && info.common_sampling;
}

void check_image_pixels(int64_t height, int64_t width, const fs::path& file) {
  if (height * width > kMaxImagePixels)  // each side is below 2^24 (probe_image, OpenCV's int), so no overflow
    throw DataError(file.string() + ": " + std::to_string(width) + "x" + std::to_string(height) +
                    " pixels, more than the " + std::to_string(kMaxImagePixels) +
                    " an image may have (PIL's decompression-bomb limit)");
}

cv::Mat decode_image(const std::vector<uint8_t>& bytes, const ImageInfo& info, int channels, int reduction,
                     const fs::path& file) {
  if (info.truncated) throw DataError(file.string() + ": truncated JPEG (no end-of-image marker)");
  check_image_pixels(info.height, info.width, file);
  const bool jpeg = info.format == ImageFormat::jpeg;
  if (!jpeg) reduction = 1;  // OpenCV would decode fully and then resize: no gain
  int flags = channels == 1 ? cv::IMREAD_GRAYSCALE : cv::IMREAD_COLOR;
  switch (reduction) {
    case 2: flags = channels == 1 ? cv::IMREAD_REDUCED_GRAYSCALE_2 : cv::IMREAD_REDUCED_COLOR_2; break;
    case 4: flags = channels == 1 ? cv::IMREAD_REDUCED_GRAYSCALE_4 : cv::IMREAD_REDUCED_COLOR_4; break;
    case 8: flags = channels == 1 ? cv::IMREAD_REDUCED_GRAYSCALE_8 : cv::IMREAD_REDUCED_COLOR_8; break;
    default: break;
  }
  cv::Mat image;
  try {
    // A header over the bytes: imdecode reads them without a copy.
    const cv::Mat buffer(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<uint8_t*>(bytes.data()));
    image = cv::imdecode(buffer, flags | cv::IMREAD_IGNORE_ORIENTATION);
  } catch (const cv::Exception& e) {
    throw DataError(file.string() + ": cannot decode (" + e.err + ")");
  }
  if (image.empty()) throw DataError(file.string() + ": cannot decode (corrupt or unsupported image)");
  // A size the header probe could not read, checked before anything resamples it (at the decode's scale, which is
  // the full one for files the probe does not read).
  check_image_pixels(image.rows, image.cols, file);
  if (image.depth() != CV_8U) {  // 16-bit PNG or TIFF
    cv::Mat scaled;
    image.convertTo(scaled, CV_8U, image.depth() == CV_16U ? 1.0 / 257.0 : 1.0);
    image = scaled;
  }
  return image;
}

}  // namespace trainer
