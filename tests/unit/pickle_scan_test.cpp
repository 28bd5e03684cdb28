// The walk over a pickle's instructions that runs before LibTorch unpickles a checkpoint's records.
#include <gtest/gtest.h>

#include <string>

#include "trainer/io/pickle_scan.hpp"

using namespace std::string_literals;

namespace trainer {
namespace {

TEST(PickleScan, EveryArgumentLayoutWalksToStop) {
  // PROTO 2, GLOBAL, MARK, BINUNICODE, SHORT_BINUNICODE, LONG1, BININT, BINFLOAT, FRAME, a text line (INT), TUPLE,
  // BINPUT, REDUCE, BINGET, POP, STOP, and bytes after STOP (which nothing reads).
  const std::string pickle =
      "\x80\x02"
      "ctorch\nFloatStorage\n"
      "(X\x03\x00\x00\x00"
      "abc"
      "\x8c\x01"
      "d"
      "\x8a\x02\x01\x02"
      "J\x01\x02\x03\x04"
      "G12345678"
      "\x95\x03\x00\x00\x00\x00\x00\x00\x00"
      "I12\n"
      "tq\x01Rh\x01"
      "0.trailing"s;
  EXPECT_EQ(pickle_structure_problem(pickle), std::nullopt);
}

// What Python's unpickler would refuse for its stack: LibTorch refuses it too, but after allocating what a damaged
// debug record asks for (3 GB from a 2,290-byte checkpoint).
TEST(PickleScan, StackDisciplineIsChecked) {
  EXPECT_EQ(pickle_structure_problem("\x80\x02NN."s), "values left on the stack at STOP at byte 4 of its pickle");
  EXPECT_EQ(pickle_structure_problem("\x80\x02(N."s), "values left on the stack at STOP at byte 4 of its pickle");
  EXPECT_EQ(pickle_structure_problem("\x80\x02N"
                                     "a."s),
            "an instruction taking more values than the stack holds at byte 3 of its pickle");
  EXPECT_EQ(pickle_structure_problem("\x80\x02t."s), "a mark taken that was never set at byte 2 of its pickle");
  EXPECT_EQ(pickle_structure_problem("\x80\x02q\x00N."s),
            "an instruction taking more values than the stack holds at byte 2 of its pickle");
  EXPECT_EQ(pickle_structure_problem("\x80\x02](K\x01K\x02"
                                     "e."s),
            std::nullopt);
}

TEST(PickleScan, LengthsPastTheEndAndUnknownInstructionsAreNamed) {
  // A 1.5 GB string declared in a few bytes: LibTorch would allocate it before reading.
  EXPECT_EQ(pickle_structure_problem("\x80\x02X\x00\x00\x00\x58"
                                     "abc."s),
            "a length longer than the pickle at byte 2 of its pickle");
  EXPECT_EQ(pickle_structure_problem("\x80\x02\x8d\xff\xff\xff\xff\xff\xff\xff\x7f."s),
            "a length longer than the pickle at byte 2 of its pickle");
  EXPECT_EQ(pickle_structure_problem("\x80\x02\x95\x00\x00\x00\x01\x00\x00\x00\x00."s),
            "a frame longer than the pickle at byte 2 of its pickle");
  EXPECT_EQ(pickle_structure_problem("\x80\x02\xff."s), "an instruction that is not Python's at byte 2 of its pickle");
  EXPECT_EQ(pickle_structure_problem("\x80\x02J\x01\x02"s), "an argument cut short at byte 2 of its pickle");
  EXPECT_EQ(pickle_structure_problem("\x80\x02"
                                     "ctorch\nFloat"s),
            "a line with no end at byte 2 of its pickle");
  EXPECT_EQ(pickle_structure_problem("\x80\x02N"s), "no STOP instruction (cut short)");
  EXPECT_EQ(pickle_structure_problem(""), "no STOP instruction (cut short)");
}

}  // namespace
}  // namespace trainer
