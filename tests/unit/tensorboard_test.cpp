#include <gtest/gtest.h>

#include <cstring>

#include "support/fixtures.hpp"
#include "trainer/io/tensorboard.hpp"
#include "trainer/io/tfrecord.hpp"
#include "trainer/util/error.hpp"

namespace trainer {
namespace {

using namespace trainer::testing;

TEST(TfRecord, Crc32cMatchesTheStandardCheckValues) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);  // the CRC-32C check value
  const std::string zeros(32, '\0');
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);  // RFC 3720, 32 bytes of zeros
  const std::string ones(32, '\xFF');
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);  // RFC 3720, 32 bytes of 0xFF
}

TEST(TfRecord, FrameLayoutAndRoundTrip) {
  const std::string frame = tfrecord_frame("abc");
  ASSERT_EQ(frame.size(), 8u + 4u + 3u + 4u);
  EXPECT_EQ(frame[0], 3);
  for (int i = 1; i < 8; ++i) EXPECT_EQ(frame[i], 0);
  uint32_t stored = 0;
  std::memcpy(&stored, frame.data() + 15, 4);
  const uint32_t crc = crc32c("abc", 3);
  EXPECT_EQ(stored, ((crc >> 15) | (crc << 17)) + 0xa282ead8u);

  TempDir dir;
  write_text(dir / "f", tfrecord_frame("first") + tfrecord_frame("") + tfrecord_frame("third"));
  EXPECT_EQ(read_tfrecords(dir / "f"), (std::vector<std::string>{"first", "", "third"}));
  // A torn last record ends the list; a damaged one throws with its offset.
  const std::string whole = tfrecord_frame("first") + tfrecord_frame("second");
  write_text(dir / "torn", whole.substr(0, whole.size() - 3));
  EXPECT_EQ(read_tfrecords(dir / "torn"), (std::vector<std::string>{"first"}));
  std::string damaged = whole;
  damaged[13] ^= 0x20;
  write_text(dir / "bad", damaged);
  EXPECT_THROW(read_tfrecords(dir / "bad"), Error);
}

TEST(TensorBoard, EventEncodingIsProtobuf) {
  // Event{wall_time: 1.5, step: 300, summary{value{tag: "a", simple_value: 2}}}, by hand.
  const std::string e = encode_scalars_event(1.5, 300, {{"a", 2.0}});
  const std::string expected = std::string("\x09\x00\x00\x00\x00\x00\x00\xF8\x3F", 9) + "\x10\xAC\x02" +
                               std::string(
                                   "\x2A\x0A\x0A\x08\x0A\x01"
                                   "a"
                                   "\x15\x00\x00\x00\x40",
                                   12);
  EXPECT_EQ(e, expected);
  EXPECT_EQ(decode_event_step(e), 300);
  EXPECT_EQ(decode_event_step(encode_file_version_event(2.0)), 0);
}

TEST(TensorBoard, ResumeCutsEarlierFilesAtTheStep) {
  TempDir dir;
  {
    TensorBoardWriter w(dir / "tb", std::nullopt);
    for (int64_t step = 1; step <= 5; ++step) w.write_scalars(step, {{"x", static_cast<double>(step)}});
    w.write_scalars(6, {{"nan", std::nan("")}});  // nothing to write: no event
  }
  TensorBoardWriter w(dir / "tb", int64_t{3});
  w.write_scalars(4, {{"x", 40.0}});
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir / "tb")) {
    ++files;
    EXPECT_EQ(entry.path(), w.file());
  }
  EXPECT_EQ(files, 1u);
  const auto events = read_tfrecords(w.file());
  ASSERT_EQ(events.size(), 5u);  // file_version, steps 1..3 kept, the new step 4
  for (int64_t i = 1; i <= 3; ++i)
    EXPECT_EQ(events[i].substr(9), encode_scalars_event(0, i, {{"x", double(i)}}).substr(9));
  EXPECT_EQ(decode_event_step(events[4]), 4);
}

TEST(TensorBoard, ResumeLeavesADamagedFileAlone) {
  TempDir dir;
  fs::create_directories(dir / "tb");
  std::string damaged = tfrecord_frame(encode_file_version_event(1)) +
                        tfrecord_frame(encode_scalars_event(1, 1, {{"x", 1}})) +
                        tfrecord_frame(encode_scalars_event(1, 2, {{"x", 2}}));
  damaged[30] ^= 0x10;
  write_text(dir / "tb" / "events.out.tfevents.1.host.1", damaged);
  TensorBoardWriter w(dir / "tb", int64_t{1});
  EXPECT_EQ(read_text(dir / "tb" / "events.out.tfevents.1.host.1"), damaged);
  EXPECT_EQ(read_tfrecords(w.file()).size(), 1u);  // only its own file_version
}

}  // namespace
}  // namespace trainer
