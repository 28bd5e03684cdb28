// ReadAhead: every requested key is fetched at most once and reaches its reader with the fetcher's bytes, whether
// the reader comes before, during or after the fetch; a key whose fetch has not started is claimed by its reader, a
// failed fetch is left to the reader, and fetched bytes over the limit are dropped oldest first.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "support/fixtures.hpp"
#include "trainer/data/sources/read_ahead.hpp"

namespace trainer {
namespace {

using testing::eventually;

std::vector<uint8_t> bytes_of(size_t key) { return std::vector<uint8_t>(4 + key % 7, static_cast<uint8_t>(key)); }

// A fetch that counts its calls per key.
struct CountingFetch {
  std::mutex mutex;
  std::map<size_t, int> calls;
  void operator()(size_t key, std::vector<uint8_t>& out) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      ++calls[key];
    }
    out = bytes_of(key);
  }
  int of(size_t key) {
    std::lock_guard<std::mutex> lock(mutex);
    return calls.count(key) ? calls[key] : 0;
  }
};

TEST(ReadAhead, EveryKeyIsFetchedOnceAndReadWithItsBytes) {
  CountingFetch fetch;
  ReadAhead ahead([&](size_t k, std::vector<uint8_t>& out) { fetch(k, out); }, 4, uint64_t{1} << 20);
  std::vector<size_t> keys;
  for (size_t k = 0; k < 200; ++k) keys.push_back(k * 3);
  ahead.request(keys);
  ahead.request({0, 3, 6});  // already queued or fetched: not again
  // Readers on two threads, as loader workers: whatever take() misses, the reader fetches itself.
  std::atomic<size_t> next{0};
  std::atomic<int> wrong{0};
  auto reader = [&] {
    std::vector<uint8_t> out;
    for (size_t i = next++; i < keys.size(); i = next++) {
      if (!ahead.take(keys[i], out)) fetch(keys[i], out);
      if (out != bytes_of(keys[i])) ++wrong;
    }
  };
  std::thread a(reader), b(reader);
  a.join(), b.join();
  EXPECT_EQ(wrong, 0);
  for (size_t k : keys) EXPECT_EQ(fetch.of(k), 1) << k;  // never fetched twice, by the threads and the readers
  const ReadAhead::Counts c = ahead.counts();
  EXPECT_EQ(c.requested, 200u);
  EXPECT_EQ(c.taken + c.missed, 200u);
  EXPECT_EQ(c.taken, c.fetched);
  EXPECT_EQ(c.failed + c.evicted, 0u);
  std::vector<uint8_t> out;
  EXPECT_FALSE(ahead.take(1, out));  // never requested
}

// One fetching thread held inside the fetch of key 0 until released.
struct GatedFetch {
  std::mutex mutex;
  std::condition_variable changed;
  bool entered = false, released = false;
  std::atomic<int> calls_for_1{0};
  void operator()(size_t key, std::vector<uint8_t>& out) {
    if (key == 1) ++calls_for_1;
    if (key == 3) throw std::runtime_error("connection refused");
    if (key == 0) {
      std::unique_lock<std::mutex> lock(mutex);
      entered = true;
      changed.notify_all();
      changed.wait(lock, [&] { return released; });
    }
    out = bytes_of(key);
  }
};

TEST(ReadAhead, AQueuedKeyIsClaimedAFetchingOneAwaitedAFailedOneLeftToTheReader) {
  GatedFetch gate;
  ReadAhead ahead([&](size_t k, std::vector<uint8_t>& out) { gate(k, out); }, 1, uint64_t{1} << 20);
  ahead.request({0, 1, 3});
  {
    std::unique_lock<std::mutex> lock(gate.mutex);
    gate.changed.wait(lock, [&] { return gate.entered; });
  }
  std::vector<uint8_t> out;
  EXPECT_FALSE(ahead.take(1, out));  // queued behind key 0: its reader takes it over
  std::thread release([&] {
    std::lock_guard<std::mutex> lock(gate.mutex);
    gate.released = true;
    gate.changed.notify_all();
  });
  EXPECT_TRUE(ahead.take(0, out));  // in progress: waited for
  release.join();
  EXPECT_EQ(out, bytes_of(0));
  ASSERT_TRUE(eventually([&] { return ahead.counts().failed == 1; }));
  EXPECT_FALSE(ahead.take(3, out));  // its fetch failed: the reader reads it, and meets the error itself
  const ReadAhead::Counts c = ahead.counts();
  EXPECT_EQ(gate.calls_for_1, 0);  // claimed, so never fetched here
  EXPECT_EQ(c.fetched, 1u);
  EXPECT_EQ(c.taken, 1u);
  EXPECT_EQ(c.missed, 2u);
}

TEST(ReadAhead, BytesOverTheLimitAreDroppedOldestFirst) {
  // Keys 0..4 fetched and never read, 4 bytes each (bytes_of), at most 10 held: 0, 1 and 2 are dropped.
  ReadAhead ahead([](size_t k, std::vector<uint8_t>& out) { out = bytes_of(k * 7); }, 1, 10);
  ahead.request({0, 1, 2, 3, 4});
  ASSERT_TRUE(eventually([&] { return ahead.counts().fetched == 5; }));
  EXPECT_EQ(ahead.counts().evicted, 3u);
  std::vector<uint8_t> out;
  EXPECT_FALSE(ahead.take(2, out));
  EXPECT_TRUE(ahead.take(3, out));
  EXPECT_EQ(out, bytes_of(21));
  EXPECT_TRUE(ahead.take(4, out));
  // A key read and requested again is fetched again.
  ahead.request({3});
  ASSERT_TRUE(eventually([&] { return ahead.counts().fetched == 6; }));
  EXPECT_TRUE(ahead.take(3, out));
}

TEST(ReadAhead, NoThreadsMeansNoFetching) {
  std::atomic<int> calls{0};
  ReadAhead ahead([&](size_t, std::vector<uint8_t>&) { ++calls; }, 0, 1 << 20);
  ahead.request({1, 2});
  std::vector<uint8_t> out;
  EXPECT_FALSE(ahead.take(1, out));
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace trainer
