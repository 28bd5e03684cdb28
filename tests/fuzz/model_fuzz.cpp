// An exported model as `trainer predict --model` opens it (cli/predictor.hpp): an ONNX file, checked before
// OpenCV's importer reads a tensor, then its metadata (the run's config, classes and input shape) and one image
// through its graph. A TorchScript file is a program and is refused without --trust-model; with it, the same
// CRC-32 check and pickle walk as a checkpoint's run before LibTorch compiles its code (the zip_records and
// checkpoint targets fuzz those), and what the code then does is the user's trust, not a reader's.
#include "fuzz/fuzz_support.hpp"
#include "trainer/cli/predictor.hpp"

TRAINER_FUZZ_TARGET(model) {
  const auto& scratch = trainer::fuzz::scratch();
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const auto onnx = scratch.write("model.onnx", bytes);
  trainer::fuzz::refused_cleanly([&] { trainer::predictor_from_export(onnx.string(), /*trust_model=*/false); });
  const auto torchscript = scratch.write("model.pt", bytes);
  trainer::fuzz::refused_cleanly([&] { trainer::predictor_from_export(torchscript.string(), false); });
  return 0;
}
