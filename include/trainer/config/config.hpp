// The typed configuration of a run. Defaults live here and only here (member initializers); every field is
// declared and documented once, in its struct's visit(), which the JSON reader, the resolved-config writer, the
// validation and the schema (`trainer config schema`, configs/schema.json) use. Read one with load_config()
// (load.hpp); programs use resolve_config() (engine/resolve_config.hpp), which also applies the kinds' rows.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trainer/config/fields.hpp"

namespace trainer {

// Bounds past any real run, so that a config from a file (a checkpoint's, an export's metadata) cannot ask for a
// 60000 x 60000 input or 100,000 threads. The largest published eval sizes are 518-800 pixels (SWAG, FixRes);
// ImageNet-21k has 21,841 classes.
inline constexpr double kMostImageSide = 4096;
inline constexpr double kMostClasses = 1000000;
inline constexpr double kMostThreads = 1024;

// The data-parallel transport: auto = NCCL when the run is on CUDA (and the build has it), else Gloo.
enum class DistBackend { automatic, gloo, nccl };
inline const EnumTable<DistBackend>& dist_backends() {
  static const EnumTable<DistBackend> table{
      {"auto", DistBackend::automatic}, {"gloo", DistBackend::gloo}, {"nccl", DistBackend::nccl}};
  return table;
}

// off: `trainer --config` starts a new run (and refuses a folder that holds one); auto: it continues the run in
// its folder from the newest good checkpoint, or starts one there (engine/resume_point.hpp), as --resume auto.
enum class ResumeMode { off, automatic };
inline const EnumTable<ResumeMode>& resume_modes() {
  static const EnumTable<ResumeMode> table{{"off", ResumeMode::off}, {"auto", ResumeMode::automatic}};
  return table;
}

struct RunConfig {
  std::string name;
  std::string output_dir = "runs";
  int64_t seed = 0;
  std::string device = "auto";
  int64_t threads = 0;
  bool tensorboard = true;
  bool plot = true;
  bool cudnn_benchmark = true;
  bool tf32 = true;
  bool deterministic = false;
  bool onednn = true;
  double dist_timeout_s = 1800;
  double dist_bucket_mb = 25;
  DistBackend dist_backend = DistBackend::automatic;
  ResumeMode resume = ResumeMode::off;

  template <class V>
  void visit(V& v) {
    v.field("name", name, "run name; the run folder is output_dir/name (default: the config file's stem)");
    v.field("output_dir", output_dir, "folder that holds run folders");
    v.choice("resume", resume, resume_modes(),
             "auto: continue the run in the run folder from its newest good checkpoint, or start one there (what a "
             "requeued or restarted job needs: the same command line continues)");
    v.field("seed", seed, "seed for initialisation, data order and augmentation", Range::at_least(0));
    v.field("device", device, "auto, cpu, cuda or cuda:N");
    v.field("threads", threads, "intra-op CPU threads; 0 uses all cores", Range::between(0, kMostThreads));
    v.field("tensorboard", tensorboard, "write TensorBoard event files under the run folder's tb/");
    v.field("plot", plot, "redraw curves.png in the run folder after every epoch");
    v.field("cudnn_benchmark", cudnn_benchmark,
            "CUDA: let cuDNN time its convolution algorithms on the first batches and keep the fastest "
            "(off with deterministic)");
    v.field("tf32", tf32,
            "CUDA on Ampere and newer: float32 convolutions and matrix products on TF32 tensor cores "
            "(10-bit mantissa inputs, float32 accumulation)");
    v.field("deterministic", deterministic,
            "deterministic algorithms only (cuDNN and LibTorch), so a rerun or resume on a GPU repeats bit for "
            "bit; slower, and an operation without a deterministic kernel stops the run");
    v.field("onednn", onednn,
            "CPU: LibTorch's oneDNN (MKL-DNN) kernels for convolutions, its fast path; false: LibTorch's own, "
            "slower ones, for a build whose oneDNN computes wrong results (Debian 13's LibTorch 2.6 gave NaN from "
            "a 3x3 convolution of efficientnet_v2_s in some processes)");
    v.field("dist_timeout_s", dist_timeout_s,
            "data-parallel runs: seconds a rank waits for the others (rendezvous, all-reduce) before the run stops "
            "with an error naming the operation",
            Range::greater_than(0));
    v.field("dist_bucket_mb", dist_bucket_mb,
            "data-parallel runs: MiB of gradients per all-reduce bucket; each bucket is reduced as soon as backward "
            "has produced it",
            Range::greater_than(0));
    v.choice("dist_backend", dist_backend, dist_backends(),
             "data-parallel runs: c10d process group; auto takes NCCL on CUDA and Gloo on the CPU");
  }
};

// The dataset format. Each kind is one row of data/data_kinds.cpp: its usual mean/std, rules and reader.
enum class DataKind { mnist, imagenet, synthetic, shards };
inline const EnumTable<DataKind>& data_kinds() {
  static const EnumTable<DataKind> table{{"mnist", DataKind::mnist},
                                         {"imagenet", DataKind::imagenet},
                                         {"synthetic", DataKind::synthetic},
                                         {"shards", DataKind::shards}};
  return table;
}

// How a crop is resized to the output size. bilinear and bicubic are Pillow's filters, bit for bit (what
// torchvision uses on PIL images, antialiased when shrinking); nearest is OpenCV's.
enum class Interpolation { bilinear, bicubic, nearest };
inline const EnumTable<Interpolation>& interpolations() {
  static const EnumTable<Interpolation> table{
      {"bilinear", Interpolation::bilinear}, {"bicubic", Interpolation::bicubic}, {"nearest", Interpolation::nearest}};
  return table;
}

// auto: JPEGs are decoded at 1/2, 1/4 or 1/8 scale when the crop still covers the output size at that scale.
enum class DecodeReduce { automatic, off };
inline const EnumTable<DecodeReduce>& decode_reduce_modes() {
  static const EnumTable<DecodeReduce> table{{"auto", DecodeReduce::automatic}, {"off", DecodeReduce::off}};
  return table;
}

// Where JPEGs are decoded: auto (the GPU when this build has nvJPEG and the run is on CUDA, else the CPU), cpu,
// or cuda (nvJPEG's batched decode; data/gpu_decode.hpp).
enum class DecodeDevice { automatic, cpu, cuda };
inline const EnumTable<DecodeDevice>& decode_devices() {
  static const EnumTable<DecodeDevice> table{
      {"auto", DecodeDevice::automatic}, {"cpu", DecodeDevice::cpu}, {"cuda", DecodeDevice::cuda}};
  return table;
}

// An automatic augmentation policy (torchvision's AutoAugment, RandAugment, TrivialAugmentWide, AugMix), applied
// to each training image after the crop and flip. Each kind is one row of data/auto_augment.cpp.
enum class AutoAugmentKind { none, imagenet, randaugment, trivialaugment_wide, augmix };
inline const EnumTable<AutoAugmentKind>& auto_augment_kinds() {
  static const EnumTable<AutoAugmentKind> table{{"none", AutoAugmentKind::none},
                                                {"imagenet", AutoAugmentKind::imagenet},
                                                {"randaugment", AutoAugmentKind::randaugment},
                                                {"trivialaugment_wide", AutoAugmentKind::trivialaugment_wide},
                                                {"augmix", AutoAugmentKind::augmix}};
  return table;
}

// JSON: a policy name ("randaugment": its defaults) or an object with "name" and the policy's parameters.
struct AutoAugmentConfig {
  AutoAugmentKind name = AutoAugmentKind::none;
  int64_t num_ops = 2;
  int64_t magnitude = 9;
  int64_t num_magnitude_bins = 31;
  double magnitude_std = 0.0;
  int64_t severity = 3;
  int64_t mixture_width = 3;
  int64_t chain_depth = -1;
  double alpha = 1.0;
  Interpolation interpolation = Interpolation::nearest;
  std::vector<double> fill{0.0};

