#include "trainer/util/http_range.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <exception>
#include <thread>
#include <unordered_map>

#include "trainer/util/error.hpp"

#ifdef TRAINER_HAVE_CURL
#include <curl/curl.h>
#endif

namespace trainer {

bool is_http_address(std::string_view location) {
  return location.substr(0, 7) == "http://" || location.substr(0, 8) == "https://";
}

std::string HttpValidators::text() const {
  std::string t = std::to_string(size) + " bytes";
  if (!etag.empty()) t += ", ETag " + etag;
  if (!last_modified.empty()) t += ", Last-Modified " + last_modified;
  return t;
}

namespace {

uint64_t header_number(std::string_view text) {
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size() ? value : 0;
}

}  // namespace

void HttpAnswerHeaders::add(std::string_view line) {
  if (line.substr(0, 5) == "HTTP/") {  // a status line: a new answer (after a redirect or a 100 Continue)
    *this = HttpAnswerHeaders{};
    return;
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return;
  std::string name(line.substr(0, colon));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string_view value = line.substr(colon + 1);
  const size_t first = value.find_first_not_of(" \t"), last = value.find_last_not_of(" \t\r\n");
  value = first == std::string_view::npos ? std::string_view() : value.substr(first, last - first + 1);
  if (name == "etag") etag_ = value.substr(0, 2) == "W/" ? "" : std::string(value);  // a weak one promises no bytes
  if (name == "last-modified") last_modified_ = std::string(value);
  if (name == "content-length") length_ = header_number(value);
  if (name == "content-range") {
    const size_t slash = value.rfind('/');
    total_ = slash == std::string_view::npos ? 0 : header_number(value.substr(slash + 1));  // "*": not known
  }
}

HttpValidators HttpAnswerHeaders::validators(bool range) const {
  return {range ? total_ : length_, etag_, last_modified_};
}

namespace {

std::string range_text(uint64_t offset, uint64_t size) {
  return size == 0 ? std::string("the whole file")
                   : "bytes " + std::to_string(offset) + "-" + std::to_string(offset + size - 1);
}

}  // namespace

#ifdef TRAINER_HAVE_CURL

namespace {

bool curl_ready() {
  static const CURLcode global = curl_global_init(CURL_GLOBAL_DEFAULT);  // once, before any transfer
  return global == CURLE_OK;
}

// One easy handle per thread: libcurl keeps its connection open, so the next request to the host skips the
// handshake.
class ThreadHandle {
 public:
  ThreadHandle() {
    if (curl_ready()) curl_ = curl_easy_init();
  }
  ~ThreadHandle() {
    if (curl_) curl_easy_cleanup(curl_);
  }
  ThreadHandle(const ThreadHandle&) = delete;
  ThreadHandle& operator=(const ThreadHandle&) = delete;
  CURL* get() const { return curl_; }

 private:
  CURL* curl_ = nullptr;
};

struct Body {
  std::vector<uint8_t>* out = nullptr;
  uint64_t limit = 0;  // more bytes than this: the answer is not the range asked for
  bool over = false;
};

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto& body = *static_cast<Body*>(user);
  const size_t n = size * count;
  if (body.out->size() + n > body.limit) {
    body.over = true;
    return 0;
  }
  const auto* bytes = reinterpret_cast<const uint8_t*>(data);  // uint8_t to uint8_t: one memmove
  body.out->insert(body.out->end(), bytes, bytes + n);
  return n;
}

// libcurl's progress callback, called about once a second while a transfer waits and more often while it moves:
// non-zero aborts it.
int on_progress(void* stop, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<const std::atomic<bool>*>(stop)->load() ? 1 : 0;
}

bool stopped(const HttpOptions& options) { return options.stop && options.stop->load(); }

constexpr long kReceiveBuffer = 64 * 1024;

// What every request sets: the address, redirects (never from https to http), timeouts, no signals, the stop flag.
void set_common_options(CURL* curl, const std::string& url, const HttpOptions& options) {
  curl_easy_reset(curl);
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
  const bool secure = url.rfind("https://", 0) == 0;  // a redirect never leaves https
#if LIBCURL_VERSION_NUM >= 0x075500
  curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, secure ? "https" : "http,https");
#else
  curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS, secure ? CURLPROTO_HTTPS : CURLPROTO_HTTP | CURLPROTO_HTTPS);
#endif
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM: the run's signal handlers stay its own
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, static_cast<long>(options.connect_timeout_s));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(options.stall_timeout_s));
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "trainer");
  // A receive buffer of 64 KB, not the default 16: an image's range arrives in one or two recv() calls and
  // callbacks, each after its own poll(), not four or more. On loopback against nginx, 8 threads fetching 60 KB
  // ranges took 55 instead of 66 us of client CPU a range; larger buffers gained nothing more.
  curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, kReceiveBuffer);
  if (options.stop) {
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, const_cast<std::atomic<bool>*>(options.stop));
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  }
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
  static_cast<HttpAnswerHeaders*>(user)->add(std::string_view(data, size * count));
  return size * count;
}

