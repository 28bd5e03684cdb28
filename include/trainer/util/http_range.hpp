// Bytes of a file at an http(s) address, whole or a range of them (remote WebDataset shards and their indexes),
// with libcurl. Each thread keeps its own connection open between requests; a refused or dropped connection, a
// stall, an answer cut short or a 5xx status is retried after a wait that doubles; a 4xx status (404: no such file)
// fails at once.
//   std::vector<uint8_t> bytes;
//   http_read("http://host/train-000001.tar", 1536, 40213, bytes);   // bytes 1536 .. 41748
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "trainer/util/error.hpp"

namespace trainer {

// The server's final answer was an HTTP error status (4xx): callers that expect a file to be optional check for 404.
class HttpStatusError : public DownloadError {
 public:
  HttpStatusError(const std::string& m, long status) : DownloadError(m), status_(status) {}
  long status() const { return status_; }

 private:
  long status_;
};

struct HttpOptions {
  int attempts = 5;            // tries in all before giving up
  double first_wait_s = 0.25;  // the wait after the first failure; doubled after each further one
  int64_t connect_timeout_s = 15;
  int64_t stall_timeout_s = 30;            // a connection that delivers nothing for this long is dropped
  uint64_t max_bytes = uint64_t{1} << 30;  // a whole-file answer larger than this is refused
  // When set and it turns true, the transfer ends within about a second (even one waiting to connect or stalled)
  // and no retry follows: the call throws DownloadError "...: stopped". For a thread that must be able to quit.
  const std::atomic<bool>* stop = nullptr;
};

bool is_http_address(std::string_view location);

// What tells one version of the file at an address from another (HTTP's validators): its size, and the strong ETag
// and the Last-Modified date its server sends. Answers with equal validators are taken to hold the same bytes, as
// HTTP caches take them; without an ETag or a date nothing is known (a weak ETag, "W/...", does not promise the same
// bytes and counts as none).
struct HttpValidators {
  uint64_t size = 0;
  std::string etag, last_modified;
  bool known() const { return size > 0 && (!etag.empty() || !last_modified.empty()); }
  // Whether `o` names another version: a size, ETag or date that both have and that differs. (A range's answer may
  // leave out a date its whole-file answer sends: HTTP asks 206 answers to repeat the ETag, not Last-Modified.)
  bool contradicts(const HttpValidators& o) const {
    const auto differ = [](const auto& a, const auto& b, const auto& none) { return a != none && b != none && a != b; };
    return differ(size, o.size, uint64_t{0}) || differ(etag, o.etag, std::string()) ||
           differ(last_modified, o.last_modified, std::string());
  }
  // 12345 bytes, ETag "5f-1a", Last-Modified Mon, 07 Dec 2026 10:00:00 GMT: for messages and digests.
  std::string text() const;
};

// The headers of one HTTP answer that name its file's version, fed a line at a time as libcurl hands them over
// (every answer's, a redirect's too: a status line starts them anew, so what is left is the final answer's).
class HttpAnswerHeaders {
 public:
  void add(std::string_view line);
  // Of a whole-file answer (the size from Content-Length) or of a range's (from the total after Content-Range's "/").
  HttpValidators validators(bool range) const;

 private:
  std::string etag_, last_modified_;
  uint64_t length_ = 0, total_ = 0;
};

// `size` bytes from `offset` (size 0: the whole file, offset ignored) into `out`, replacing its contents. A range
// request must be answered with exactly that range (206): a server that ignores ranges is refused, as it would send
// whole shards for every sample. Throws DownloadError naming the address, the range and the last failure
// (HttpStatusError for a 4xx status).
void http_read(const std::string& url, uint64_t offset, uint64_t size, std::vector<uint8_t>& out,
               const HttpOptions& options = {});

// The whole file at `url`, handed to `sink` a piece at a time as it arrives (a shard read through once, never held
// whole); `sink` returns false when it needs no more (the transfer stops there, without error). A connection that
// drops, stalls or answers 5xx is resumed where it stopped with a range request, under http_read's retry rule (the
// tries count again after a piece arrives); a server that cannot resume (200 for a range) or a 4xx status fails.
// An exception from `sink` stops the transfer and is rethrown. Throws DownloadError naming the address, the offset
// and the last failure (HttpStatusError for a 4xx status).
// `validators`, when given, receives the file's (its first answer's); an answer that resumes the read with validators
// that contradict those (the file was replaced meanwhile) fails it rather than joining two files' bytes.
void http_stream(const std::string& url, const std::function<bool(const uint8_t* data, size_t size)>& sink,
                 const HttpOptions& options = {}, HttpValidators* validators = nullptr);

// The validators of the file at `url` now: one request for its first byte (the size from the answer's
// Content-Range). Throws DownloadError as http_read does.
HttpValidators http_validators(const std::string& url, const HttpOptions& options = {});

// Range requests in flight together, driven by the one thread that calls start() and wait() (libcurl's multi
// interface): up to `connections` transfers at once over connections kept open between them, where a thread per
// connection would take a wake-up and a poll() of its own for each range. One try each, no retries: its caller reads
// a failed range again in its own way (the read-ahead's worker does, with http_read's retries and error).
//   ConcurrentRanges ranges(8);
//   ranges.start(7, "http://host/train-000001.tar", 1536, 40213, std::move(buffer));
//   std::vector<ConcurrentRanges::Ended> ended;
//   ranges.wait(ended);   // ended[0].tag == 7, .bytes the range's bytes, .error "" (or why it failed)
class ConcurrentRanges {
 public:
  struct Ended {
    uint64_t tag = 0;
    std::vector<uint8_t> bytes;
    std::string error;  // "" when the range arrived whole
  };

  explicit ConcurrentRanges(size_t connections, HttpOptions options = {});
  ~ConcurrentRanges();  // drops the transfers in flight
  ConcurrentRanges(const ConcurrentRanges&) = delete;
  ConcurrentRanges& operator=(const ConcurrentRanges&) = delete;

  size_t connections() const { return connections_; }
  // Starts fetching `size` (> 0) bytes of `url` from `offset` into `buffer` (its capacity reused); at most
  // connections() at once, counted by the caller. The bytes come back from wait() with `tag`.
  void start(uint64_t tag, const std::string& url, uint64_t offset, uint64_t size, std::vector<uint8_t> buffer);
  // Moves the transfers on until at least one ends, wake() is called or `timeout_ms` passes; appends those that
  // ended to `ended`.
  void wait(std::vector<Ended>& ended, int timeout_ms = 1000);
  // From any thread: a wait() in progress (or the next one) returns now.
  void wake();

 private:
  struct State;
  size_t connections_;
  std::unique_ptr<State> state_;
};

// Whether the address answers (HTTP 2xx) for a ranged read of its first byte; for doctor. Never throws: false, with
// `why` set, when it does not.
bool http_reachable(const std::string& url, std::string& why);

}  // namespace trainer