  template <class V>
  void visit(V& v) {
    v.choice("name", name, auto_augment_kinds(),
             "policy: none, imagenet (AutoAugment's ImageNet policy), randaugment, trivialaugment_wide or augmix");
    v.field("num_ops", num_ops, "randaugment: ops applied one after another (torchvision: 2; at most 64)",
            Range::between(0, 64));
    v.field("magnitude", magnitude, "randaugment: magnitude bin, 0 .. num_magnitude_bins - 1", Range::at_least(0));
    v.field("num_magnitude_bins", num_magnitude_bins, "randaugment and trivialaugment_wide: magnitude bins",
            Range::between(2, 1024));
    v.field("magnitude_std", magnitude_std,
            "randaugment: standard deviation, in bins, of Gaussian noise added to the magnitude of each op (timm); 0: "
            "torchvision's fixed magnitude",
            Range::at_least(0));
    v.field("severity", severity, "augmix: magnitude bins used, 1 .. 10", Range::between(1, 10));
    v.field("mixture_width", mixture_width, "augmix: augmentation chains mixed (at most 16)", Range::between(1, 16));
    v.field("chain_depth", chain_depth, "augmix: ops per chain; -1 draws 1, 2 or 3 per chain (at most 16)",
            Range::between(-1, 16));
    v.field("alpha", alpha, "augmix: Dirichlet and Beta parameter of the mixing weights", Range::greater_than(0));
    v.choice("interpolation", interpolation, interpolations(), "resampling of the shear, translate and rotate ops");
    v.field("fill", fill, "pixel value (0..255, one or one per channel) where a geometric op leaves the image");
  }
};

// torchvision's ColorJitter: factors drawn uniformly in [max(0, 1 - x), 1 + x] (hue: [-x, x]), applied in a
// random order. 0 leaves that property alone.
struct ColorJitterConfig {
  double brightness = 0.0, contrast = 0.0, saturation = 0.0, hue = 0.0;
  bool enabled() const { return brightness > 0 || contrast > 0 || saturation > 0 || hue > 0; }