void capture_headers(CURL* curl, HttpAnswerHeaders* headers) {
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, headers);
}

// An error status: 4xx (`final`: retrying cannot help) or 5xx; "" for any other.
std::string status_problem(long status, bool& final) {
  if (status >= 400 && status < 500) final = true;
  return status >= 400 ? "the server answered HTTP " + std::to_string(status) : "";
}

// One request. Returns "" on success, else why it failed; `final` is set when retrying cannot help, `status` to the
// answer's HTTP status (0: none).
std::string request_once(CURL* curl, const std::string& url, uint64_t offset, uint64_t size, std::vector<uint8_t>& out,
                         const HttpOptions& options, bool& final, long& status, HttpAnswerHeaders* headers = nullptr) {
  out.clear();
  if (size > 0) out.reserve(size);  // one allocation, not a doubling per 16 KB that curl hands over
  Body body{&out, size == 0 ? options.max_bytes : size, false};
  set_common_options(curl, url, options);
  if (headers) capture_headers(curl, headers);
  const std::string range = std::to_string(offset) + "-" + std::to_string(offset + size - 1);
  if (size > 0) curl_easy_setopt(curl, CURLOPT_RANGE, range.c_str());
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  const CURLcode result = curl_easy_perform(curl);
  status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  if (std::string why = status_problem(status, final); !why.empty()) return why;
  if (body.over && size == 0) {
    final = true;
    return "the file is larger than " + std::to_string(options.max_bytes) + " bytes";
  }
  if (size > 0 && status == 200) {
    final = true;
    return "the server ignores Range requests (HTTP 200 for a range): it would send the whole shard for every sample";
  }
  if (result != CURLE_OK) return curl_easy_strerror(result);
  if (size > 0 && out.size() != size)
    return "the answer held " + std::to_string(out.size()) + " of " + std::to_string(size) + " bytes";
  return "";
}

// A whole file read through, resumed at `offset` when it is not 0.
struct Stream {
  const std::function<bool(const uint8_t*, size_t)>* sink = nullptr;
  CURL* curl = nullptr;
  uint64_t offset = 0;        // bytes handed to the sink so far, over every request
  bool resumed = false;       // this request asked for the bytes from `offset` on
  bool stopped = false;       // the sink needs no more
  bool refused = false;       // the answer's status was not the one asked for: its bytes were not handed on
  HttpAnswerHeaders headers;  // this request's answer
  bool answered = false;      // this request's answer has sent bytes (its headers are complete)
  HttpValidators first;       // the validators of the read's first answer
  std::string changed;        // a resumed answer's validators, when they are not the first's
  std::exception_ptr error;
};

