#include "trainer/data/sources/mnist_idx.hpp"

#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <optional>

#include "trainer/platform/files.hpp"
#include "trainer/util/checked_math.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

namespace fs = std::filesystem;

namespace {

uint32_t big_endian_u32(const std::vector<uint8_t>& b, size_t offset) {
  return (uint32_t(b[offset]) << 24) | (uint32_t(b[offset + 1]) << 16) | (uint32_t(b[offset + 2]) << 8) |
         uint32_t(b[offset + 3]);
}

// The dimensions an IDX header of `ndims` declares, and the file size they make, in checked arithmetic (three
// 32-bit dimensions can wrap 64 bits around to a small size); nullopt until `bytes` holds the whole header.
struct IdxHeader {
  std::vector<int64_t> dims;
  uint64_t file_bytes = 0;
};
std::optional<IdxHeader> idx_header(const std::vector<uint8_t>& bytes, const fs::path& file, size_t ndims) {
  const size_t header = 4 + 4 * ndims;
  if (bytes.size() < header) return std::nullopt;
  IdxHeader h;
  uint64_t count = 1;
  for (size_t d = 0; d < ndims; ++d) {
    h.dims.push_back(big_endian_u32(bytes, 4 + 4 * d));
    if (multiply_overflows(count, static_cast<uint64_t>(h.dims.back()), count))
      throw DataError(file.string() + ": dimensions whose product does not fit in 64 bits (damaged file)");
  }
  if (add_overflows(count, header, h.file_bytes))
    throw DataError(file.string() + ": dimensions whose product does not fit in 64 bits (damaged file)");
  return h;
}

constexpr uint64_t kGzipFreeBytes = uint64_t(64) << 20;
constexpr uint64_t kGzipMostRatio = 64;

}  // namespace

std::vector<uint8_t> read_maybe_gzip(const fs::path& file, const DeclaredSize& declared_size) {
  // Read as bytes through the platform layer (a path in any script opens on Windows), then inflated in memory:
  // gzopen takes a narrow path.
  std::vector<uint8_t> raw;
  if (const auto ec = read_file(file, raw)) throw DataError(file.string() + ": cannot open (" + ec.message() + ")");
  if (raw.size() < 2 || raw[0] != 0x1f || raw[1] != 0x8b) return raw;  // not gzip: the IDX bytes themselves
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw DataError(file.string() + ": cannot start zlib");
  z.next_in = raw.data();
  z.avail_in = static_cast<uInt>(raw.size());
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> chunk(1 << 16);
  std::optional<uint64_t> declared;
  int status = Z_OK;
  while (status == Z_OK) {
    z.next_out = chunk.data();
    z.avail_out = static_cast<uInt>(chunk.size());
    status = inflate(&z, Z_NO_FLUSH);
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + (chunk.size() - z.avail_out));
    // Inflated no further than the header says: a few kilobytes of gzip can inflate to gigabytes.
    if (!declared && declared_size) {
      declared = declared_size(bytes);
      // A header is free to declare gigabytes, and a few megabytes of gzip really do inflate to them (deflate
      // reaches ~1000:1 on zeros), so what the header asks is weighed against the bytes on disk before it is
      // inflated: real IDX sets compress 2-5x, and anything up to 64 MiB inflates whatever its ratio.
      if (declared && *declared > std::max<uint64_t>(kGzipFreeBytes, uint64_t(raw.size()) * kGzipMostRatio)) {
        inflateEnd(&z);
        throw DataError(file.string() + ": its header declares " + std::to_string(*declared) + " bytes, more than " +
                        std::to_string(kGzipMostRatio) + " times its " + std::to_string(raw.size()) +
                        " compressed bytes; decompress it (gunzip) and point data.root at the plain file");
      }
    }
    if (declared && bytes.size() > *declared) {
      inflateEnd(&z);
      throw DataError(file.string() + ": trailing data: expected " + std::to_string(*declared) + " bytes, found more");
    }
    if (status == Z_STREAM_END && z.avail_in > 0) {  // gzip members may follow one another
      const auto rest = z.avail_in;
      const auto next = z.next_in;
      inflateReset(&z);
      z.next_in = next;
      z.avail_in = rest;
      status = Z_OK;
    }
  }
  const std::string message = z.msg ? z.msg : "";
  inflateEnd(&z);
  // Input used up before the stream's end: a file cut short.
  if (status == Z_BUF_ERROR) throw DataError(file.string() + ": truncated gzip stream");
  if (status != Z_STREAM_END) throw DataError(file.string() + ": cannot decompress: " + message);
  return bytes;
}