  template <class V>
  void visit(V& v) {
    v.field("brightness", brightness, "brightness factor spread around 1", Range::at_least(0));
    v.field("contrast", contrast, "contrast factor spread around 1", Range::at_least(0));
    v.field("saturation", saturation, "saturation factor spread around 1", Range::at_least(0));
    v.field("hue", hue, "hue shift spread around 0, at most 0.5", Range::between(0, 0.5));
  }
};

// What random erasing writes: 0 after normalisation (the mean pixel), or per-pixel standard normal noise.
enum class ErasingValue { zero, random };
inline const EnumTable<ErasingValue>& erasing_values() {
  static const EnumTable<ErasingValue> table{{"0", ErasingValue::zero}, {"random", ErasingValue::random}};
  return table;
}

// torchvision's RandomErasing, after normalisation, on the batch (see data/random_erasing.hpp).
struct RandomErasingConfig {
  double prob = 0.0;
  std::vector<double> scale{0.02, 0.33};
  std::vector<double> ratio{0.3, 3.3};
  ErasingValue value = ErasingValue::zero;

  template <class V>
  void visit(V& v) {
    v.field("prob", prob, "probability that a training image has a rectangle erased; 0 disables", Range::between(0, 1));
    v.field("scale", scale, "[min, max] erased area as a fraction of the image");
    v.field("ratio", ratio, "[min, max] aspect ratio (height / width) of the erased rectangle, sampled log-uniformly");
    v.choice("value", value, erasing_values(), "0 (the normalised mean) or \"random\" (standard normal noise)");
  }
};

// Image-folder (data.kind "imagenet") transforms, with torchvision's semantics. Train: RandomResizedCrop(size,
// scale, ratio) then RandomHorizontalFlip(hflip). Eval: Resize(eval_resize) of the shorter side, CenterCrop(size).
// The pixel augmentations (color_jitter, auto_augment, random_erasing) apply to every data kind's training images.
struct AugmentConfig {
  int64_t image_size = 224;
  int64_t eval_crop = 0;
  int64_t eval_resize = 0;
  std::vector<double> scale{0.08, 1.0};
  std::vector<double> ratio{3.0 / 4.0, 4.0 / 3.0};
  double hflip = 0.5;
  Interpolation interpolation = Interpolation::bilinear;
  ColorJitterConfig color_jitter;
  AutoAugmentConfig auto_augment;
  RandomErasingConfig random_erasing;

  template <class V>
  void visit(V& v) {
    v.field("image_size", image_size, "output height and width of training images (and eval images unless eval_crop)",
            Range::between(8, kMostImageSide));
    v.field("eval_crop", eval_crop, "eval: center crop size (0: image_size); larger than image_size for FixRes",
            Range::between(0, kMostImageSide));
    v.field("eval_resize", eval_resize, "eval: shorter side before the center crop (0: eval_crop / 0.875)",
            Range::between(0, kMostImageSide));
    v.field("scale", scale, "train: [min, max] crop area as a fraction of the image");
    v.field("ratio", ratio, "train: [min, max] crop aspect ratio (width / height), sampled log-uniformly");
    v.field("hflip", hflip, "train: probability of a horizontal flip", Range::between(0, 1));
    v.choice("interpolation", interpolation, interpolations(), "resampling of the crop to image_size");
    v.section("color_jitter", color_jitter);
    v.named_section("auto_augment", auto_augment);
    v.section("random_erasing", random_erasing);
  }
};

// torchvision's RASampler: each image `repeats` times per epoch, each copy with its own augmentation, while the
// epoch keeps the dataset's length; with data-parallel training the copies go to different ranks.
struct RepeatedAugmentationConfig {
  int64_t repeats = 1;

  template <class V>
  void visit(V& v) {
    v.field("repeats", repeats, "copies of each image per epoch (1: off; torchvision's recipe uses 4; at most 64)",
            Range::between(1, 64));
  }
};

// Shape of the generated dataset when data.kind is "synthetic".
struct SyntheticConfig {
  int64_t train_size = 512;
  int64_t eval_size = 128;
  int64_t height = 28;
  int64_t width = 28;
  int64_t channels = 1;

  template <class V>
  void visit(V& v) {
    v.field("train_size", train_size, "images in the train split", Range::at_least(1));
    v.field("eval_size", eval_size, "images in the eval split", Range::at_least(1));
    v.field("height", height, "image height in pixels", Range::between(1, kMostImageSide));
    v.field("width", width, "image width in pixels", Range::between(1, kMostImageSide));
    v.field("channels", channels, "1 (grey) or 3 (RGB)", Range::between(1, 3));
  }
};

// How the training set is drawn each epoch: default (every image once, shuffled with data.shuffle), or balanced
// (each draw picks a class uniformly, then one of its images: rare classes are seen as often as common ones).
enum class SamplerKind { standard, balanced };
inline const EnumTable<SamplerKind>& sampler_kinds() {
  static const EnumTable<SamplerKind> table{{"default", SamplerKind::standard}, {"balanced", SamplerKind::balanced}};
  return table;
}

// data.kind "shards": WebDataset tar shards in a folder or at an http(s) address (data.root), each with its index.
struct ShardsConfig {
  std::string train;
  std::string val;
  std::string label = "cls";
  int64_t read_ahead = 8;
  std::string cache;
  int64_t cache_mb = 0;
  // --allow-pipe on the command line, never from a file: a config from a stranger must not run commands.
  bool allow_pipe = false;

