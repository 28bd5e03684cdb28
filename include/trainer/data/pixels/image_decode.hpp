// Reading and decoding image files for image-folder datasets. The header is parsed first (JPEG SOF, PNG IHDR)
// so the crop can be planned before the decode, and JPEGs can be decoded at 1/2, 1/4 or 1/8 scale by
// libjpeg-turbo's DCT scaling (through OpenCV's IMREAD_REDUCED_* modes), which is several times faster.
//   std::vector<uint8_t> bytes = read_file_bytes(path);
//   ImageInfo info = probe_image(bytes);
//   cv::Mat bgr = decode_image(bytes, info, /*channels=*/3, /*reduction=*/2, path);
#pragma once

#include <opencv2/core.hpp>

#include <cstdint>
#include <filesystem>
#include <vector>

namespace trainer {

enum class ImageFormat { jpeg, png, other };

struct ImageInfo {
  ImageFormat format = ImageFormat::other;
  int64_t height = 0;  // 0: unknown until decoded
  int64_t width = 0;
  bool truncated = false;  // a JPEG whose entropy-coded data has no end-of-image marker
  // JPEG frame header: what the GPU decoders take (gpu_decodable).
  int components = 0;                // 1 grey, 3 YCbCr, 4 CMYK / YCCK
  bool sequential_huffman = false;   // baseline or extended sequential, Huffman coded (SOF0, SOF1): not progressive,
                                     // lossless or arithmetic coded
  bool progressive_huffman = false;  // progressive, Huffman coded (SOF2)
  int sample_bits = 0;               // the frame's sample precision: 8 (12 and 16 are rare)
  bool common_sampling = false;      // chroma 4:4:4, 4:2:2, 4:2:0 or 4:4:0 (not 4:1:1 and rarer layouts)
};

// The most pixels an image may have: PIL's decompression-bomb limit (Image.MAX_IMAGE_PIXELS x 2, past which
// PIL raises DecompressionBombError), so a folder torchvision refuses is refused here too, and a few hundred
// bytes declaring 20000x20000 pixels cannot make a worker allocate and resample gigabytes.
inline constexpr int64_t kMaxImagePixels = 178'956'970;

// DataError naming `file` when height x width is over kMaxImagePixels.
void check_image_pixels(int64_t height, int64_t width, const std::filesystem::path& file);

// Whether nvJPEG's batched decoders take the file: a complete sequential Huffman JPEG, grey or YCbCr, with a
// common chroma sampling and a known size. Everything else (progressive, CMYK, PNG, 4:1:1) is decoded on the CPU.
bool gpu_decodable(const ImageInfo& info);

// Turns off OpenCV's own thread pool (TBB or pthreads), process-wide; called once at start-up, before any image is
// read. The loader's workers are the parallelism: each one decodes, crops and resizes its own images, so N workers
// use N cores. With the pool on, a worker's larger resizes and colour conversions (outputs over 64K pixels) would
// be split over every core as well, beside the other workers.
void run_image_ops_on_calling_thread();

// The whole file. Throws DataError naming the file when it cannot be opened or read, or is empty. The second form
// reads into `bytes`, whose capacity a caller reading file after file keeps instead of allocating each time.
std::vector<uint8_t> read_file_bytes(const std::filesystem::path& file);
void read_file_bytes(const std::filesystem::path& file, std::vector<uint8_t>& bytes);

// Format and size from the header bytes alone; never throws (a malformed header just leaves the size unknown).
ImageInfo probe_image(const std::vector<uint8_t>& bytes);

// Decodes to uint8 BGR (channels 3: grey, alpha and CMYK images converted) or grey (channels 1), at
// 1/`reduction` scale for JPEGs (1, 2, 4 or 8; other formats ignore it). EXIF orientation is ignored, as PIL
// does. Throws DataError naming `file` when the bytes are truncated or cannot be decoded.
cv::Mat decode_image(const std::vector<uint8_t>& bytes, const ImageInfo& info, int channels, int reduction,
                     const std::filesystem::path& file);

}  // namespace trainer
