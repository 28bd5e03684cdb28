// The bytes `trainer export` would write for a model built in a test (no checkpoint, no command): its inference
// graph, parameters and buffers in a format's serializer.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "trainer/deploy/export_format.hpp"

namespace trainer::testing {

inline NamedTensors contiguous_copies(const std::vector<std::pair<std::string, torch::Tensor>>& items) {
  NamedTensors out;
  for (const auto& [name, t] : items) out.emplace_back(name, t.detach().contiguous());
  return out;
}

inline std::string serialize_model(const ExportFormat& format, Classifier& model, const ImageShape& input,
                                   const Metadata& metadata, int64_t num_classes, int64_t batch = 0,
                                   int64_t opset = 0) {
  const auto graph = model.inference_graph();
  EXPECT_TRUE(graph.has_value());
  ExportRequest request;
  request.graph = *graph;
  request.parameters = contiguous_copies(model.named_parameters().pairs());
  request.buffers = contiguous_copies(model.named_buffers().pairs());
  request.metadata = metadata;
  request.input = input;
  request.num_classes = num_classes;
  request.opset = opset;
  request.batch = batch;
  return format.serialize(request);
}

}  // namespace trainer::testing