  template <class V>
  void visit(V& v) {
    v.field("train", train,
            "the training shards under data.root: a brace pattern (\"train-{000000..000127}.tar\"), a .txt file "
            "listing one per line, or a folder of .tar files; empty: the train split of data.root's shards.json. "
            "\"pipe:CMD\" (\"pipe:aws s3 cp s3://bucket/train-{0000..0127}.tar -\"): each shard is CMD's output, "
            "copied once into data.shards.cache; it runs only with --allow-pipe on the command line");
    v.field("val", val, "the evaluation shards, as train; empty: the val split of data.root's shards.json");
    v.field("label", label,
            "where a sample's class index is: \"cls\" (a member holding the number as text) or \"json:FIELD\" "
            "(an integer field of the sample's .json member)");
    v.field("read_ahead", read_ahead,
            "remote shards: connections that fetch the planned batches' images ahead of the loader workers, so a "
            "worker does not wait a round trip per image (0: each worker fetches its own when it reaches it)",
            Range::between(0, 256));
    v.field("cache", cache,
            "the folder that keeps local copies of shards that live elsewhere, each with its index: pipe: shards' "
            "(always) and http(s) shards' (up to cache_mb); a later start reads a copy there instead (delete it to "
            "fetch the shard again). It also keeps the listing of each http(s) shard without an index that a start "
            "read through (its index and labels, for that version of the shard), so later starts do not read it "
            "again. Empty: trainer/shards in the user's cache folder ($XDG_CACHE_HOME or ~/.cache; %LOCALAPPDATA% on "
            "Windows)");
    v.field("cache_mb", cache_mb,
            "http(s) shards: keep copies of the first shards in list order while the cache folder stays under this "
            "many MB; they are copied by a thread of their own as training reads by ranges, and read from the disk "
            "once copied (the same bytes: the weights do not change). 0: keep none",
            Range::between(0, 1000000000));
  }
};

struct DataConfig {
  DataKind kind = DataKind::mnist;
  std::string root;
  int64_t batch_size = 64;
  int64_t eval_batch_size = 256;
  int64_t workers = 2;
  bool shuffle = true;
  SamplerKind sampler = SamplerKind::standard;
  Switch drop_last = Switch::automatic;
  std::vector<double> mean;
  std::vector<double> std;
  int64_t limit_train = 0;
  int64_t limit_eval = 0;
  int64_t prefetch = 4;
  // data.kind "imagenet": ROOT/train/<wnid>/*, ROOT/val/* + ROOT/val_label.txt (or ROOT/val/<wnid>/*).
  std::string train_dir = "train";
  std::string val_dir = "val";
  std::string val_labels = "val_label.txt";
  std::string class_names_file;
  std::vector<std::string> class_names;
  DecodeReduce decode_reduce = DecodeReduce::automatic;
  DecodeDevice decode = DecodeDevice::automatic;
  double max_bad_fraction = 0.001;
  double val_fraction = 0.0;
  int64_t split_seed = 0;
  std::vector<std::string> val_files;
  AugmentConfig augment;
  RepeatedAugmentationConfig repeated_augmentation;
  SyntheticConfig synthetic;
  ShardsConfig shards;

  template <class V>
  void visit(V& v) {
    v.choice("kind", kind, data_kinds(), "dataset format");
    v.field("root", root, "folder that holds the dataset files (shards: a folder or an http(s) address)");
    v.field("batch_size", batch_size, "training images per step (at most 1048576)", Range::between(1, 1 << 20));
    v.field("eval_batch_size", eval_batch_size, "images per evaluation batch (at most 1048576)",
            Range::between(1, 1 << 20));
    v.field("workers", workers, "data loader threads; 0 loads on the training thread (at most 1024)",
            Range::between(0, 1024));
    v.field("shuffle", shuffle, "reshuffle the training set every epoch");
    v.choice("sampler", sampler, sampler_kinds(),
             "default: every training image once per epoch; balanced: as many draws, each a uniformly chosen class "
             "and one of its images (with replacement), for imbalanced classes");
    v.choice("drop_last", drop_last, switch_values(),
             "drop the last incomplete training batch; auto: only when it would hold fewer images than the model "
             "can train on (2 with BatchNorm)");
    v.field("mean", mean, "per-channel mean for normalisation (0..1 scale); empty: the dataset kind's usual one");
    v.field("std", std, "per-channel standard deviation for normalisation (0..1 scale); empty: as for mean");
    v.field("limit_train", limit_train, "use only this many training images, an evenly spaced subset (0: all)",
            Range::at_least(0));
    v.field("limit_eval", limit_eval, "use only this many evaluation images, an evenly spaced subset (0: all)",
            Range::at_least(0));
    v.field("prefetch", prefetch, "batches the loader keeps ready ahead of the training step (at most 64)",
            Range::between(1, 64));
    v.field("train_dir", train_dir, "imagenet: the train folder under root, one sub-folder per class");
    v.field("val_dir", val_dir, "imagenet: the validation folder under root (flat, or one sub-folder per class)");
    v.field("val_labels", val_labels,
            "imagenet: \"<file> <class index>\" lines for a flat val folder, under root; without the file, "
            "val_dir must hold class folders");
    v.field("class_names_file", class_names_file,
            "imagenet: optional synset file (\"n01440764 tench, Tinca tinca\") under root, for readable names");
    v.field("class_names", class_names,
            "readable class names in class order, for reports (empty: class_names_file, folder names or indices)");
    v.choice("decode_reduce", decode_reduce, decode_reduce_modes(),
             "imagenet: decode JPEGs at 1/2, 1/4 or 1/8 scale when the crop allows it");
    v.choice("decode", decode, decode_devices(),
             "imagenet: where JPEGs are decoded; auto: on the GPU (nvJPEG) when the build has it and the run is "
             "on CUDA, else on the CPU");
    v.field("max_bad_fraction", max_bad_fraction, "imagenet: share of unreadable images in a split that stops the run",
            Range::between(0, 1));
    v.field("val_fraction", val_fraction,
            "imagenet: hold out this share of each class for validation (for example 0.1), from train_dir or, "
            "when root has no such folder, from root's class folders; val_dir is not read then (0: off)",
            Range::between(0, 0.9));
    v.field("split_seed", split_seed,
            "seed of val_fraction's choice, apart from run.seed so a new seed never moves images between the splits",
            Range::at_least(0));
    v.field("val_files", val_files,
            "written by a run with val_fraction: the held-out images (relative to the class-folder set); resume, "
            "eval and export keep exactly these");
    v.section("augment", augment);
    v.section("repeated_augmentation", repeated_augmentation);
    v.section("synthetic", synthetic);
    v.section("shards", shards);
  }
};

// ResNet input stems: torchvision's 7x7 stride-2 conv + 3x3 max-pool for ImageNet-sized images, or a 3x3
// stride-1 conv without pooling for 28-64 px images (as in CIFAR ResNets), which keeps small maps large enough.
enum class StemKind { imagenet, small };
inline const EnumTable<StemKind>& stem_kinds() {
  static const EnumTable<StemKind> table{{"imagenet", StemKind::imagenet}, {"small", StemKind::small}};
  return table;
}

struct ModelConfig {
  std::string arch = "mnist_cnn";
  int64_t in_channels = 1;
  int64_t num_classes = 0;
  StemKind stem = StemKind::imagenet;
  double dropout = -1;           // the architecture's own
  double stochastic_depth = -1;  // the architecture's own
  double head_init_scale = 1.0;
  bool zero_init_residual = false;
  bool sync_batchnorm = false;
  Switch channels_last = Switch::automatic;
  std::string weights;
  std::string weights_sha256;
  std::string init_from;
  std::vector<std::string> init_exclude;
  std::vector<std::string> freeze;

