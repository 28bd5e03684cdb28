#include "trainer/data/sources/read_ahead.hpp"

#include <algorithm>

namespace trainer {

namespace {

// A Fetch as a Transport: each fetch runs in start(), on the read-ahead's thread, one at a time.
class FetchOneAtATime : public ReadAhead::Transport {
 public:
  explicit FetchOneAtATime(ReadAhead::Fetch fetch) : fetch_(std::move(fetch)) {}
  size_t slots() const override { return 1; }
  bool start(size_t key, std::vector<uint8_t> buffer) override {
    Ended e{key, true, std::move(buffer)};
    try {
      fetch_(key, e.bytes);
    } catch (...) {
      e.ok = false;  // its worker reads it, with the retries and the error a failure deserves
    }
    ended_.push_back(std::move(e));
    return true;
  }
  void wait(std::vector<Ended>& ended) override {
    for (Ended& e : ended_) ended.push_back(std::move(e));
    ended_.clear();
  }
  void wake() override {}

 private:
  ReadAhead::Fetch fetch_;
  std::vector<Ended> ended_;
};

}  // namespace

ReadAhead::ReadAhead(std::unique_ptr<Transport> transport, uint64_t max_bytes)
    : transport_(std::move(transport)), max_bytes_(max_bytes) {}

ReadAhead::ReadAhead(Fetch fetch, uint64_t max_bytes)
    : ReadAhead(std::make_unique<FetchOneAtATime>(std::move(fetch)), max_bytes) {}

ReadAhead::~ReadAhead() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  transport_->wake();
  if (thread_.joinable()) thread_.join();
}

void ReadAhead::request(const std::vector<size_t>& keys) {
  if (transport_->slots() == 0) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t key : keys) {
      // A key already queued, in progress or fetched (a repeated copy, or a sample planned again before it was
      // read) is not fetched twice: the first take() gets it and a second one reads it itself.
      if (!entries_.emplace(key, Entry{State::queued, next_serial_, {}}).second) continue;
      ++next_serial_;
      queue_.push_back(key);
      ++counts_.requested;
    }
    if (!thread_.joinable()) thread_ = std::thread([this] { work(); });
  }
  work_ready_.notify_all();
  transport_->wake();  // a wait() in progress returns to start the new keys
}

bool ReadAhead::take(size_t key, std::vector<uint8_t>& out) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  if (it != entries_.end() && it->second.state == State::queued) {
    entries_.erase(it);  // claimed: the caller fetches it now rather than wait behind the queue
    it = entries_.end();
  }
  if (it != entries_.end() && it->second.state == State::fetching) {
    fetch_done_.wait(lock, [&] {
      it = entries_.find(key);
      return it == entries_.end() || it->second.state != State::fetching;
    });
  }
  if (it == entries_.end()) {  // never requested, claimed above, failed, or evicted
    ++counts_.missed;
    return false;
  }
  out.swap(it->second.bytes);
  held_bytes_ -= out.size();
  // The reader's previous buffer is kept for a later fetch: a fresh one per image would come from the kernel,
  // zeroed a page fault at a time.
  if (spares_.size() < transport_->slots() * 2) spares_.push_back(std::move(it->second.bytes));
  entries_.erase(it);
  ++counts_.taken;
  return true;
}

ReadAhead::Counts ReadAhead::counts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counts_;
}

void ReadAhead::evict_over_limit() {
  while (held_bytes_ > max_bytes_ && !done_order_.empty()) {
    const auto [key, serial] = done_order_.front();
    done_order_.pop_front();
    const auto it = entries_.find(key);
    if (it == entries_.end() || it->second.serial != serial || it->second.state != State::done) continue;
    held_bytes_ -= it->second.bytes.size();
    entries_.erase(it);
    ++counts_.evicted;
  }
  // Taken entries leave stale pairs behind; drop them from the front so the list stays as short as what is held.
  while (!done_order_.empty()) {
    const auto it = entries_.find(done_order_.front().first);
    if (it != entries_.end() && it->second.serial == done_order_.front().second) break;
    done_order_.pop_front();
  }
}

void ReadAhead::finish(Transport::Ended& ended) {
  const auto it = entries_.find(ended.key);  // a fetching entry is only ever changed by this thread
  if (it == entries_.end() || it->second.state != State::fetching) return;
  if (ended.ok) {
    held_bytes_ += ended.bytes.size();
    it->second.bytes = std::move(ended.bytes);
    it->second.state = State::done;
    done_order_.emplace_back(ended.key, it->second.serial);
    ++counts_.fetched;
    evict_over_limit();
  } else {
    entries_.erase(it);
    ++counts_.failed;
  }
}

void ReadAhead::work() {
  std::vector<Transport::Ended> ended;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    // Start queued keys while a slot is free, oldest first; keys their workers claimed meanwhile are gone.
    while (in_flight_ < transport_->slots() && !queue_.empty()) {
      const size_t key = queue_.front();
      queue_.pop_front();
      const auto it = entries_.find(key);
      if (it == entries_.end() || it->second.state != State::queued) continue;
      it->second.state = State::fetching;
      std::vector<uint8_t> buffer;
      if (!spares_.empty()) {
        buffer = std::move(spares_.back());
        spares_.pop_back();
      }
      lock.unlock();
      const bool started = transport_->start(key, std::move(buffer));
      lock.lock();
      if (started) {
        ++in_flight_;
        continue;
      }
      entries_.erase(key);  // not fetched ahead: a take() waiting on it returns false, and its reader reads it
      ++counts_.failed;
      fetch_done_.notify_all();
    }
    if (in_flight_ == 0) {
      work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      continue;
    }
    lock.unlock();
    ended.clear();
    transport_->wait(ended);
    lock.lock();
    for (Transport::Ended& e : ended) finish(e);
    in_flight_ -= std::min(in_flight_, ended.size());
    if (!ended.empty()) fetch_done_.notify_all();
  }
}

}  // namespace trainer
