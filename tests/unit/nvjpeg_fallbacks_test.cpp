// What the nvJPEG decoder does when nvJPEG refuses something (nvjpeg_fallbacks.hpp), with steps that fail on demand:
// the backend's flags and state, a batch whose crop regions fail, damaged files, an engine that fails every call.
// The decoder runs these same functions with nvJPEG's calls (the cuda tests run that on a GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "trainer/data/device/nvjpeg_fallbacks.hpp"

namespace trainer {
namespace {

NvjpegStep ok() { return {}; }
NvjpegStep fails(const std::string& status, bool no_engines = false) { return {false, no_engines, status}; }

// Steps whose answers are given in order, and what was asked of them.
struct ScriptedSteps {
  explicit ScriptedSteps(std::vector<NvjpegStep> creates, NvjpegStep state = ok())
      : creates(std::move(creates)), state(std::move(state)) {}
  std::vector<NvjpegStep> creates;  // the answers of create(), in turn
  NvjpegStep state;
  std::vector<bool> asked_strict;  // the flag of each create()
  int destroyed = 0;
  BackendSteps steps(bool strict_flag = true) {
    BackendSteps s;
    s.strict_flag = strict_flag;
    s.create = [this](bool strict) {
      asked_strict.push_back(strict);
      return creates.at(asked_strict.size() - 1);
    };
    s.create_state = [this] { return state; };
    s.destroy = [this] { ++destroyed; };
    return s;
  }
};

TEST(NvjpegFallbacks, ABackendThatTakesTheStrictFlagOpensWithIt) {
  ScriptedSteps s{{ok()}};
  const BackendOpening o = open_backend(s.steps(), "the hardware backend");
  EXPECT_TRUE(o.opened);
  EXPECT_TRUE(o.strict);
  EXPECT_EQ(o.note, "");
  EXPECT_FALSE(o.warn);
  EXPECT_EQ(s.asked_strict, std::vector<bool>{true});
  EXPECT_EQ(s.destroyed, 0);
}

TEST(NvjpegFallbacks, ARefusedStrictFlagIsRetriedWithoutItAndSaid) {
  ScriptedSteps s{{fails("invalid parameter (2)"), ok()}};
  const BackendOpening o = open_backend(s.steps(), "the hardware backend");
  EXPECT_TRUE(o.opened);
  EXPECT_FALSE(o.strict);
  EXPECT_EQ(o.note, "without BITSTREAM_STRICT, which nvjpegCreateEx refused: invalid parameter (2)");
  EXPECT_TRUE(o.warn);
  EXPECT_EQ(s.asked_strict, (std::vector<bool>{true, false}));
}

TEST(NvjpegFallbacks, AGpuWithoutJpegEnginesIsNotRetriedNorWarnedOf) {
  ScriptedSteps s{{fails("no such decoder on this GPU (8)", true)}};
  const BackendOpening o = open_backend(s.steps(), "the hardware backend");
  EXPECT_FALSE(o.opened);
  EXPECT_TRUE(o.no_engines);
  EXPECT_EQ(o.note, "this GPU has no JPEG engines");
  EXPECT_FALSE(o.warn);
  EXPECT_EQ(s.asked_strict, std::vector<bool>{true});

  // Refused with the flag for another reason, then "no engines" without it: still no engines, no fault.
  ScriptedSteps t{{fails("internal error (6)"), fails("no such decoder on this GPU (8)", true)}};
  const BackendOpening p = open_backend(t.steps(), "the hardware backend");
  EXPECT_FALSE(p.opened);
  EXPECT_TRUE(p.no_engines);
  EXPECT_FALSE(p.warn);
}

TEST(NvjpegFallbacks, ABackendRefusedBothWaysNamesBothStatuses) {
  ScriptedSteps s{{fails("internal error (6)"), fails("execution failed (7)")}};
  const BackendOpening o = open_backend(s.steps(), "the hardware backend");
  EXPECT_FALSE(o.opened);
  EXPECT_FALSE(o.no_engines);
  EXPECT_EQ(o.note,
            "the hardware backend failed at nvjpegCreateEx: internal error (6); without BITSTREAM_STRICT: execution "
            "failed (7)");
  EXPECT_TRUE(o.warn);
  EXPECT_EQ(s.destroyed, 0);  // no handle was made
}

TEST(NvjpegFallbacks, AFailedStateReleasesTheHandleAndNamesTheCall) {
  ScriptedSteps s({ok()}, fails("allocator failure (5)"));
  const BackendOpening o = open_backend(s.steps(), "the hybrid backend");
  EXPECT_FALSE(o.opened);
  EXPECT_FALSE(o.strict);
  EXPECT_EQ(o.note, "the hybrid backend failed at nvjpegJpegStateCreate: allocator failure (5)");
  EXPECT_TRUE(o.warn);
  EXPECT_EQ(s.destroyed, 1);
}

TEST(NvjpegFallbacks, AHeaderWithoutTheStrictFlagAsksOnceWithoutIt) {
  ScriptedSteps s{{fails("internal error (6)")}};
  const BackendOpening o = open_backend(s.steps(/*strict_flag=*/false), "the hardware backend");
  EXPECT_FALSE(o.opened);
  EXPECT_EQ(s.asked_strict, std::vector<bool>{false});
  EXPECT_EQ(o.note, "the hardware backend failed at nvjpegCreateEx: internal error (6)");

  ScriptedSteps t{{ok()}};
  const BackendOpening p = open_backend(t.steps(false), "the hardware backend");
  EXPECT_TRUE(p.opened);
  EXPECT_FALSE(p.strict);
  EXPECT_EQ(p.note, "");  // nothing was refused
  EXPECT_FALSE(p.warn);
}

// A batched call that fails when `fail` says so, recording every call and the slots each successful one decoded.
struct ScriptedCalls {
  explicit ScriptedCalls(std::function<bool(const std::vector<size_t>&, bool whole)> fail) : fail(std::move(fail)) {}
  std::function<bool(const std::vector<size_t>&, bool whole)> fail;
  std::vector<std::pair<std::vector<size_t>, bool>> calls;
  std::map<size_t, int> decoded;  // slot -> successful calls that held it
  BatchRetry::Call call() {
    return [this](const std::vector<size_t>& slots, bool whole) {
      calls.emplace_back(slots, whole);
      if (fail(slots, whole)) return false;
      for (const size_t s : slots) ++decoded[s];
      return true;
    };
  }
};

std::vector<size_t> slots_upto(size_t n) {
  std::vector<size_t> v(n);
  std::iota(v.begin(), v.end(), size_t{0});
  return v;
}

bool holds(const std::vector<size_t>& slots, size_t slot) {
  return std::find(slots.begin(), slots.end(), slot) != slots.end();
}

TEST(NvjpegFallbacks, ABatchThatDecodesTakesOneCallAsPlanned) {
  ScriptedCalls c{[](const std::vector<size_t>&, bool) { return false; }};
  BatchRetry retry;
  EXPECT_TRUE(retry.run(slots_upto(16), true, c.call()).empty());
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_FALSE(c.calls[0].second);  // crop regions, as planned
  EXPECT_EQ(c.calls[0].first, slots_upto(16));
  EXPECT_TRUE(retry.run({}, true, c.call()).empty());
  EXPECT_EQ(c.calls.size(), 1u);  // no call for a batch without deferred images
}

// N6: one batch whose regions fail no longer turns regions off for the run; the third such batch does.
TEST(NvjpegFallbacks, CropRegionsThatFailAreRetriedWholeAndGivenUpAfterThreeBatches) {
  ScriptedCalls c{[](const std::vector<size_t>&, bool whole) { return !whole; }};
  BatchRetry retry;
  for (int batch = 1; batch <= BatchRetry::kRegionRefusalsTolerated; ++batch) {
    EXPECT_TRUE(retry.regions());
    EXPECT_TRUE(retry.run(slots_upto(8), true, c.call()).empty()) << batch;
    EXPECT_EQ(retry.region_refusals(), batch);
  }
  EXPECT_FALSE(retry.regions());
  ASSERT_EQ(c.calls.size(), 6u);
  for (size_t i = 0; i < c.calls.size(); ++i) EXPECT_EQ(c.calls[i].second, i % 2 == 1) << i;  // regions, then whole
  for (size_t s = 0; s < 8; ++s) EXPECT_EQ(c.decoded[s], 3) << s;                             // once a batch
}

// N5: a damaged file goes to the CPU alone; every other image of its batch is decoded by exactly one call.
TEST(NvjpegFallbacks, DamagedFilesAreSplitOffAloneAndTheRestStayOnTheGpu) {
  for (const std::set<size_t>& damaged : {std::set<size_t>{5}, std::set<size_t>{0, 255}, std::set<size_t>{3, 4, 100}}) {
    ScriptedCalls c{[&](const std::vector<size_t>& slots, bool) {
      return std::any_of(damaged.begin(), damaged.end(), [&](size_t d) { return holds(slots, d); });
    }};
    BatchRetry retry;
    const std::vector<size_t> cpu = retry.run(slots_upto(256), true, c.call());
    EXPECT_EQ(cpu, std::vector<size_t>(damaged.begin(), damaged.end()));
    for (size_t s = 0; s < 256; ++s) EXPECT_EQ(c.decoded[s], damaged.count(s) ? 0 : 1) << s;
    // The planned call, the whole one, then at most 2 calls a level of the halving (8 levels) per damaged file.
    EXPECT_LE(c.calls.size(), 2 + 2 * 8 * damaged.size());
    for (size_t i = 1; i < c.calls.size(); ++i) EXPECT_TRUE(c.calls[i].second) << "a retry with crop regions";
    EXPECT_EQ(retry.region_refusals(), 0);  // a file failed, not the regions
    EXPECT_TRUE(retry.regions());
  }
}

// An engine that fails every call: the batch's calls are bounded, then the CPU decodes all of it.
TEST(NvjpegFallbacks, AnEngineThatFailsEveryCallCostsAtMostTheBatchsCalls) {
  ScriptedCalls c{[](const std::vector<size_t>&, bool) { return true; }};
  BatchRetry retry;
  EXPECT_EQ(retry.run(slots_upto(256), true, c.call()), slots_upto(256));
  EXPECT_EQ(c.calls.size(), static_cast<size_t>(BatchRetry::kCallsPerBatch));
  EXPECT_TRUE(c.decoded.empty());
  // Each batch has its own calls; a batch planned whole is not tried whole twice.
  c.calls.clear();
  EXPECT_EQ(retry.run({7}, false, c.call()), std::vector<size_t>{7});
  EXPECT_EQ(c.calls.size(), 1u);
}

}  // namespace
}  // namespace trainer
