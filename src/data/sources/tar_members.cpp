#include "trainer/data/sources/tar_members.hpp"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "trainer/util/error.hpp"

namespace trainer {

namespace {

constexpr uint64_t kBlock = 512;
constexpr uint64_t kMostTarRecordBytes = uint64_t{1} << 20;  // a GNU long name or a pax record: names, not data

// A NUL-terminated field of at most `width` bytes.
std::string text_field(const uint8_t* header, size_t at, size_t width) {
  const char* p = reinterpret_cast<const char*>(header + at);
  return std::string(p, strnlen(p, width));
}

[[noreturn]] void bad_header(const std::string& where, uint64_t at, const std::string& what) {
  throw DataError(where + ": tar header at offset " + std::to_string(at) + ": " + what);
}

// An octal number field (spaces or NULs around the digits), or GNU's base-256 form for sizes past 8 GiB (the first
// byte's top bit set).
uint64_t number_field(const uint8_t* header, size_t at, size_t width, const std::string& where, uint64_t offset,
                      const char* field) {
  const uint8_t* p = header + at;
  if (p[0] & 0x80) {
    if (p[0] != 0x80) bad_header(where, offset, std::string(field) + " is a negative or oversized base-256 number");
    uint64_t value = 0;
    for (size_t i = 1; i < width; ++i) {
      if (value >> 56) bad_header(where, offset, std::string(field) + " does not fit in 64 bits");
      value = value << 8 | p[i];
    }
    return value;
  }
  size_t i = 0;
  while (i < width && (p[i] == ' ' || p[i] == 0)) ++i;
  uint64_t value = 0;
  for (; i < width && p[i] >= '0' && p[i] <= '7'; ++i) {
    if (value >> 60) bad_header(where, offset, std::string(field) + " does not fit in 64 bits");
    value = value * 8 + static_cast<uint64_t>(p[i] - '0');
  }
  for (; i < width; ++i)
    if (p[i] != ' ' && p[i] != 0) bad_header(where, offset, std::string(field) + " is not an octal number");
  return value;
}

bool all_zero(const uint8_t* block) {
  for (uint64_t i = 0; i < kBlock; ++i)
    if (block[i] != 0) return false;
  return true;
}

// The sums tar programs write: the header's bytes with the checksum field read as spaces, unsigned (POSIX) or,
// as some old tars did, signed.
void check_sum(const uint8_t* header, const std::string& where, uint64_t offset) {
  const uint64_t stored = number_field(header, 148, 8, where, offset, "the checksum field");
  int64_t unsigned_sum = 0, signed_sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    const uint8_t byte = i >= 148 && i < 156 ? ' ' : header[i];
    unsigned_sum += byte;
    signed_sum += static_cast<int8_t>(byte);
  }
  if (static_cast<int64_t>(stored) != unsigned_sum && static_cast<int64_t>(stored) != signed_sum)
    bad_header(where, offset,
               "checksum " + std::to_string(stored) + ", but the header sums to " + std::to_string(unsigned_sum) +
                   " (not a tar file, or a damaged one)");
}

// pax records, "LEN key=value\n" each: the path and size that override the next header's.
void read_pax(std::string_view records, std::string& path, uint64_t& size, bool& has_size, const std::string& where,
              uint64_t offset) {
  while (!records.empty()) {
    const size_t space = records.find(' ');
    if (space == std::string_view::npos || space == 0 || space > 20) bad_header(where, offset, "malformed pax record");
    uint64_t length = 0;
    for (size_t i = 0; i < space; ++i) {
      if (records[i] < '0' || records[i] > '9') bad_header(where, offset, "malformed pax record length");
      length = length * 10 + static_cast<uint64_t>(records[i] - '0');
    }
    if (length <= space + 1 || length > records.size() || records[length - 1] != '\n')
      bad_header(where, offset, "pax record length " + std::to_string(length) + " does not fit its data");
    const std::string_view record = records.substr(space + 1, length - space - 2);
    const size_t equals = record.find('=');
    if (equals == std::string_view::npos) bad_header(where, offset, "pax record without '='");
    const std::string_view key = record.substr(0, equals), value = record.substr(equals + 1);
    if (key == "path") path = std::string(value);
    if (key == "size") {
      uint64_t parsed = 0;
      if (value.empty() || value.size() > 19) bad_header(where, offset, "pax size record out of range");
      for (char c : value) {
        if (c < '0' || c > '9') bad_header(where, offset, "pax size record is not a number");
        parsed = parsed * 10 + static_cast<uint64_t>(c - '0');
      }
      size = parsed;
      has_size = true;
    }
    records.remove_prefix(length);
  }
}

}  // namespace

