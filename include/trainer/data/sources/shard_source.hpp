// A split held in WebDataset tar shards, on a disk or at http(s) addresses, as an ImageSource. Opening reads each
// shard's index (DALI's .idx beside the shard; a local shard without one is read once and its index written), so
// every sample has an address: the loader's epoch order, ranks, resume and bad-sample rules are the folder's, and
// shards packed from a folder by `trainer shards make` give the same samples in the same order, pixel for pixel.
// A remote shard without an index is read through once at opening, its members' bytes passed over. With
// data.shards.cache_mb, remote shards are copied into the cache as the run goes (shard_cache.hpp).
// Local shards stay open and an image is one positional read (no open() per sample); remote ones are read a member
// at a time with HTTP range requests (http_range.hpp), which fetch the image's bytes and nothing else, by threads of
// their own ahead of the loader workers (read_ahead.hpp, data.shards.read_ahead) as the loader plans its batches.
//   auto train = open_shards(config.data, /*train=*/true, config.model.num_classes, config.model.in_channels);
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainer/config/config.hpp"
#include "trainer/data/pixels/transform.hpp"
#include "trainer/data/sources/image_folder.hpp"
#include "trainer/data/sources/image_source.hpp"
#include "trainer/data/sources/read_ahead.hpp"
#include "trainer/data/sources/shard_cache.hpp"
#include "trainer/data/sources/shard_file.hpp"

namespace trainer {

// A sample's image member: which shard, where.
struct ShardAddress {
  uint64_t offset = 0;
  uint32_t size = 0;
  uint32_t shard = 0;
};

// What opening the shards took beyond reading their indexes (describe() says it).
struct ShardOpening {
  size_t read_through = 0;   // remote shards without an index, read through once
  size_t listed = 0;         // remote shards without an index whose listing an earlier start kept
  size_t piped = 0;          // pipe: shards whose commands ran, copied into `cache`
  size_t pipe_copies = 0;    // pipe: shards whose copies the cache held already
  size_t kept = 0;           // http(s) shards whose copies the cache held already
  std::string cache;         // the cache folder (shard_cache_folder)
  uint64_t cache_limit = 0;  // data.shards.cache_mb, in bytes
};

class ShardSource final : public ImageSource {
 public:
  // `keys` holds each sample's key and label; `addresses` its image member. `read_ahead`: threads fetching remote
  // images ahead of the workers (0: none; local shards never have them).
  ShardSource(std::string root, std::vector<std::shared_ptr<const ShardFile>> shards, FileList keys,
              std::vector<ShardAddress> addresses, std::vector<std::string> class_names, TransformSpec spec,
              int64_t channels, size_t read_ahead = 0, ShardOpening opening = {},
              std::vector<ShardCopyJob> copies = {});

  size_t size() const override { return keys_.size(); }
  int64_t label(size_t i) const override { return keys_.label(i); }
  void read_into(size_t i, const ReadContext& context, cv::Mat& out) const override;
  bool read_or_defer(size_t i, const ReadContext& context, cv::Mat& out, EncodedImage& deferred) const override;
  bool read_encoded(size_t i, std::vector<uint8_t>& bytes) const override;
  void prefetch(const std::vector<size_t>& indices) const override;
  const std::vector<std::string>& class_names() const override { return class_names_; }
  ImageShape shape() const override { return {spec_.size, spec_.size, channels_}; }
  std::string describe() const override;
  std::string take_news() const override;
  // "SHARD#KEY", as webdataset names a sample.
  std::string sample_name(size_t i) const override;
  // What the read-ahead did (all zero without one): for `bench data` and tests.
  ReadAhead::Counts read_ahead_counts() const;
  // What the cache's copier did (all zero without one).
  ShardCopier::Counts copy_counts() const;

 private:
  bool read_sample(size_t i, const ReadContext& context, cv::Mat& out, bool defer, EncodedImage& deferred) const;

  std::string root_;
  std::vector<std::shared_ptr<const ShardFile>> shards_;
  FileList keys_;
  std::vector<ShardAddress> addresses_;
  std::vector<std::string> class_names_;
  TransformSpec spec_;
  int64_t channels_;
  ShardOpening opening_;
  std::unique_ptr<ReadAhead> read_ahead_;  // null for local shards and with data.shards.read_ahead 0
  std::unique_ptr<ShardCopier> copier_;    // null unless remote shards are being copied into the cache
};

// The train split (data.shards.train, or shards.json's "train" list under data.root) or the eval split ("val").
// Classes come from shards.json, else data.class_names, else model.num_classes, else the largest label + 1; labels
// from shards.json, else each sample's label member (data.shards.label). Throws DataError naming the shard (and the
// sample) for a shard or index that cannot be read, an index that disagrees with its shard, a sample without an image
// or a label, or a label outside the classes.
std::shared_ptr<const ShardSource> open_shards(const DataConfig& data, bool train, int64_t num_classes,
                                               int64_t channels, std::optional<bool> augment = std::nullopt);

}  // namespace trainer
