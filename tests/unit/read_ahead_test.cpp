// ReadAhead: every requested key is fetched at most once and reaches its reader with the fetcher's bytes, whether
// the reader comes before, during or after the fetch; a key whose fetch has not started is claimed by its reader, a
// failed fetch is left to the reader, and fetched bytes over the limit are dropped oldest first; with a Transport,
// as many fetches are in flight as it has slots, in request order, and a key it does not start is left to its
// reader.
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
  ReadAhead ahead([&](size_t k, std::vector<uint8_t>& out) { fetch(k, out); }, uint64_t{1} << 20);
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

// The fetch of key 0 held until released.
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
  ReadAhead ahead([&](size_t k, std::vector<uint8_t>& out) { gate(k, out); }, uint64_t{1} << 20);
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
  ReadAhead ahead([](size_t k, std::vector<uint8_t>& out) { out = bytes_of(k * 7); }, 10);
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

// A transport whose fetches end when the test says so.
class HeldTransport : public ReadAhead::Transport {
 public:
  HeldTransport(size_t slots, size_t refused) : slots_(slots), refused_(refused) {}
  size_t slots() const override { return slots_; }
  bool start(size_t key, std::vector<uint8_t>) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (key == refused_) return false;
    started_.push_back(key);
    return true;
  }
  void wait(std::vector<Ended>& ended) override {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return !ending_.empty() || woken_; });
    woken_ = false;
    for (Ended& e : ending_) ended.push_back(std::move(e));
    ending_.clear();
  }
  void wake() override {
    std::lock_guard<std::mutex> lock(mutex_);
    woken_ = true;
    changed_.notify_all();
  }
  void end(size_t key, bool ok) {
    std::lock_guard<std::mutex> lock(mutex_);
    ending_.push_back({key, ok, bytes_of(key)});
    changed_.notify_all();
  }
  std::vector<size_t> started() {
    std::lock_guard<std::mutex> lock(mutex_);
    return started_;
  }

 private:
  size_t slots_, refused_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<size_t> started_;
  std::vector<Ended> ending_;
  bool woken_ = false;
};

TEST(ReadAhead, ATransportHasAsManyFetchesInFlightAsSlotsInRequestOrder) {
  auto owned = std::make_unique<HeldTransport>(/*slots=*/2, /*refused=*/3);
  HeldTransport& transport = *owned;
  ReadAhead ahead(std::move(owned), uint64_t{1} << 20);
  ahead.request({0, 1, 2, 3, 4});
  ASSERT_TRUE(eventually([&] { return transport.started().size() == 2; }));
  EXPECT_EQ(transport.started(), (std::vector<size_t>{0, 1}));  // both slots taken: 2 waits for one to end
  transport.end(0, true);
  ASSERT_TRUE(eventually([&] { return transport.started().size() == 3; }));
  EXPECT_EQ(transport.started().back(), 2u);
  std::vector<uint8_t> out;
  EXPECT_TRUE(ahead.take(0, out));
  EXPECT_EQ(out, bytes_of(0));
  transport.end(1, false);  // failed: left to its reader; then 3 is refused, so 4 starts
  ASSERT_TRUE(eventually([&] { return transport.started().size() == 4; }));
  EXPECT_EQ(transport.started().back(), 4u);
  EXPECT_FALSE(ahead.take(1, out));
  EXPECT_FALSE(ahead.take(3, out));
  transport.end(2, true);
  transport.end(4, true);
  EXPECT_TRUE(ahead.take(4, out));  // waited for while in flight, or already here
  EXPECT_EQ(out, bytes_of(4));
  EXPECT_TRUE(ahead.take(2, out));
  EXPECT_EQ(out, bytes_of(2));
  const ReadAhead::Counts c = ahead.counts();
  EXPECT_EQ(c.requested, 5u);
  EXPECT_EQ(c.fetched, 3u);
  EXPECT_EQ(c.failed, 2u);
  EXPECT_EQ(c.taken, 3u);
  EXPECT_EQ(c.missed, 2u);
  ahead.request({5});  // still in flight when the read-ahead ends: dropped, no hang
  ASSERT_TRUE(eventually([&] { return transport.started().size() == 5; }));
}

}  // namespace
}  // namespace trainer