void TarMemberStream::feed(const uint8_t* data, size_t size) {
  while (size > 0 && !done_) {
    if (body_left_ > 0) {  // a member's bytes: passed over, or gathered for a GNU long name or pax record
      const auto k = static_cast<size_t>(std::min<uint64_t>(size, body_left_));
      if (type_ == 'L' || type_ == 'x' || keeping_) record_.append(reinterpret_cast<const char*>(data), k);
      body_left_ -= k, data += k, size -= k, at_ += k;
      if (body_left_ == 0) end_member();
      continue;
    }
    if (padding_left_ > 0) {
      const auto k = static_cast<size_t>(std::min<uint64_t>(size, padding_left_));
      padding_left_ -= k, data += k, size -= k, at_ += k;
      continue;
    }
    const size_t k = std::min(size, static_cast<size_t>(kBlock) - header_.size());
    header_.append(reinterpret_cast<const char*>(data), k);
    data += k, size -= k, at_ += k;
    if (header_.size() < kBlock) continue;
    header_at_ = at_ - kBlock;
    begin_member();
    header_.clear();
    if (!done_ && body_left_ == 0) end_member();  // an empty member
  }
}

void TarMemberStream::begin_member() {
  const auto* header = reinterpret_cast<const uint8_t*>(header_.data());
  if (all_zero(header)) {  // the end-of-archive blocks
    done_ = true;
    return;
  }
  check_sum(header, where_, header_at_);
  member_size_ = number_field(header, 124, 12, where_, header_at_, "the size field");
  if (has_pax_size_) member_size_ = pax_size_;
  type_ = static_cast<char>(header[156]);
  if ((type_ == 'L' || type_ == 'x') && member_size_ > kMostTarRecordBytes)
    bad_header(where_, header_at_,
               "a GNU long name or pax record of " + std::to_string(member_size_) + " bytes (more than 1 MiB)");
  std::string name = text_field(header, 0, 100);
  // POSIX ustar's prefix field; GNU tar's "ustar  " magic uses those bytes for other things.
  if (std::memcmp(header + 257, "ustar\0", 6) == 0) {
    const std::string prefix = text_field(header, 345, 155);
    if (!prefix.empty()) name = prefix + "/" + name;
  }
  record_.clear();
  keeping_ = false;
  if (type_ != 'L' && type_ != 'x') {
    if (type_ == '0' || type_ == '\0' || type_ == '7') {
      members_.push_back({long_name_.empty() ? std::move(name) : long_name_, at_, member_size_});
      const std::string& kept_name = members_.back().name;
      keeping_ = !keep_suffix_.empty() && member_size_ <= keep_most_ && kept_name.size() >= keep_suffix_.size() &&
                 kept_name.compare(kept_name.size() - keep_suffix_.size(), keep_suffix_.size(), keep_suffix_) == 0;
    }
    long_name_.clear();  // 'g' (global pax), 'K' and the rest are skipped; their names never carry over
    has_pax_size_ = false;
  }
  body_left_ = member_size_;
  padding_left_ = tar_padding(member_size_);
}

void TarMemberStream::end_member() {
  if (keeping_) kept_[members_.back().offset] = record_;
  keeping_ = false;
  if (type_ == 'L') long_name_ = record_.substr(0, record_.find('\0'));
  if (type_ == 'x') read_pax(record_, long_name_, pax_size_, has_pax_size_, where_, header_at_);
  record_.clear();
}

std::vector<TarMember> TarMemberStream::finish() const {
  if (done_) return members_;
  if (!header_.empty())
    bad_header(where_, at_ - header_.size(), "cut short (" + std::to_string(header_.size()) + " of 512 bytes)");
  if (body_left_ > 0)
    bad_header(where_, header_at_,
               "the member's " + std::to_string(member_size_) + " bytes run past the end of the file at " +
                   std::to_string(at_) + " (a truncated shard)");
  return members_;  // the last member's padding may be missing, as Python's tarfile allows
}

std::vector<TarMember> list_tar_members(const uint8_t* data, uint64_t size, const std::string& where) {
  TarMemberStream stream(where);
  // Fed in pieces a size_t holds; a member's bytes are passed over, never copied.
  for (uint64_t at = 0; at < size && !stream.done();) {
    const auto n = static_cast<size_t>(std::min<uint64_t>(size - at, uint64_t{1} << 30));
    stream.feed(data + at, n);
    at += n;
  }
  return stream.finish();
}

std::string ustar_header(const std::string& name, uint64_t size) {
  if (name.empty() || name.size() > 100)
    throw DataError("tar member name \"" + name + "\": must be 1 to 100 bytes in a ustar header");
  if (size >= (uint64_t{1} << 33)) throw DataError("tar member " + name + ": over 8 GiB, more than ustar holds");
  std::string h(kBlock, '\0');
  auto octal = [&h](size_t at, size_t width, uint64_t value) {
    for (size_t i = width - 1; i-- > 0;) {  // width - 1 digits, then NUL
      h[at + i] = static_cast<char>('0' + (value & 7));
      value >>= 3;
    }
  };
  std::memcpy(&h[0], name.data(), name.size());
  octal(100, 8, 0644);
  octal(108, 8, 0);
  octal(116, 8, 0);
  octal(124, 12, size);
  octal(136, 12, 0);
  h[156] = '0';
  std::memcpy(&h[257],
              "ustar\0"
              "00",
              8);
  std::memset(&h[148], ' ', 8);
  uint64_t sum = 0;
  for (char c : h) sum += static_cast<uint8_t>(c);
  octal(148, 7, sum);  // six digits, then NUL and a space, as POSIX writes it
  h[154] = '\0';
  return h;
}

}  // namespace trainer
