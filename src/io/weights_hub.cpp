#include "trainer/io/weights_hub.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "trainer/io/download.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace fs = std::filesystem;

fs::path hub_cache_dir(const std::string& torch_home, const std::string& xdg_cache_home, const fs::path& home) {
  const fs::path torch = !torch_home.empty()       ? fs::path(torch_home)
                         : !xdg_cache_home.empty() ? fs::path(xdg_cache_home) / "torch"
                                                   : home / ".cache" / "torch";
  return torch / "hub" / "checkpoints";
}

std::string hub_hash_prefix(const std::string& file_name) {
  // torch.hub's HASH_REGEX, r"-([a-f0-9]*)\.", searched: the first '-' followed by hex digits and a '.'.
  for (size_t dash = file_name.find('-'); dash != std::string::npos; dash = file_name.find('-', dash + 1)) {
    size_t end = dash + 1;
    while (end < file_name.size() &&
           ((file_name[end] >= '0' && file_name[end] <= '9') || (file_name[end] >= 'a' && file_name[end] <= 'f')))
      ++end;
    if (end < file_name.size() && file_name[end] == '.') return file_name.substr(dash + 1, end - dash - 1);
  }
  return "";
}

bool is_address(const std::string& spec) {
  for (const char* scheme : {"http://", "https://", "file://"})
    if (spec.rfind(scheme, 0) == 0) return true;
  return false;
}

std::string address_file_name(const std::string& address) {
  const std::string path = address.substr(0, address.find_first_of("?#"));
  const size_t scheme = path.find("://");
  const size_t slash = path.rfind('/');
  const std::string name = slash == std::string::npos || slash < scheme + 3 ? "" : path.substr(slash + 1);
  // The name becomes a path in the cache: nothing that could leave it (Windows also splits at a backslash, and a
  // colon names a drive or a stream).
  if (name.empty() || name == "." || name == ".." || name.find_first_of("\\:") != std::string::npos)
    throw ConfigError("model.weights: the address " + address + " names no file (expected .../NAME.pth)");
  return name;
}

namespace {

std::string megabytes(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return text;
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f s", seconds);
  return text;
}

// A line per tenth of the file (and one per 10 s while its size is unknown), not one per callback.
std::function<void(int64_t, int64_t)> progress_lines(const WeightsHub& hub, const std::string& file_name) {
  if (!hub.say) return {};
  struct State {
    int64_t last_tenth = -1;
    std::chrono::steady_clock::time_point last_line{};
  };
  auto state = std::make_shared<State>();
  return [say = hub.say, file_name, state](int64_t done, int64_t total) {
    if (total > 0) {
      const int64_t tenth = done * 10 / total;
      if (tenth == state->last_tenth) return;
      state->last_tenth = tenth;
      say(file_name + ": " + megabytes(done) + " of " + megabytes(total) + " (" + std::to_string(tenth * 10) + "%)");
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - state->last_line < std::chrono::seconds(10)) return;
    state->last_line = now;
    say(file_name + ": " + megabytes(done));
  };
}

}  // namespace

void check_pinned_sha256(const fs::path& file, const std::string& sha256, const std::string& remedy) {
  if (sha256.empty()) return;
  std::string digest;
  try {
    digest = file_sha256(file);
  } catch (const DownloadError& e) {
    throw WeightsError(e.message());
  }
  if (digest != sha256)
    throw WeightsError(file.string() + ": the file's SHA-256 is " + digest + ", but model.weights_sha256 pins " +
                       sha256 + " (a damaged or different file" + (remedy.empty() ? "" : "; " + remedy) + ")");
}

fs::path fetch_into_cache(const WeightsHub& hub, const std::string& address, const std::string& file_name,
                          const std::string& sha256) {
  if (hub.cache_dir.empty()) throw DownloadError(address + ": no weights cache folder is known (set TORCH_HOME)");
  const fs::path destination = hub.cache_dir / file_name;
  std::error_code ec;
  if (fs::is_regular_file(destination, ec)) {
    check_pinned_sha256(destination, sha256, "delete it to download it again");
    if (hub.say)
      hub.say(file_name + ": in the cache, " + destination.string() + (sha256.empty() ? "" : ", SHA-256 checked"));
    return destination;
  }
  const std::string from =
      hub.mirror.empty() ? address : hub.mirror + (hub.mirror.back() == '/' ? "" : "/") + file_name;
  fs::create_directories(hub.cache_dir, ec);
  if (ec)
    throw DownloadError("cannot create the weights cache " + hub.cache_dir.string() + ": " + ec.message() +
                        " (set TORCH_HOME to another folder)");
  if (hub.say) hub.say(file_name + ": downloading " + from + " to " + destination.string());
  const auto start = std::chrono::steady_clock::now();
  try {
    download_file(from, destination, {hub_hash_prefix(file_name), sha256, progress_lines(hub, file_name)});
  } catch (const DownloadError& e) {
    throw DownloadError(e.message() + "; without a network, put the file at " + destination.string());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto bytes = static_cast<int64_t>(fs::file_size(destination, ec));
  if (hub.say)
    hub.say(file_name + ": " + megabytes(bytes) + " in " + seconds_text(seconds) + " (" +
            megabytes(static_cast<int64_t>(static_cast<double>(bytes) / std::max(seconds, 1e-6))) + "/s)" +
            (!sha256.empty()                      ? ", SHA-256 checked"
             : hub_hash_prefix(file_name).empty() ? ""
                                                  : ", SHA-256 prefix " + hub_hash_prefix(file_name) + " checked"));
  return destination;
}

}  // namespace trainer