  template <class V>
  void visit(V& v) {
    v.field("arch", arch, "model architecture");
    v.field("in_channels", in_channels, "input image channels", Range::between(1, 4));
    v.field("num_classes", num_classes,
            "number of classes; 0 (the default) takes the training set's: its class folders, or the largest MNIST "
            "label + 1. The resolved number is written to config.resolved.json and checkpoints",
            Range::between(0, kMostClasses));
    v.choice("stem", stem, stem_kinds(), "ResNet stem: imagenet (7x7/2 conv + max-pool) or small (3x3/1 conv)");
    v.field("dropout", dropout,
            "dropout probability before the classifier layers; -1 (the default) takes the architecture's own: "
            "torchvision's (0.2 for MobileNetV3 and EfficientNet-B0, up to 0.5 for B7), 0 for ResNets and RegNets",
            Range::between(-1, 0.99));
    v.field("stochastic_depth", stochastic_depth,
            "stochastic depth (drop path) rate: the deepest residual block's branch is dropped for this share of the "
            "samples, earlier blocks linearly less, as torchvision's EfficientNet, ConvNeXt and Swin; -1 (the default) "
            "takes the architecture's own (EfficientNet 0.2, ConvNeXt-T 0.1, S 0.4, B and L 0.5, Swin T 0.2, S 0.3, "
            "B 0.5); 0 turns it off; architectures without it (ResNet, RegNet, MobileNetV3, ViT) take only -1 or 0",
            Range::between(-1, 0.99));
    v.field("head_init_scale", head_init_scale,
            "the classifier layer's initial weights and bias multiplied by this (ConvNeXt's fine-tune recipe: 0.001 "
            "for a new head at 384 px); it matters where model.weights leaves the classifier freshly initialised (a "
            "class count other than the weights'); 1 (the default) keeps the family's own initialisation",
            Range::between(0, 1));
    v.field("zero_init_residual", zero_init_residual,
            "ResNets: start each residual branch's last BatchNorm at zero, so blocks begin as identities");
    v.field("sync_batchnorm", sync_batchnorm,
            "data-parallel ResNets: BatchNorm takes its batch statistics over every rank's images (PyTorch's "
            "SyncBatchNorm), so N ranks train like one process with the global batch; costs two small all-reduces "
            "per BatchNorm layer and step");
    v.choice("channels_last", channels_last, switch_values(),
             "4-D weights and inputs in channels_last memory format; auto: on on CUDA for the convolutional families "
             "(not ViT and Swin, whose tensors are tokens). A start-up "
             "self-check falls back to contiguous when this LibTorch computes channels_last convolutions wrongly");
    v.field("weights", weights,
            "weights a new run starts from (fine-tuning): a name of torchvision's for model.arch (IMAGENET1K_V1, "
            "IMAGENET1K_V2; `trainer weights list`), found in or downloaded to PyTorch's hub cache; an http(s) "
            "address; or a file (.pth, .bin, .safetensors). A classifier layer whose shape differs (ImageNet's 1000 "
            "classes) is freshly initialised");
    v.field("weights_sha256", weights_sha256,
            "the whole SHA-256 of the file model.weights or model.init_from names (64 hex digits, as sha256sum or "
            "Get-FileHash print them), checked before the file is read: after a download, for a file already in the "
            "cache and for a local file. torchvision's names carry only the first 8 to 10 digits, which are always "
            "checked; pinning the whole digest also refuses a file that shares them. Empty: not pinned");
    v.field("init_from", init_from, "a weights file a new run starts from (model.weights also takes a file)");
    v.field("init_exclude", init_exclude,
            "glob patterns (for example \"layer4.*\") of keys not taken from model.weights or init_from; they keep "
            "their fresh values");
    v.field("freeze", freeze,
            "glob patterns of parameters that do not train (for example [\"conv1.*\", \"bn1.*\", \"layer1.*\"]): no "
            "gradient, no weight decay, and BatchNorm layers whose weight matches keep their running statistics "
            "(eval mode); train.unfreeze_at_epoch lifts it");
  }
};

enum class OptimizerKind { sgd, adamw };
inline const EnumTable<OptimizerKind>& optimizer_kinds() {
  static const EnumTable<OptimizerKind> table{{"sgd", OptimizerKind::sgd}, {"adamw", OptimizerKind::adamw}};
  return table;
}

struct OptimConfig {
  OptimizerKind name = OptimizerKind::sgd;
  double lr = 0.01;
  double lr_per_256 = 0.0;
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 0.0;
  std::vector<double> betas{0.9, 0.999};
  double eps = 1e-8;
  bool decay_norm_and_bias = false;
  std::vector<std::string> no_decay;
  std::map<std::string, double> lr_mult;
  double layer_decay = 1.0;