namespace {

// Checks the header and exact length of an IDX file; returns its dimensions.
std::vector<int64_t> parse_idx_header(const std::vector<uint8_t>& bytes, const fs::path& file, uint32_t magic,
                                      size_t ndims) {
  const size_t header = 4 + 4 * ndims;
  const uint32_t found = bytes.size() >= 4 ? big_endian_u32(bytes, 0) : 0;
  if (found != magic)
    throw DataError(file.string() + ": bad magic number " + std::to_string(found) + ", expected " +
                    std::to_string(magic) + (magic == 2051 ? " (IDX images)" : " (IDX labels)"));
  const auto h = idx_header(bytes, file, ndims);
  if (!h)
    throw DataError(file.string() + ": truncated: expected at least " + std::to_string(header) +
                    " header bytes, found " + std::to_string(bytes.size()));
  if (bytes.size() != h->file_bytes)
    throw DataError(file.string() + (bytes.size() < h->file_bytes ? ": truncated" : ": trailing data") + ": expected " +
                    std::to_string(h->file_bytes) + " bytes, found " + std::to_string(bytes.size()));
  return h->dims;
}

// read_maybe_gzip's bound for an IDX file of `ndims` dimensions.
DeclaredSize idx_size(const fs::path& file, size_t ndims) {
  return [file, ndims](const std::vector<uint8_t>& head) -> std::optional<uint64_t> {
    const auto h = idx_header(head, file, ndims);
    return h ? std::optional<uint64_t>(h->file_bytes) : std::nullopt;
  };
}

fs::path find_one(const fs::path& root, const std::string& stem) {
  fs::path plain, gz;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!starts_with(name, stem)) continue;
    if (name.size() > 3 && name.substr(name.size() - 3) == ".gz") {
      if (gz.empty() || name < gz.filename().string()) gz = it->path();
    } else if (plain.empty() || name < plain.filename().string()) {
      plain = it->path();
    }
  }
  if (ec) throw DataError(root.string() + ": cannot list the data.root folder: " + ec.message());
  if (!plain.empty()) return plain;
  if (!gz.empty()) return gz;
  throw DataError(root.string() + ": no " + stem + "* file (expected MNIST IDX files such as " + stem +
                  "-idx3-ubyte or " + stem + "-idx3-ubyte.gz; set data.root)");
}

}  // namespace

IdxFiles MnistIdx::find_files(const fs::path& root, const std::string& prefix) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw DataError(root.string() + ": data.root is not a folder");
  return {find_one(root, prefix + "-images"), find_one(root, prefix + "-labels")};
}

MnistIdx::MnistIdx(const IdxFiles& files, int64_t num_classes) : files_(files) {
  pixels_ = read_maybe_gzip(files.images, idx_size(files.images, 3));
  const auto image_dims = parse_idx_header(pixels_, files.images, 2051, 3);
  labels_ = read_maybe_gzip(files.labels, idx_size(files.labels, 1));
  const auto label_dims = parse_idx_header(labels_, files.labels, 2049, 1);
  if (image_dims[0] != label_dims[0])
    throw DataError(files.images.string() + " holds " + std::to_string(image_dims[0]) + " images but " +
                    files.labels.string() + " holds " + std::to_string(label_dims[0]) + " labels");
  // Each side within an OpenCV matrix's int, and far above any IDX set's (28x28 for MNIST, 128x128 for NIST's).
  constexpr int64_t kMaxSide = 1 << 16;
  if (image_dims[1] == 0 || image_dims[2] == 0 || image_dims[1] > kMaxSide || image_dims[2] > kMaxSide)
    throw DataError(files.images.string() + ": image size is " + std::to_string(image_dims[1]) + "x" +
                    std::to_string(image_dims[2]));
  rows_ = image_dims[1];
  cols_ = image_dims[2];
  pixels_.erase(pixels_.begin(), pixels_.begin() + 16);
  labels_.erase(labels_.begin(), labels_.begin() + 8);
  if (num_classes == 0)  // model.num_classes from the data: the largest label + 1
    for (const uint8_t label : labels_) num_classes = std::max<int64_t>(num_classes, int64_t{label} + 1);
  for (size_t i = 0; i < labels_.size(); ++i)
    if (labels_[i] >= num_classes)
      throw DataError(files.labels.string() + ": label " + std::to_string(labels_[i]) + " at index " +
                      std::to_string(i) + " is not below model.num_classes (" + std::to_string(num_classes) + ")");
  for (int64_t c = 0; c < num_classes; ++c) class_names_.push_back(std::to_string(c));
}

void MnistIdx::read_into(size_t i, const ReadContext&, cv::Mat& out) const {
  // A header over the in-memory pixels, copied once into the batch slot.
  auto* data = const_cast<uint8_t*>(pixels_.data() + i * static_cast<size_t>(rows_ * cols_));
  cv::Mat(static_cast<int>(rows_), static_cast<int>(cols_), CV_8UC1, data).copyTo(out);
}

std::string MnistIdx::describe() const {
  return "MNIST IDX " + files_.images.string() + " (" + std::to_string(size()) + " images, " + std::to_string(rows_) +
         "x" + std::to_string(cols_) + ")";
}

}  // namespace trainer
