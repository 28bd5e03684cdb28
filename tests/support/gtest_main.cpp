// The test binaries' main: GoogleTest's, except that a run whose tests were all skipped (GTEST_SKIP: no CUDA
// device, no Python torchvision) and none failed exits 77, which ctest reports as "Skipped" (SKIP_RETURN_CODE).
// A suite with a skipped test and a failing one still fails; one with skipped and passing tests passes.
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  const int result = RUN_ALL_TESTS();
  const testing::UnitTest& run = *testing::UnitTest::GetInstance();
  if (result == 0 && run.successful_test_count() == 0 && run.skipped_test_count() > 0) return 77;
  return result;
}