  template <class V>
  void visit(V& v) {
    v.choice("name", name, optimizer_kinds(), "optimizer");
    v.field("lr", lr, "base learning rate (unless lr_per_256 is set)", Range::greater_than(0));
    v.field("lr_per_256", lr_per_256,
            "if > 0, the learning rate per 256 images: lr = lr_per_256 * batch_size * accumulate_steps / 256",
            Range::at_least(0));
    v.field("momentum", momentum, "SGD momentum", Range::between(0, 0.999999));
    v.field("nesterov", nesterov, "SGD: Nesterov momentum");
    v.field("weight_decay", weight_decay, "weight decay (L2 for SGD, decoupled for AdamW)", Range::at_least(0));
    v.field("betas", betas, "AdamW: [beta1, beta2]");
    v.field("eps", eps, "AdamW: term added to the denominator", Range::greater_than(0));
    v.field("decay_norm_and_bias", decay_norm_and_bias,
            "apply weight decay to normalisation weights and biases too (default: only to conv and linear weights)");
    v.field("no_decay", no_decay,
            "glob patterns of further parameters without weight decay, by name, as torchvision's custom keys (for "
            "example [\"*.layer_scale\"] for ConvNeXt); normalisation weights and biases already have none");
    v.field("lr_mult", lr_mult,
            "learning-rate multipliers by parameter glob, for example {\"fc.*\": 10} (a new head learning faster "
            "than pretrained layers); a parameter takes its longest matching pattern's, others 1");
    v.field("layer_decay", layer_decay,
            "layer-wise learning-rate decay for fine-tuning (BEiT, ConvNeXt): the classifier keeps the rate, each "
            "block below it takes this factor once more (block k of n: layer_decay^(n - k)), the stem the smallest; "
            "blocks in the architecture's own order (a ResNet's layerX.i, a ConvNeXt's or EfficientNet's "
            "features.S.i, a RegNet's blockS-i); multiplies optim.lr_mult. 1 (the default) turns it off",
            Range::between(0.01, 1));
  }
};

// The schedule after warmup. Each kind is one row of optim/schedules.cpp: its rules and formula.
enum class ScheduleKind { constant, cosine, step, multistep, exponential, polynomial };
inline const EnumTable<ScheduleKind>& schedule_kinds() {
  static const EnumTable<ScheduleKind> table{{"constant", ScheduleKind::constant},
                                             {"cosine", ScheduleKind::cosine},
                                             {"step", ScheduleKind::step},
                                             {"multistep", ScheduleKind::multistep},
                                             {"exponential", ScheduleKind::exponential},
                                             {"polynomial", ScheduleKind::polynomial}};
  return table;
}

enum class WarmupKind { linear, constant };
inline const EnumTable<WarmupKind>& warmup_kinds() {
  static const EnumTable<WarmupKind> table{{"linear", WarmupKind::linear}, {"constant", WarmupKind::constant}};
  return table;
}

// Learning rate per optimizer step: warmup, then `kind`. See optim/schedule.hpp.
struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::cosine;
  WarmupKind warmup = WarmupKind::linear;
  int64_t warmup_steps = 0;
  double warmup_epochs = 0.0;
  double warmup_start_factor = 0.1;
  double min_lr = 0.0;
  double step_epochs = 30.0;
  std::vector<double> milestones;
  double gamma = 0.1;
  double power = 1.0;

