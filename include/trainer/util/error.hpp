// Typed errors for user mistakes. Throw one with what went wrong, where, and a hint;
// main() catches it once, prints the single line, and exits with exit_code().
//   throw ConfigError("optim.lr: expected a number > 0, got -1");   // what(): "config: optim.lr: ..."
//   catch (const DataError& e) { note(e.message()); }                // the message without its category
#pragma once

#include <stdexcept>
#include <string>

namespace trainer {

class Error : public std::runtime_error {
 public:
  Error(const std::string& message, int exit_code) : Error("", message, exit_code) {}
  int exit_code() const { return exit_code_; }
  // what() without the "category: " prefix, for re-raising or quoting the error inside another message.
  const std::string& message() const { return message_; }

 protected:
  Error(const std::string& category, const std::string& message, int exit_code)
      : std::runtime_error(category.empty() ? message : category + ": " + message),
        message_(message),
        exit_code_(exit_code) {}

 private:
  std::string message_;
  int exit_code_;
};

// Bad command line (unknown flag, malformed --set, incompatible options).
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& m) : Error("usage", m, 2) {}
};

// A config value that is missing, mistyped, out of range or unknown. The message starts with its JSON path.
class ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& m) : Error("config", m, 2) {}
};

// A dataset that is missing, malformed or inconsistent. The message names the file.
class DataError : public Error {
 public:
  explicit DataError(const std::string& m) : Error("data", m, 2) {}
};

// A checkpoint that cannot be read, written, or does not fit the requested run.
class CheckpointError : public Error {
 public:
  explicit CheckpointError(const std::string& m) : Error("checkpoint", m, 2) {}
};

// A weights file (safetensors) that is malformed, or whose tensors do not fit the model.
class WeightsError : public Error {
 public:
  explicit WeightsError(const std::string& m) : Error("weights", m, 2) {}
};

// A file that could not be fetched: the message names the address and the cause (and what to do offline).
class DownloadError : public Error {
 public:
  explicit DownloadError(const std::string& m) : Error("download", m, 2) {}
};

// A deployment file (ONNX, TorchScript) that cannot be built, checked, written or read. The message names it.
class ExportError : public Error {
 public:
  explicit ExportError(const std::string& m) : Error("export", m, 2) {}
};

// A file that could not be written (no space, an I/O error, a read-only folder, a quota): the message names the
// file and the cause (write_error.hpp). Nothing half-written is left under the file's name.
class WriteError : public Error {
 public:
  explicit WriteError(const std::string& m) : Error(m, 1) {}
};

// Training itself failed (for example a non-finite loss); the previous checkpoint is intact.
class TrainError : public Error {
 public:
  explicit TrainError(const std::string& m) : Error("train", m, 1) {}
};

}  // namespace trainer
