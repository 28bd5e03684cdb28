#include "trainer/data/pixels/image_decode.hpp"

#include <opencv2/imgcodecs.hpp>

#include <memory>

#include "trainer/platform/files.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace fs = std::filesystem;

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

void check_image_header(const ImageInfo& info, const fs::path& file) {
  if (info.format == ImageFormat::other)
    throw DataError(file.string() + ": not a JPEG, PNG, BMP, WebP, PNM or TIFF image (by its first bytes)");
  if (info.height == 0 || info.width == 0)
    throw DataError(file.string() + ": its header names no image size (damaged, or a variant not read)");
  if (info.truncated) throw DataError(file.string() + ": truncated JPEG (no end-of-image marker)");
  if (info.scans > kMostJpegScans)
    throw DataError(file.string() + ": a progressive JPEG of " + std::to_string(info.scans) + " scans, more than the " +
                    std::to_string(kMostJpegScans) + " an image may have");
  check_image_pixels(info.height, info.width, file);
}

cv::Mat decode_image(const std::vector<uint8_t>& bytes, const ImageInfo& info, int channels, int reduction,
                     const fs::path& file) {
  check_image_header(info, file);
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
  // The decoded size, checked again before anything resamples it: the probe's header is not the decoder's.
  check_image_pixels(image.rows, image.cols, file);
  if (image.depth() != CV_8U) {  // 16-bit PNG or TIFF
    cv::Mat scaled;
    image.convertTo(scaled, CV_8U, image.depth() == CV_16U ? 1.0 / 257.0 : 1.0);
    image = scaled;
  }
  return image;
}

}  // namespace trainer