  template <class V>
  void visit(V& v) {
    v.choice("kind", kind, schedule_kinds(), "schedule after warmup");
    v.choice("warmup", warmup, warmup_kinds(),
             "warmup shape: linear from warmup_start_factor to 1, or constant at warmup_start_factor");
    v.field("warmup_steps", warmup_steps, "warmup length in optimizer steps (takes precedence over warmup_epochs)",
            Range::at_least(0));
    v.field("warmup_epochs", warmup_epochs, "warmup length in epochs (if warmup_steps is 0)", Range::at_least(0));
    v.field("warmup_start_factor", warmup_start_factor,
            "lr factor at the first warmup step (the whole warmup for constant)", Range::between(0, 1));
    v.field("min_lr", min_lr, "final learning rate of the cosine and polynomial schedules", Range::at_least(0));
    v.field("step_epochs", step_epochs, "step schedule: epochs between decays", Range::greater_than(0));
    v.field("milestones", milestones, "multistep schedule: epochs after warmup at which the lr is multiplied by gamma");
    v.field("gamma", gamma, "step/multistep: decay factor; exponential: factor per epoch", Range::greater_than(0));
    v.field("power", power, "polynomial schedule: exponent of (1 - progress)", Range::greater_than(0));
  }
};

enum class AmpDtype { float16, bfloat16 };
inline const EnumTable<AmpDtype>& amp_dtypes() {
  static const EnumTable<AmpDtype> table{{"float16", AmpDtype::float16}, {"bfloat16", AmpDtype::bfloat16}};
  return table;
}

// Automatic mixed precision: autocast around forward and loss; float16 adds a dynamic loss scaler.
struct AmpConfig {
  bool enabled = false;
  AmpDtype dtype = AmpDtype::float16;
  bool cuda_only = false;
  Switch eval = Switch::automatic;
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;

  template <class V>
  void visit(V& v) {
    v.field("enabled", enabled, "autocast forward and loss to dtype (CUDA: float16 or bfloat16; CPU: bfloat16)");
    v.choice("dtype", dtype, amp_dtypes(), "autocast dtype; float16 uses a dynamic loss scaler");
    v.field("cuda_only", cuda_only, "use mixed precision only when the run is on CUDA");
    v.choice("eval", eval, switch_values(),
             "evaluate under the same autocast dtype; auto: on CUDA, float32 on the CPU");
    v.field("init_scale", init_scale, "float16: initial loss scale", Range::greater_than(0));
    v.field("growth_factor", growth_factor, "float16: scale multiplier after growth_interval clean steps",
            Range::greater_than(1));
    v.field("backoff_factor", backoff_factor, "float16: scale multiplier after an overflow",
            Range::between(0.0001, 0.9999));
    v.field("growth_interval", growth_interval, "float16: clean steps before the scale grows", Range::at_least(1));
  }
};

// Mixup and CutMix (timm's semantics): per batch, with probability `prob`, mix the batch with its reverse;
// when both alphas are set, CutMix is chosen with probability switch_prob. Targets become soft labels.
struct MixConfig {
  double mixup_alpha = 0.0;
  double cutmix_alpha = 0.0;
  double prob = 1.0;
  double switch_prob = 0.5;

  bool enabled() const { return mixup_alpha > 0 || cutmix_alpha > 0; }
  template <class V>
  void visit(V& v) {
    v.field("mixup_alpha", mixup_alpha, "mixup Beta(alpha, alpha) parameter; 0 disables mixup", Range::at_least(0));
    v.field("cutmix_alpha", cutmix_alpha, "CutMix Beta(alpha, alpha) parameter; 0 disables CutMix", Range::at_least(0));
    v.field("prob", prob, "probability of mixing a batch", Range::between(0, 1));
    v.field("switch_prob", switch_prob, "probability of CutMix instead of mixup when both are enabled",
            Range::between(0, 1));
  }
};

// Exponential moving average of the weights, evaluated beside them and saved in checkpoints.
struct EmaConfig {
  bool enabled = false;
  double decay = 0.9999;
  int64_t every = 1;
  bool warmup = false;

  template <class V>
  void visit(V& v) {
    v.field("enabled", enabled, "keep an exponential moving average of the weights");
    v.field("decay", decay, "EMA decay per update", Range::between(0, 1));
    v.field("every", every, "optimizer steps between EMA updates", Range::at_least(1));
    v.field("warmup", warmup, "ramp the decay up as (1 + n) / (10 + n) over the first updates");
  }
};

enum class BestMetric { top1, top5, loss, ema_top1 };
inline const EnumTable<BestMetric>& best_metrics() {
  static const EnumTable<BestMetric> table{{"top1", BestMetric::top1},
                                           {"top5", BestMetric::top5},
                                           {"loss", BestMetric::loss},
                                           {"ema_top1", BestMetric::ema_top1}};
  return table;
}

// The eval metric early stopping watches: train.best_metric's (the one best.pt follows) or another.
enum class WatchedMetric { best_metric, top1, top5, loss, ema_top1 };
inline const EnumTable<WatchedMetric>& watched_metrics() {
  static const EnumTable<WatchedMetric> table{{"best_metric", WatchedMetric::best_metric},
                                              {"top1", WatchedMetric::top1},
                                              {"top5", WatchedMetric::top5},
                                              {"loss", WatchedMetric::loss},
                                              {"ema_top1", WatchedMetric::ema_top1}};
  return table;
}

// Stopping a run whose evaluations stopped improving (fine-tuning on a few thousand photos overfits in a few
// epochs): after `patience` evaluations in a row without an improvement larger than `min_delta`.
struct EarlyStoppingConfig {
  int64_t patience = 0;
  double min_delta = 0.0;
  WatchedMetric metric = WatchedMetric::best_metric;

