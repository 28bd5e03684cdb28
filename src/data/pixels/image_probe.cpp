// probe_image (data/pixels/image_decode.hpp): every format OpenCV's imdecode would pick by content, named and sized
// from its header alone, so that what is decoded is known before a byte of it is.
#include "trainer/data/pixels/image_decode.hpp"

#include <cctype>
#include <cstdlib>
#include <cstring>

namespace trainer {

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
      // Each scan of a progressive file is another pass over the whole image's coefficients, and a few bytes
      // make one: the scans are counted (FF DA cannot occur inside entropy-coded data, where 0xFF is stuffed).
      if (!info.sequential_huffman)
        for (size_t i = pos; i + 1 < n; ++i) info.scans += b[i] == 0xFF && b[i + 1] == 0xDA;
      return;
    }
    pos += 2 + length;
  }
  info.truncated = true;  // the headers end before any scan
}

uint32_t le16(const uint8_t* p) { return (uint32_t{p[1]} << 8) | p[0]; }
uint32_t le32(const uint8_t* p) { return (le16(p + 2) << 16) | le16(p); }
uint32_t le24(const uint8_t* p) { return (uint32_t{p[2]} << 16) | le16(p); }
bool starts(const std::vector<uint8_t>& b, const char* magic, size_t at = 0) {
  const size_t n = std::strlen(magic);
  return b.size() >= at + n && std::memcmp(b.data() + at, magic, n) == 0;
}

// BMP: the DIB header's width and height (OS/2's 12-byte header holds 16-bit ones; a negative height is a
// top-down image).
void probe_bmp(const std::vector<uint8_t>& b, ImageInfo& info) {
  if (b.size() < 26) return;
  if (le32(&b[14]) == 12) {
    info.width = le16(&b[18]);
    info.height = le16(&b[20]);
  } else {
    info.width = static_cast<int32_t>(le32(&b[18]));
    info.height = std::abs(static_cast<int64_t>(static_cast<int32_t>(le32(&b[22]))));
  }
}

// WebP: the first chunk's frame size: VP8 (lossy) 14-bit sides after its start code, VP8L (lossless) 14-bit sides
// minus one, VP8X (extended) the 24-bit canvas minus one.
void probe_webp(const std::vector<uint8_t>& b, ImageInfo& info) {
  if (starts(b, "VP8 ", 12) && b.size() >= 30 && b[23] == 0x9D && b[24] == 0x01 && b[25] == 0x2A) {
    info.width = le16(&b[26]) & 0x3FFF;
    info.height = le16(&b[28]) & 0x3FFF;
  } else if (starts(b, "VP8L", 12) && b.size() >= 25 && b[20] == 0x2F) {
    const uint32_t bits = le32(&b[21]);
    info.width = (bits & 0x3FFF) + 1;
    info.height = ((bits >> 14) & 0x3FFF) + 1;
  } else if (starts(b, "VP8X", 12) && b.size() >= 30) {
    info.width = le24(&b[24]) + 1;
    info.height = le24(&b[27]) + 1;
  }
}

// PBM, PGM, PPM (P1-P6): the width and height after the magic, read exactly as OpenCV's PxM decoder reads them
// (its ReadNumber): blanks and # comments (to the end of the line) before a number, and the one byte that ends a
// number consumed with it, so "16#8" is 16 and then 8, not 16 and a comment. Read any other way, a 29-byte file
// showed us 88816 x 16 pixels and OpenCV 88816 x 8828, which it allocated (2.4 GB).
void probe_pnm(const std::vector<uint8_t>& b, ImageInfo& info) {
  size_t at = 2;
  const auto next = [&]() -> int { return at < b.size() ? b[at++] : -1; };
  int64_t sides[2] = {0, 0};
  for (int64_t& side : sides) {
    int code = next();
    while (code < 0 || !std::isdigit(code)) {
      if (code == '#') {
        do code = next();
        while (code >= 0 && code != '\n' && code != '\r');
        code = next();
      } else if (code >= 0 && std::isspace(code)) {
        while (code >= 0 && std::isspace(code)) code = next();
      } else {
        return;  // OpenCV stops with an error here
      }
    }
    for (int digits = 0; code >= 0 && std::isdigit(code); code = next())
      if (++digits > 8) return;  // more than any side this reads (1 << 24)
      else side = side * 10 + (code - '0');
  }
  info.width = sides[0];
  info.height = sides[1];
}

// TIFF: ImageWidth (256) and ImageLength (257) of the first directory, which is the page OpenCV decodes.
void probe_tiff(const std::vector<uint8_t>& b, ImageInfo& info) {
  const bool little = b[0] == 'I';
  const auto u16 = [&](size_t at) { return little ? le16(&b[at]) : be16(&b[at]); };
  const auto u32 = [&](size_t at) { return little ? le32(&b[at]) : be32(&b[at]); };
  if (b.size() < 8) return;
  const size_t directory = u32(4);
  if (directory > b.size() || b.size() - directory < 2) return;
  const size_t entries = u16(directory);
  for (size_t e = 0; e < entries && directory + 2 + 12 * (e + 1) <= b.size(); ++e) {
    const size_t at = directory + 2 + 12 * e;
    const uint32_t tag = u16(at), type = u16(at + 2);
    if (tag != 256 && tag != 257) continue;
    const int64_t value = type == 3 ? u16(at + 8) : type == 4 ? u32(at + 8) : 0;  // SHORT or LONG
    int64_t& side = tag == 256 ? info.width : info.height;
    if (side != 0) {  // a tag given twice: which one libtiff keeps is not ours to guess
      info.width = info.height = 0;
      return;
    }
    side = value;
  }
}

}  // namespace

ImageInfo probe_image(const std::vector<uint8_t>& b) {
  ImageInfo info;
  static constexpr uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) {
    info.format = ImageFormat::jpeg;
    probe_jpeg(b, info);
  } else if (b.size() >= 8 && std::memcmp(b.data(), png_signature, 8) == 0) {
    info.format = ImageFormat::png;
    if (b.size() >= 24 && std::memcmp(&b[12], "IHDR", 4) == 0) {
      info.width = be32(&b[16]);
      info.height = be32(&b[20]);
    }
  } else if (starts(b, "BM")) {
    info.format = ImageFormat::bmp;
    probe_bmp(b, info);
  } else if (starts(b, "RIFF") && starts(b, "WEBP", 8)) {
    info.format = ImageFormat::webp;
    probe_webp(b, info);
  } else if (b.size() >= 3 && b[0] == 'P' && b[1] >= '1' && b[1] <= '6' && std::isspace(b[2])) {
    info.format = ImageFormat::pnm;
    probe_pnm(b, info);
  } else if (starts(b, "II*") || starts(b, "MM")) {
    if (b.size() >= 4 && ((b[0] == 'I' && b[3] == 0) || (b[0] == 'M' && b[2] == 0 && b[3] == '*'))) {
      info.format = ImageFormat::tiff;
      probe_tiff(b, info);
    }
  }
  if (info.height <= 0 || info.width <= 0 || info.height > (1 << 24) || info.width > (1 << 24))
    info.height = info.width = 0;
  return info;
}

}  // namespace trainer