size_t on_stream(char* data, size_t size, size_t count, void* user) {
  auto& s = *static_cast<Stream*>(user);
  long status = 0;
  curl_easy_getinfo(s.curl, CURLINFO_RESPONSE_CODE, &status);
  if (status != (s.resumed ? 206 : 200)) {  // an error page, or the whole file again for a resumed read
    s.refused = true;
    return 0;
  }
  if (!s.answered) {  // the first bytes of this answer: its headers are all in
    s.answered = true;
    const HttpValidators now = s.headers.validators(s.resumed);
    if (!s.resumed) s.first = now;
    else if (now.contradicts(s.first)) {
      s.changed = now.text();
      return 0;
    }
  }
  const size_t n = size * count;
  try {
    s.offset += n;
    if ((*s.sink)(reinterpret_cast<const uint8_t*>(data), n)) return n;
    s.stopped = true;
  } catch (...) {
    s.error = std::current_exception();  // never through libcurl's C frames
  }
  return 0;
}

std::string stream_once(CURL* curl, const std::string& url, Stream& stream, const HttpOptions& options, bool& final,
                        long& status) {
  set_common_options(curl, url, options);
  const std::string range = std::to_string(stream.offset) + "-";
  stream.resumed = stream.offset > 0;
  stream.answered = false;
  if (stream.resumed) curl_easy_setopt(curl, CURLOPT_RANGE, range.c_str());
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_stream);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &stream);
  capture_headers(curl, &stream.headers);
  const CURLcode result = curl_easy_perform(curl);
  status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  if (stream.error || stream.stopped) return "";
  if (!stream.changed.empty()) {
    final = true;
    return "the file changed while it was read (first " + stream.first.text() + ", then " + stream.changed + ")";
  }
  if (std::string why = status_problem(status, final); !why.empty()) return why;
  if (stream.resumed && status == 200) {
    final = true;
    return "the connection dropped and the server cannot resume the file (HTTP 200 for a range request)";
  }
  if (stream.refused) return "the server answered HTTP " + std::to_string(status);
  if (result != CURLE_OK) return curl_easy_strerror(result);
  return "";
}

CURL* thread_curl(const std::string& url) {
  thread_local ThreadHandle handle;
  if (!handle.get()) throw DownloadError(url + ": libcurl could not start a transfer");
  return handle.get();
}

}  // namespace

void http_stream(const std::string& url, const std::function<bool(const uint8_t*, size_t)>& sink,
                 const HttpOptions& options, HttpValidators* validators) {
  CURL* curl = thread_curl(url);
  Stream stream;
  stream.sink = &sink;
  stream.curl = curl;
  std::string why;
  long status = 0;
  double wait_s = options.first_wait_s;
  for (int failures = 0;;) {
    bool final = false;
    const uint64_t before = stream.offset;
    why = stream_once(curl, url, stream, options, final, status);
    if (stream.error) std::rethrow_exception(stream.error);
    if (why.empty()) {
      if (validators) *validators = stream.first;
      return;
    }
    if (stopped(options)) throw DownloadError(url + ": stopped at byte " + std::to_string(stream.offset));
    if (stream.offset > before) {  // it moved on before it failed: a long read is not ended by drops far apart
      failures = 0;
      wait_s = options.first_wait_s;
    }
    if (final || ++failures >= options.attempts) break;
    std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
    wait_s *= 2;
  }
  const std::string message = url + ": reading it through, at byte " + std::to_string(stream.offset) + ": " + why;
  if (status >= 400 && status < 500) throw HttpStatusError(message, status);
  throw DownloadError(message);
}

namespace {

void read_with_retries(const std::string& url, uint64_t offset, uint64_t size, std::vector<uint8_t>& out,
                       const HttpOptions& options, HttpAnswerHeaders* headers) {
  CURL* curl = thread_curl(url);
  std::string why;
  long status = 0;
  double wait_s = options.first_wait_s;
  for (int attempt = 1;; ++attempt) {
    bool final = false;
    why = request_once(curl, url, offset, size, out, options, final, status, headers);
    if (why.empty()) return;
    if (stopped(options)) throw DownloadError(url + ": " + range_text(offset, size) + ": stopped");
    if (final || attempt >= options.attempts) break;
    std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
    wait_s *= 2;
  }
  const std::string message = url + ": " + range_text(offset, size) + ": " + why;
  if (status >= 400 && status < 500) throw HttpStatusError(message, status);
  throw DownloadError(message);
}

}  // namespace

