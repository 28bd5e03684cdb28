// One file fetched over http(s) (or file://) with libcurl: the bytes go to DEST.partial, which a later call continues
// from where a cut connection left it (an HTTP Range request), are checked against the SHA-256 prefix the caller
// expects, and only then is DEST.partial moved over DEST in one step, so DEST is whole or absent.
//   download_file("https://host/models/resnet50-11ad3fa6.pth", cache / "resnet50-11ad3fa6.pth",
//                 {"11ad3fa6", [](int64_t done, int64_t total) { ... }});
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

namespace trainer {

struct DownloadOptions {
  // The first hex digits of the file's SHA-256 (torch.hub's rule); empty: not checked.
  std::string sha256_prefix;
  // The whole SHA-256 the user pinned (model.weights_sha256), 64 lowercase hex digits; empty: not checked.
  std::string sha256;
  // Called as bytes arrive: bytes in DEST.partial so far, and the file's size (-1 while unknown).
  std::function<void(int64_t done, int64_t total)> progress;
  int64_t connect_timeout_s = 30;
  // A connection that delivers nothing for this long is given up (what a dead link looks like).
  int64_t stall_timeout_s = 60;
  // A file larger than this is refused as it arrives (the largest published weights file, ViT-H/14's SWAG entry,
  // is 2.5 GB): a hostile mirror or address cannot fill the disk.
  int64_t max_bytes = int64_t{8} << 30;
};

// Whether this build can download (it was built with libcurl).
bool can_download();

// The partial file of `destination`: where its bytes arrive until they are checked.
std::filesystem::path partial_path(const std::filesystem::path& destination);

// Throws DownloadError naming `url`: a refused or failed connection, an HTTP error status, a hash that does not
// match either digest (DEST.partial is removed then), or a failed write. A connection cut after some bytes leaves them
// in DEST.partial for the next call; an empty DEST.partial is removed.
void download_file(const std::string& url, const std::filesystem::path& destination, const DownloadOptions& options);

// The SHA-256 of a file, as 64 lowercase hex digits. Throws DownloadError naming it when it cannot be read.
std::string file_sha256(const std::filesystem::path& path);

}  // namespace trainer