  bool enabled() const { return patience > 0; }
  template <class V>
  void visit(V& v) {
    v.field("patience", patience, "evaluations without improvement before the run stops (0: never stops early)",
            Range::at_least(0));
    v.field("min_delta", min_delta, "the least change of the metric that counts as an improvement", Range::at_least(0));
    v.choice("metric", metric, watched_metrics(), "eval metric watched (best_metric: train.best_metric's)");
  }
};

// Per-class weights of the training loss: none, or balanced (inverse class frequency, N / (classes x n_c), as
// scikit-learn's "balanced").
enum class ClassWeights { none, balanced };
inline const EnumTable<ClassWeights>& class_weight_kinds() {
  static const EnumTable<ClassWeights> table{{"none", ClassWeights::none}, {"balanced", ClassWeights::balanced}};
  return table;
}

struct TrainConfig {
  int64_t epochs = 10;
  int64_t log_every = 50;
  int64_t eval_every = 1;
  int64_t checkpoint_every = 1;
  int64_t checkpoint_every_steps = 0;
  double checkpoint_every_minutes = 0;
  int64_t keep_last = 2;
  int64_t keep_every_epochs = 0;
  BestMetric best_metric = BestMetric::top1;
  double label_smoothing = 0.0;
  ClassWeights class_weights = ClassWeights::none;
  int64_t accumulate_steps = 1;
  double clip_grad_norm = 0.0;
  AmpConfig amp;
  MixConfig mix;
  EmaConfig ema;
  EarlyStoppingConfig early_stopping;
  int64_t unfreeze_at_epoch = 0;

  // The metric early stopping watches, train.best_metric's by default.
  BestMetric watched_metric() const {
    switch (early_stopping.metric) {
      case WatchedMetric::top1: return BestMetric::top1;
      case WatchedMetric::top5: return BestMetric::top5;
      case WatchedMetric::loss: return BestMetric::loss;
      case WatchedMetric::ema_top1: return BestMetric::ema_top1;
      case WatchedMetric::best_metric: break;
    }
    return best_metric;
  }

  template <class V>
  void visit(V& v) {
    v.field("epochs", epochs, "training epochs", Range::at_least(1));
    v.field("log_every", log_every, "optimizer steps between log lines and metrics rows", Range::at_least(1));
    v.field("eval_every", eval_every, "epochs between evaluations (the last epoch is always evaluated)",
            Range::at_least(1));
    v.field("checkpoint_every", checkpoint_every, "epochs between last.pt writes (the last epoch is always saved)",
            Range::at_least(1));
    v.field("checkpoint_every_steps", checkpoint_every_steps,
            "also write last.pt and step-N.pt every this many optimizer steps (0: per epoch only)", Range::at_least(0));
    v.field("checkpoint_every_minutes", checkpoint_every_minutes,
            "also write last.pt once this many minutes have passed since the last checkpoint (0: off); for "
            "machines that reboot for updates and jobs with a time limit",
            Range::at_least(0));
    v.field("keep_last", keep_last, "step checkpoints (step-N.pt) to keep", Range::at_least(1));
    v.field("keep_every_epochs", keep_every_epochs, "also keep epoch-E.pt every this many epochs (0: none)",
            Range::at_least(0));
    v.choice("best_metric", best_metric, best_metrics(), "eval metric that selects best.pt");
    v.field("label_smoothing", label_smoothing, "cross-entropy label smoothing", Range::between(0, 0.99));
    v.choice("class_weights", class_weights, class_weight_kinds(),
             "weights of the classes in the training loss: none, or balanced (inverse class frequency in the training "
             "set); evaluation losses stay unweighted");
    v.field("accumulate_steps", accumulate_steps, "micro-batches of data.batch_size per optimizer step (at most 4096)",
            Range::between(1, 4096));
    v.field("clip_grad_norm", clip_grad_norm, "clip the gradient norm to this value (0: off)", Range::at_least(0));
    v.section("amp", amp);
    v.section("mix", mix);
    v.section("ema", ema);
    v.section("early_stopping", early_stopping);
    v.field("unfreeze_at_epoch", unfreeze_at_epoch,
            "after this many epochs model.freeze is lifted and every layer trains (train the new head first, then "
            "all); 0: frozen for the whole run",
            Range::at_least(0));
  }
};

struct Config {
  RunConfig run;
  DataConfig data;
  ModelConfig model;
  OptimConfig optim;
  ScheduleConfig schedule;
  TrainConfig train;

  template <class V>
  void visit(V& v) {
    v.section("run", run);
    v.section("data", data);
    v.section("model", model);
    v.section("optim", optim);
    v.section("schedule", schedule);
    v.section("train", train);
  }
};

// The learning rate the schedule starts from: optim.lr, or optim.lr_per_256 scaled by the global batch
// (data.batch_size x train.accumulate_steps) / 256 when that is set.
inline double base_learning_rate(const Config& c) {
  if (c.optim.lr_per_256 <= 0) return c.optim.lr;
  return c.optim.lr_per_256 * static_cast<double>(c.data.batch_size * c.train.accumulate_steps) / 256.0;
}

}  // namespace trainer
