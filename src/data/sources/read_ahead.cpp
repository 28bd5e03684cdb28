#include "trainer/data/sources/read_ahead.hpp"

namespace trainer {

ReadAhead::ReadAhead(Fetch fetch, size_t threads, uint64_t max_bytes)
    : fetch_(std::move(fetch)), thread_count_(threads), max_bytes_(max_bytes) {}

ReadAhead::~ReadAhead() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& t : threads_) t.join();
}

void ReadAhead::request(const std::vector<size_t>& keys) {
  if (thread_count_ == 0) return;
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
    while (threads_.size() < thread_count_) threads_.emplace_back([this] { work(); });
  }
  work_ready_.notify_all();
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
  if (spares_.size() < thread_count_ * 2) spares_.push_back(std::move(it->second.bytes));
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

void ReadAhead::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    const size_t key = queue_.front();
    queue_.pop_front();
    auto it = entries_.find(key);
    if (it == entries_.end() || it->second.state != State::queued) continue;  // claimed by its worker
    it->second.state = State::fetching;
    const uint64_t serial = it->second.serial;
    std::vector<uint8_t> bytes;
    if (!spares_.empty()) {
      bytes = std::move(spares_.back());
      spares_.pop_back();
    }
    lock.unlock();
    bool ok = true;
    try {
      fetch_(key, bytes);
    } catch (...) {
      ok = false;  // its worker reads it, with the retries and the error a failure deserves
    }
    lock.lock();
    it = entries_.find(key);  // a fetching entry is only ever changed by the thread fetching it
    if (ok) {
      held_bytes_ += bytes.size();
      it->second.bytes = std::move(bytes);
      it->second.state = State::done;
      done_order_.emplace_back(key, serial);
      ++counts_.fetched;
      evict_over_limit();
    } else {
      entries_.erase(it);
      ++counts_.failed;
    }
    fetch_done_.notify_all();
  }
}

}  // namespace trainer
