// Every fuzz target, as the replay (replay_main.cpp) calls them: one row per tests/fuzz/<name>_fuzz.cpp, the
// name also naming its corpus folder, tests/fuzz/corpus/<name>/.
#pragma once

#include <cstddef>
#include <cstdint>

int fuzz_pickle(const uint8_t* data, size_t size);
int fuzz_pth(const uint8_t* data, size_t size);
int fuzz_safetensors(const uint8_t* data, size_t size);
int fuzz_zip_records(const uint8_t* data, size_t size);
int fuzz_checkpoint(const uint8_t* data, size_t size);
int fuzz_config(const uint8_t* data, size_t size);
int fuzz_idx(const uint8_t* data, size_t size);
int fuzz_image_probe(const uint8_t* data, size_t size);
int fuzz_image_decode(const uint8_t* data, size_t size);
int fuzz_jpeg_region(const uint8_t* data, size_t size);
int fuzz_labels(const uint8_t* data, size_t size);
int fuzz_glob(const uint8_t* data, size_t size);
int fuzz_events(const uint8_t* data, size_t size);
int fuzz_metrics(const uint8_t* data, size_t size);
int fuzz_download(const uint8_t* data, size_t size);
int fuzz_model(const uint8_t* data, size_t size);
int fuzz_restore(const uint8_t* data, size_t size);
int fuzz_saved_config(const uint8_t* data, size_t size);
int fuzz_tar(const uint8_t* data, size_t size);
int fuzz_shard_index(const uint8_t* data, size_t size);
int fuzz_shard_listing(const uint8_t* data, size_t size);
int fuzz_http_headers(const uint8_t* data, size_t size);

struct FuzzTarget {
  const char* name;
  int (*run)(const uint8_t* data, size_t size);
};

inline constexpr FuzzTarget kFuzzTargets[] = {
    {"pickle", fuzz_pickle},
    {"pth", fuzz_pth},
    {"safetensors", fuzz_safetensors},
    {"zip_records", fuzz_zip_records},
    {"checkpoint", fuzz_checkpoint},
    {"config", fuzz_config},
    {"idx", fuzz_idx},
    {"image_probe", fuzz_image_probe},
    {"image_decode", fuzz_image_decode},
    {"jpeg_region", fuzz_jpeg_region},
    {"labels", fuzz_labels},
    {"glob", fuzz_glob},
    {"events", fuzz_events},
    {"metrics", fuzz_metrics},
    {"download", fuzz_download},
    {"model", fuzz_model},
    {"restore", fuzz_restore},
    {"saved_config", fuzz_saved_config},
    {"tar", fuzz_tar},
    {"shard_index", fuzz_shard_index},
    {"shard_listing", fuzz_shard_listing},
    {"http_headers", fuzz_http_headers},
};
