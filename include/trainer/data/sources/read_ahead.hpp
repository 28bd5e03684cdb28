// Bytes fetched ahead of the loader workers by a thread of their own: remote shards' image members. A worker that
// fetches its own image waits a round trip per image (0.3 ms on loopback, tens of ms from an object store) with its
// core idle; the loader knows its next batches' samples as soon as it plans them, so this thread fetches them
// meanwhile, several at once over connections of its own (a Transport: ConcurrentRanges for http shards), and a
// worker finds its image's bytes already here.
// Only where the bytes come from changes: a sample whose fetch has not started when its worker asks, or failed, is
// read by the worker itself as before (with its retries and its error), so every run reads the same bytes.
//   ReadAhead ahead(std::make_unique<MyTransport>(...), 256 << 20);   // or a Fetch, one key at a time
//   ahead.request({4, 9, 2});          // the pipeline planned a batch of samples 4, 9 and 2
//   if (!ahead.take(9, bytes)) fetch(9, bytes);
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace trainer {

class ReadAhead {
 public:
  // Fetches sample `key`'s bytes into `out`; throws when it cannot (one try: the worker retries on its own).
  using Fetch = std::function<void(size_t key, std::vector<uint8_t>& out)>;

  // How the read-ahead's thread fetches: up to slots() fetches in flight, each begun by start() and handed back by
  // wait(), both called on that thread only; wake(), from any thread, ends a wait() early (new keys to start).
  class Transport {
   public:
    struct Ended {
      size_t key = 0;
      bool ok = false;
      std::vector<uint8_t> bytes;
    };
    virtual ~Transport() = default;
    virtual size_t slots() const = 0;
    // Begins fetching `key` into `buffer` (a spare buffer, its capacity reused); false when the key is not fetched
    // ahead after all (its reader reads it), and then it is not handed back.
    virtual bool start(size_t key, std::vector<uint8_t> buffer) = 0;
    // Waits until at least one fetch ends or wake() is called; appends the ended ones to `ended`.
    virtual void wait(std::vector<Ended>& ended) = 0;
    virtual void wake() = 0;
  };

  struct Counts {
    uint64_t requested = 0;  // keys queued (a key already queued or held is not queued again)
    uint64_t fetched = 0;    // fetches that succeeded
    uint64_t failed = 0;     // fetches that failed or were not started (their worker read the sample itself)
    uint64_t taken = 0;      // take() calls answered with fetched bytes
    uint64_t missed = 0;     // take() calls for a key never requested, not yet started, or failed
    uint64_t evicted = 0;    // fetched bytes dropped unread to stay under the byte limit
  };

  // The thread starts at the first request; at most `max_bytes` of fetched bytes are held (past it the oldest unread
  // ones are dropped: only a pipeline that stopped early leaves bytes unread).
  ReadAhead(std::unique_ptr<Transport> transport, uint64_t max_bytes);
  // `fetch` called on the thread, one key at a time.
  ReadAhead(Fetch fetch, uint64_t max_bytes);
  ~ReadAhead();  // ends the fetches in flight (a Transport drops them; a Fetch in progress is waited for)
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  // Queues the keys, in order, for fetching. Cheap (the pipeline calls it under its lock).
  void request(const std::vector<size_t>& keys);
  // True with `key`'s fetched bytes in `out` (waiting while its fetch is in progress); false when the caller must
  // fetch it: never requested, not started yet (it is then no longer fetched here), or its fetch failed.
  bool take(size_t key, std::vector<uint8_t>& out);
  Counts counts() const;

 private:
  enum class State { queued, fetching, done };
  struct Entry {
    State state = State::queued;
    uint64_t serial = 0;  // tells a re-requested key from its earlier entry in done_order_
    std::vector<uint8_t> bytes;
  };
  void work();
  void evict_over_limit();               // with the lock held
  void finish(Transport::Ended& ended);  // with the lock held

  std::unique_ptr<Transport> transport_;
  uint64_t max_bytes_;
  mutable std::mutex mutex_;
  std::condition_variable work_ready_, fetch_done_;
  std::unordered_map<size_t, Entry> entries_;
  std::deque<size_t> queue_;                            // keys to fetch, oldest first (claimed ones are skipped)
  std::deque<std::pair<size_t, uint64_t>> done_order_;  // (key, serial) of fetched entries, oldest first
  std::vector<std::vector<uint8_t>> spares_;            // buffers readers gave back, for the next fetches
  uint64_t held_bytes_ = 0;
  uint64_t next_serial_ = 0;
  size_t in_flight_ = 0;
  Counts counts_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace trainer
