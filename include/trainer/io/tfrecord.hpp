// TFRecord framing, the container of TensorBoard event files: each record is
//   uint64 length | uint32 masked_crc32c(length bytes) | payload | uint32 masked_crc32c(payload)
// little-endian, with CRC-32C (Castagnoli) masked as ((crc >> 15) | (crc << 17)) + 0xa282ead8.
//   std::string record = tfrecord_frame(payload);
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace trainer {

// CRC-32C of `n` bytes (the iSCSI polynomial 0x1EDC6F41, reflected); crc32c("123456789") == 0xE3069283.
uint32_t crc32c(const void* data, size_t n);

// The masked form TFRecord stores, so that a CRC over bytes that hold CRCs stays well distributed.
uint32_t masked_crc32c(const void* data, size_t n);

// One whole record: header, payload and footer.
std::string tfrecord_frame(std::string_view payload);

// The payloads of a TFRecord file, each checked against both CRCs. A torn last record (the writer stopped
// mid-write) ends the list; a CRC mismatch anywhere else throws Error naming the file and the offset.
std::vector<std::string> read_tfrecords(const std::filesystem::path& file);

}  // namespace trainer
