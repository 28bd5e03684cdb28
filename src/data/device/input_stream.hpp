// The CUDA stream the input pipeline copies and decodes on (CUDA builds): one per device for the process, made
// on first use and never destroyed, as c10's own pool streams are. Not from c10's pool: ProcessGroupNCCL takes
// its stream from the same pool of low-priority streams, round-robin, and sharing one would queue the next batch's
// copy and decode behind the gradient all-reduce (or the reverse).
#pragma once

#ifdef TRAINER_CUDA
#include <c10/cuda/CUDAStream.h>

namespace trainer {

c10::cuda::CUDAStream input_stream(c10::DeviceIndex device);

}  // namespace trainer
#endif
