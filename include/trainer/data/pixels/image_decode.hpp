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

// The formats decoded: what torchvision's ImageFolder lists (IMG_EXTENSIONS) that OpenCV reads. OpenCV's imdecode
// picks a decoder by content, not by name, and would also run its JPEG 2000, HDR, PFM, PAM, Sun raster, EXR and
// GDAL decoders on a file named .jpg: those are `other`, refused before imdecode sees them.
enum class ImageFormat { jpeg, png, bmp, webp, pnm, tiff, other };

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
  int64_t scans = 0;                 // a JPEG that is not sequential Huffman: its scans (progressive ones)
};

// The most scans a progressive JPEG may have (libjpeg-turbo's advice for its own scan limit, TJPARAM_SCANLIMIT):
// each is a pass over the whole image, and a small file can hold tens of thousands. Cameras write about 10.
inline constexpr int64_t kMostJpegScans = 500;

// The most pixels an image may have: PIL's decompression-bomb limit (Image.MAX_IMAGE_PIXELS x 2, past which
// PIL raises DecompressionBombError), so a folder torchvision refuses is refused here too, and a few hundred
// bytes declaring 20000x20000 pixels cannot make a worker allocate and resample gigabytes.
inline constexpr int64_t kMaxImagePixels = 178'956'970;

// DataError naming `file` when height x width is over kMaxImagePixels.
void check_image_pixels(int64_t height, int64_t width, const std::filesystem::path& file);

// DataError naming `file` unless its probed header is one the decoders take: a format listed in ImageFormat, a
// size, no more than kMaxImagePixels, and for a JPEG its end marker and no more than kMostJpegScans scans. Every
// CPU decode (decode_image, the JPEG region decoder) runs behind it.
void check_image_header(const ImageInfo& info, const std::filesystem::path& file);

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

// Decodes (after check_image_header) to uint8 BGR (channels 3: grey, alpha and CMYK images converted) or grey (channels 1), at
// 1/`reduction` scale for JPEGs (1, 2, 4 or 8; other formats ignore it). EXIF orientation is ignored, as PIL
// does. Throws DataError naming `file` when the bytes are truncated or cannot be decoded.
cv::Mat decode_image(const std::vector<uint8_t>& bytes, const ImageInfo& info, int channels, int reduction,
                     const std::filesystem::path& file);

}  // namespace trainer
