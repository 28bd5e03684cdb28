// PyTorch's hub cache of downloaded weights ($TORCH_HOME/hub/checkpoints): a file torch.hub or torchvision already
// downloaded is used from there, and a file fetched here lands there for both. The caller (cli) reads where it is
// and the mirror from the environment.
//   WeightsHub hub{cache_dir, mirror, say};
//   fs::path file = fetch_into_cache(hub, address, "resnet50-11ad3fa6.pth");
#pragma once

#include <filesystem>
#include <functional>
#include <string>

namespace trainer {

struct WeightsHub {
  std::filesystem::path cache_dir;  // empty: no cache (nothing is fetched by name or address)
  // A base address that replaces the published one (TRAINER_WEIGHTS_MIRROR); the file name is appended.
  std::string mirror;
  std::function<void(const std::string&)> say;  // progress lines; may be empty
};

// torch.hub's default cache folder: $TORCH_HOME/hub/checkpoints, else $XDG_CACHE_HOME/torch/hub/checkpoints, else
// HOME/.cache/torch/hub/checkpoints (`home`: the user's folder, %USERPROFILE% on Windows).
std::filesystem::path hub_cache_dir(const std::string& torch_home, const std::string& xdg_cache_home,
                                    const std::filesystem::path& home);

// The SHA-256 prefix torch.hub checks in a file name: the hex digits between a '-' and the next '.'
// ("resnet50-11ad3fa6.pth": "11ad3fa6"); empty when the name has none.
std::string hub_hash_prefix(const std::string& file_name);

// The file name an address ends in, without its query or fragment ("https://h/m/r-1a2b.pth?x=1": "r-1a2b.pth").
// Throws ConfigError when it ends in none.
std::string address_file_name(const std::string& address);

// Whether `spec` is an address this fetches (http://, https://, file://).
bool is_address(const std::string& spec);

// CACHE/file_name when it is there; else fetched from `address` (the mirror's address when hub.mirror is set),
// its hash prefix checked, and moved into the cache. Throws DownloadError naming the address and the path to
// put the file at when it cannot be fetched (nothing is left under that path). `sha256` (model.weights_sha256,
// empty: none) is checked on the download and on a file already in the cache.
std::filesystem::path fetch_into_cache(const WeightsHub& hub, const std::string& address, const std::string& file_name,
                                       const std::string& sha256 = "");

// Throws WeightsError naming `file` when its SHA-256 is not `sha256` (64 lowercase hex digits; empty: no check).
// torchvision publishes only the first 8 to 10 digits of each file's digest (in its name); a user who pins the
// whole digest is protected from a file that only shares its prefix.
void check_pinned_sha256(const std::filesystem::path& file, const std::string& sha256, const std::string& remedy);

}  // namespace trainer