void http_read(const std::string& url, uint64_t offset, uint64_t size, std::vector<uint8_t>& out,
               const HttpOptions& options) {
  read_with_retries(url, offset, size, out, options, nullptr);
}

HttpValidators http_validators(const std::string& url, const HttpOptions& options) {
  std::vector<uint8_t> first;
  HttpAnswerHeaders headers;
  read_with_retries(url, 0, 1, first, options, &headers);
  return headers.validators(/*range=*/true);
}

bool http_reachable(const std::string& url, std::string& why) {
  try {
    std::vector<uint8_t> first;
    http_read(url, 0, 1, first, HttpOptions{/*attempts=*/1});
    return true;
  } catch (const Error& e) {
    why = e.what();
    return false;
  }
}

namespace {

// A range in flight: its easy handle writes into `bytes` through `body`.
struct RangeTransfer {
  uint64_t tag = 0, offset = 0, size = 0;
  std::string url, range;
  std::vector<uint8_t> bytes;
  Body body;
};

}  // namespace

struct ConcurrentRanges::State {
  CURLM* multi = nullptr;
  HttpOptions options;
  std::vector<CURL*> idle;  // easy handles between transfers (their connections stay in the multi handle's cache)
  std::unordered_map<CURL*, RangeTransfer> active;
  std::vector<Ended> refused;  // transfers that could not start, handed back by the next wait()

  // Moves every transfer that ended from `active` to `ended`.
  void collect(std::vector<Ended>& ended) {
    int left = 0;
    while (CURLMsg* message = curl_multi_info_read(multi, &left)) {
      if (message->msg != CURLMSG_DONE) continue;
      CURL* curl = message->easy_handle;
      const CURLcode result = message->data.result;  // read before the handle is removed
      const auto it = active.find(curl);
      if (it == active.end()) continue;
      RangeTransfer& t = it->second;
      long status = 0;
      curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
      bool final = false;
      std::string why = status_problem(status, final);
      if (why.empty() && status == 200)
        why =
            "the server ignores Range requests (HTTP 200 for a range): it would send the whole shard for every sample";
      if (why.empty() && result != CURLE_OK) why = curl_easy_strerror(result);
      if (why.empty() && t.bytes.size() != t.size)
        why = "the answer held " + std::to_string(t.bytes.size()) + " of " + std::to_string(t.size) + " bytes";
      Ended e;
      e.tag = t.tag;
      e.bytes = std::move(t.bytes);
      if (!why.empty()) e.error = t.url + ": " + range_text(t.offset, t.size) + ": " + why;
      ended.push_back(std::move(e));
      curl_multi_remove_handle(multi, curl);
      idle.push_back(curl);
      active.erase(it);
    }
  }
};

ConcurrentRanges::ConcurrentRanges(size_t connections, HttpOptions options)
    : connections_(connections), state_(std::make_unique<State>()) {
  state_->options = options;
  if (curl_ready()) state_->multi = curl_multi_init();
  if (state_->multi) {
    curl_multi_setopt(state_->multi, CURLMOPT_MAX_HOST_CONNECTIONS, static_cast<long>(connections));
    curl_multi_setopt(state_->multi, CURLMOPT_MAXCONNECTS, static_cast<long>(connections));
  }
}

ConcurrentRanges::~ConcurrentRanges() {
  for (auto& [curl, transfer] : state_->active) {
    curl_multi_remove_handle(state_->multi, curl);
    curl_easy_cleanup(curl);
  }
  for (CURL* curl : state_->idle) curl_easy_cleanup(curl);
  if (state_->multi) curl_multi_cleanup(state_->multi);
}

