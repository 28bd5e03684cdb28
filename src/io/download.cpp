#include "trainer/io/download.hpp"

#include <fstream>
#include <system_error>
#include <vector>

#include "trainer/platform/files.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/sha256.hpp"

#ifdef TRAINER_HAVE_CURL
#include <curl/curl.h>
#endif

namespace trainer {

namespace fs = std::filesystem;

fs::path partial_path(const fs::path& destination) {
  fs::path p = destination;
  p += ".partial";
  return p;
}

std::string file_sha256(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DownloadError("cannot read " + path.string());
  Sha256 hash;
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    hash.update(buffer.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) throw DownloadError("cannot read " + path.string());
  return hash.hex_digest();
}

#ifdef TRAINER_HAVE_CURL

namespace {

int64_t size_or_zero(const fs::path& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(size);
}

// The checked move of DEST.partial over DEST.
void finish(const std::string& url, const fs::path& partial, const fs::path& destination,
            const DownloadOptions& options) {
  if (!options.sha256_prefix.empty() || !options.sha256.empty()) {
    const std::string digest = file_sha256(partial);
    const std::string& prefix = options.sha256_prefix;
    const std::string mismatch =
        digest.compare(0, prefix.size(), prefix) != 0         ? "its name says it starts with " + prefix
        : !options.sha256.empty() && digest != options.sha256 ? "model.weights_sha256 pins " + options.sha256
                                                              : "";
    if (!mismatch.empty()) {
      remove_file(partial);
      throw DownloadError(url + ": the file's SHA-256 is " + digest + ", but " + mismatch +
                          " (a damaged or different file; nothing was kept)");
    }
  }
  if (const std::error_code ec = replace_file(partial, destination))
    throw DownloadError("cannot move " + partial.string() + " to " + destination.string() + ": " + ec.message());
}

// What the callbacks share while one transfer runs.
struct Transfer {
  CURL* curl = nullptr;
  fs::path partial;
  OutputFile out;
  int64_t offset = 0;   // bytes already in the partial file when this request started
  int64_t written = 0;  // bytes written by this request
  long status = 0;      // the response's status, read with the first bytes
  bool status_read = false;
  bool too_large = false;  // the file passed options->max_bytes
  std::error_code write_error;
  const DownloadOptions* options = nullptr;
};

bool http_error(long status) { return status >= 400; }

size_t on_bytes(char* data, size_t size, size_t count, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  if (!t.status_read) {
    t.status_read = true;
    curl_easy_getinfo(t.curl, CURLINFO_RESPONSE_CODE, &t.status);
    if (http_error(t.status)) return 0;  // an error page, not the file
  }
  if (t.offset + t.written + static_cast<int64_t>(size * count) > t.options->max_bytes) {
    t.too_large = true;
    return 0;
  }
  if ((t.write_error = t.out.write(data, size * count))) return 0;
  t.written += static_cast<int64_t>(size * count);
  return size * count;
}

int on_progress(void* user, curl_off_t total, curl_off_t /*now*/, curl_off_t, curl_off_t) {
  auto& t = *static_cast<Transfer*>(user);
  if (t.options->progress && t.status_read)
    t.options->progress(t.offset + t.written, total > 0 ? t.offset + static_cast<int64_t>(total) : -1);
  return 0;
}

// One request for the bytes after those in the partial file. Returns the curl result; `t` has the status.
CURLcode request(const std::string& url, Transfer& t) {
  CURL* curl = curl_easy_init();
  if (curl == nullptr) throw DownloadError(url + ": libcurl could not start a transfer");
  t.curl = curl;
  t.status = 0;
  t.status_read = false;
  t.written = 0;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
  // A redirect never leaves https for http (or for any other protocol libcurl speaks): a file asked for over TLS
  // arrives over TLS. An http:// address (a local mirror) may go on to https.
  const bool secure = url.rfind("https://", 0) == 0;
#if LIBCURL_VERSION_NUM >= 0x075500  // 7.85: the protocols by name
  curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, secure ? "https" : "http,https");
#else
  curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS, secure ? CURLPROTO_HTTPS : CURLPROTO_HTTP | CURLPROTO_HTTPS);
#endif
  curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(t.options->max_bytes - t.offset));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for timeouts: the run's signal handlers stay its own
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, static_cast<long>(t.options->connect_timeout_s));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(t.options->stall_timeout_s));
  curl_easy_setopt(curl, CURLOPT_RESUME_FROM_LARGE, static_cast<curl_off_t>(t.offset));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_bytes);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &t);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "trainer");
  const CURLcode result = curl_easy_perform(curl);
  if (!t.status_read) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &t.status);
  curl_easy_cleanup(curl);
  t.curl = nullptr;
  return result;
}

}  // namespace

bool can_download() { return true; }

void download_file(const std::string& url, const fs::path& destination, const DownloadOptions& options) {
  // libcurl's process-wide setup, once, before the first transfer (it is not safe to race with other threads).
  static const CURLcode global = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (global != CURLE_OK) throw DownloadError(url + ": libcurl did not initialise: " + curl_easy_strerror(global));

  Transfer t;
  t.partial = partial_path(destination);
  t.options = &options;
  // A partial file the server does not continue (it ignores Range requests, which libcurl reports as a range
  // error; or 416: the partial file may hold the whole file, or another file's bytes) is dropped once and the file
  // fetched whole.
  for (int attempt = 0;; ++attempt) {
    t.offset = size_or_zero(t.partial);
    if (const std::error_code ec = t.out.append(t.partial))
      throw DownloadError("cannot write " + t.partial.string() + ": " + ec.message());
    const CURLcode result = request(url, t);
    const std::error_code closed = t.out.close();
    if ((t.status == 416 || result == CURLE_RANGE_ERROR) && t.offset > 0 && attempt == 0) {
      remove_file(t.partial);
      continue;
    }
    const int64_t kept = size_or_zero(t.partial);
    if (kept == 0) remove_file(t.partial);
    const std::string keep_note =
        kept > 0 ? " (" + std::to_string(kept) + " bytes kept in " + t.partial.string() + "; run again to continue)"
                 : "";
    if (t.too_large || result == CURLE_FILESIZE_EXCEEDED) {
      remove_file(t.partial);
      throw DownloadError(url + ": the file is larger than " + std::to_string(options.max_bytes) +
                          " bytes, more than any weights file; nothing was kept");
    }
    if (t.write_error || closed)
      throw DownloadError("cannot write " + t.partial.string() + ": " +
                          (t.write_error ? t.write_error : closed).message());
    if (http_error(t.status)) {
      throw DownloadError(url + ": the server answered HTTP " + std::to_string(t.status) + keep_note);
    }
    if (result != CURLE_OK) throw DownloadError(url + ": " + curl_easy_strerror(result) + keep_note);
    break;
  }
  finish(url, t.partial, destination, options);
}

#else

bool can_download() { return false; }

void download_file(const std::string& url, const fs::path& destination, const DownloadOptions&) {
  throw DownloadError(url +
                      ": this build of trainer cannot download (it was built without libcurl); fetch the file "
                      "yourself and put it at " +
                      destination.string());
}

#endif

}  // namespace trainer