void ConcurrentRanges::start(uint64_t tag, const std::string& url, uint64_t offset, uint64_t size,
                             std::vector<uint8_t> buffer) {
  CURL* curl = nullptr;
  if (!state_->idle.empty()) {
    curl = state_->idle.back();
    state_->idle.pop_back();
  } else if (state_->multi) {
    curl = curl_easy_init();
  }
  if (!curl) {
    state_->refused.push_back(
        {tag, {}, url + ": " + range_text(offset, size) + ": libcurl could not start a transfer"});
    return;
  }
  RangeTransfer& t = state_->active[curl];
  t.tag = tag;
  t.offset = offset;
  t.size = size;
  t.url = url;
  t.range = std::to_string(offset) + "-" + std::to_string(offset + size - 1);
  t.bytes = std::move(buffer);
  t.bytes.clear();
  t.bytes.reserve(size);
  t.body = Body{&t.bytes, size, false};
  set_common_options(curl, url, state_->options);
  curl_easy_setopt(curl, CURLOPT_RANGE, t.range.c_str());
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t.body);
  if (curl_multi_add_handle(state_->multi, curl) != CURLM_OK) {
    state_->refused.push_back(
        {tag, std::move(t.bytes), url + ": " + range_text(offset, size) + ": libcurl could not start a transfer"});
    state_->active.erase(curl);
    state_->idle.push_back(curl);
  }
}

void ConcurrentRanges::wait(std::vector<Ended>& ended, int timeout_ms) {
  const size_t before = ended.size();
  for (Ended& e : state_->refused) ended.push_back(std::move(e));
  state_->refused.clear();
  if (!state_->multi) return;
  int running = 0;
  curl_multi_perform(state_->multi, &running);
  state_->collect(ended);
  if (ended.size() > before) return;
#if LIBCURL_VERSION_NUM < 0x074400  // before 7.68: no curl_multi_wakeup, so wake() is noticed within 10 ms
  timeout_ms = std::min(timeout_ms, 10);
#endif
#if LIBCURL_VERSION_NUM >= 0x074200
  curl_multi_poll(state_->multi, nullptr, 0, timeout_ms, nullptr);
#else
  curl_multi_wait(state_->multi, nullptr, 0, timeout_ms, nullptr);
#endif
  curl_multi_perform(state_->multi, &running);
  state_->collect(ended);
}

void ConcurrentRanges::wake() {
#if LIBCURL_VERSION_NUM >= 0x074400
  if (state_->multi) curl_multi_wakeup(state_->multi);
#endif
}

#else

void http_read(const std::string& url, uint64_t offset, uint64_t size, std::vector<uint8_t>&, const HttpOptions&) {
  throw DownloadError(url + ": " + range_text(offset, size) +
                      ": this build of trainer cannot read http(s) addresses (it was built without libcurl)");
}

void http_stream(const std::string& url, const std::function<bool(const uint8_t*, size_t)>&, const HttpOptions&,
                 HttpValidators*) {
  throw DownloadError(url + ": this build of trainer cannot read http(s) addresses (it was built without libcurl)");
}

HttpValidators http_validators(const std::string& url, const HttpOptions&) {
  throw DownloadError(url + ": this build of trainer cannot read http(s) addresses (it was built without libcurl)");
}

bool http_reachable(const std::string&, std::string& why) {
  why = "this build of trainer cannot read http(s) addresses (it was built without libcurl)";
  return false;
}

struct ConcurrentRanges::State {
  std::vector<Ended> refused;
};

ConcurrentRanges::ConcurrentRanges(size_t connections, HttpOptions)
    : connections_(connections), state_(std::make_unique<State>()) {}

ConcurrentRanges::~ConcurrentRanges() = default;

void ConcurrentRanges::start(uint64_t tag, const std::string& url, uint64_t offset, uint64_t size,
                             std::vector<uint8_t>) {
  state_->refused.push_back({tag,
                             {},
                             url + ": " + range_text(offset, size) +
                                 ": this build of trainer cannot read http(s) addresses (it was built "
                                 "without libcurl)"});
}

void ConcurrentRanges::wait(std::vector<Ended>& ended, int) {
  for (Ended& e : state_->refused) ended.push_back(std::move(e));
  state_->refused.clear();
}

void ConcurrentRanges::wake() {}

#endif

}  // namespace trainer
