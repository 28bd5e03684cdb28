#include "trainer/distributed/collectives.hpp"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <functional>

#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"
#include "trainer/util/torch_compat.hpp"

namespace trainer {

namespace {

// The store's socket errors are c10::Errors on LibTorch 2.x and plain std::exceptions (c10d::SocketError) on 1.13.
std::string message_of(const std::exception& e) {
  const auto* c10 = dynamic_cast<const c10::Error*>(&e);
  return first_line(c10 ? c10->what_without_backtrace() : e.what());
}

c10::intrusive_ptr<compat::ProcessGroupBackend> make_gloo(const c10::intrusive_ptr<c10d::Store>& store,
                                                          const World& world, std::chrono::milliseconds timeout) {
  auto gloo = c10d::ProcessGroupGloo::Options::create(timeout);
  // A one-machine world talks over loopback; across machines Gloo takes the address this host's name resolves to.
  const bool loopback = world.master_addr == "127.0.0.1" || world.master_addr == "localhost";
  gloo->devices.push_back(loopback ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                   : c10d::ProcessGroupGloo::createDefaultDevice());
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, static_cast<int>(world.rank), static_cast<int>(world.size),
                                                     gloo);
}

// NCCL's communicators are created at the first collective, on the device of its tensors. Its timeout is
// enforced by its watchdog thread, which ends the process when a collective overruns.
c10::intrusive_ptr<compat::ProcessGroupBackend> make_nccl(const c10::intrusive_ptr<c10d::Store>& store,
                                                          const World& world, std::chrono::milliseconds timeout) {
#ifdef USE_C10D_NCCL
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, static_cast<int>(world.rank), static_cast<int>(world.size),
                                                     options);
#else
  (void)store, (void)world, (void)timeout;
  throw UsageError("run.dist_backend nccl: this trainer was built without NCCL");
#endif
}

}  // namespace

bool nccl_available() {
#ifdef USE_C10D_NCCL
  return true;
#else
  return false;
#endif
}

DistBackend resolve_backend(DistBackend requested, const torch::Device& device) {
  switch (requested) {
    case DistBackend::automatic: return device.is_cuda() && nccl_available() ? DistBackend::nccl : DistBackend::gloo;
    case DistBackend::nccl:
      if (!device.is_cuda())
        throw UsageError("run.dist_backend nccl needs CUDA, but the run is on " + device.str() +
                         "; use run.dist_backend gloo (or auto)");
      if (!nccl_available())
        throw UsageError(
            "run.dist_backend nccl: this trainer was built without NCCL (nccl.h was not found when it "
            "was built; Debian: libnccl-dev); use run.dist_backend gloo");
      return requested;
    case DistBackend::gloo: return requested;
  }
  return requested;
}

struct Collectives::Impl {
  World world;
  std::chrono::milliseconds timeout;
  DistBackend backend = DistBackend::gloo;
  torch::Device device = torch::kCPU;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<compat::ProcessGroupBackend> group;

  // NCCL reduces device tensors only: a CPU tensor (a vote, a config hash, generator states) travels through the
  // rank's device. Returns the tensor the collective works on.
  torch::Tensor staged(const torch::Tensor& t) const {
    return backend == DistBackend::nccl && !t.is_cuda() ? t.to(device) : t;
  }

  // A timeout or a peer that went away, as the error that ends the run.
  TrainError failure(const char* operation, const std::exception& e) const {
    return TrainError(std::string("distributed ") + operation + " failed on rank " + std::to_string(world.rank) +
                      " of " + std::to_string(world.size) + " (timeout " + std::to_string(timeout.count() / 1000) +
                      " s): " + message_of(e));
  }

  // Runs one collective to completion. Under NCCL, wait() without a timeout only makes the current stream wait
  // for NCCL's (the group's watchdog enforces its timeout): since PyTorch 2.6 wait(timeout) also blocks the host
  // until the GPU has finished, which would stall every step on the gradient all-reduce and the stop vote. Gloo
  // works on the host, and its wait honours the timeout given.
  void run(const char* operation, const std::function<c10::intrusive_ptr<c10d::Work>()>& start) const {
    try {
      if (backend == DistBackend::nccl) start()->wait();
      else start()->wait(timeout);
    } catch (const std::exception& e) {  // c10::Error, or Gloo's own (a peer that closed its connection)
      throw failure(operation, e);
    }
  }
};

Collectives::Collectives(const World& world, const CollectivesOptions& o) : impl_(std::make_unique<Impl>()) {
  const std::chrono::milliseconds timeout = o.timeout;  // the store's, the group's and every wait's
  impl_->world = world;
  impl_->timeout = timeout;
  impl_->backend = o.backend;
  impl_->device = o.device;
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(world.port);
  options.isServer = world.rank == 0 && !world.agent_store;
  options.numWorkers = static_cast<std::size_t>(world.size);
  options.waitWorkers = true;
  options.timeout = timeout;
  compat::use_classic_tcp_store(options);
  const std::string where = world.master_addr + ":" + std::to_string(world.port);
  auto not_met = [&](const std::string& message) {
    return TrainError("distributed: rank " + std::to_string(world.rank) + " of " + std::to_string(world.size) +
                      " could not meet the others at " + where + " within " + std::to_string(timeout.count() / 1000) +
                      " s: " + message);
  };
  try {
    auto tcp = c10::make_intrusive<c10d::TCPStore>(world.master_addr, options);
    // Under torchrun the agent's store is shared by every restart: keys go under the attempt's prefix, as
    // torch.distributed's own ranks do.
    if (world.agent_store)
      impl_->store =
          c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + std::to_string(world.restart_count), tcp);
    else impl_->store = tcp;
  } catch (const std::exception& e) {
    const std::string message = message_of(e);
    if (world.rank == 0 && (message.find("in use") != std::string::npos || message.find("bind") != std::string::npos))
      throw UsageError("distributed: rank 0 cannot listen on " + where + " (MASTER_PORT): " + message +
                       "; choose another MASTER_PORT");
    throw not_met(message);
  }
  try {
    impl_->group = o.backend == DistBackend::nccl ? make_nccl(impl_->store, world, timeout)
                                                  : make_gloo(impl_->store, world, timeout);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw not_met(message_of(e));
  }
}

Collectives::~Collectives() = default;

const World& Collectives::world() const { return impl_->world; }

DistBackend Collectives::backend() const { return impl_->backend; }

const torch::Device& Collectives::device() const { return impl_->device; }

void Collectives::all_reduce_sum(const std::vector<torch::Tensor>& tensors) {
  std::vector<std::function<void()>> pending;
  for (const auto& t : tensors) pending.push_back(start_all_reduce_sum(t));
  for (const auto& wait : pending) wait();
}

// c10d's collectives take one tensor per device of this process (all alike): here always one.
std::function<void()> Collectives::start_all_reduce_sum(const torch::Tensor& tensor) {
  auto kept = std::make_shared<std::vector<torch::Tensor>>(1, impl_->staged(tensor));
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = impl_->group->allreduce(*kept);
  } catch (const std::exception& e) {
    throw impl_->failure("all-reduce", e);
  }
  const Impl* impl = impl_.get();
  return [impl, kept, work, tensor]() mutable {
    impl->run("all-reduce", [&] { return work; });
    if (!kept->front().is_same(tensor)) tensor.copy_(kept->front());
  };
}

void Collectives::broadcast(const std::vector<torch::Tensor>& tensors, int64_t root) {
  c10d::BroadcastOptions options;
  options.rootRank = root;
  for (auto t : tensors) {
    std::vector<torch::Tensor> one{impl_->staged(t)};
    impl_->run("broadcast", [&] { return impl_->group->broadcast(one, options); });
    if (!one.front().is_same(t)) t.copy_(one.front());
  }
}

// NCCL's own barrier guesses the device from the rank; a one-element all-reduce on this rank's device does not.
void Collectives::barrier() {
  if (impl_->backend == DistBackend::nccl) all_reduce_sum({torch::zeros({1}, torch::TensorOptions(impl_->device))});
  else impl_->run("barrier", [&] { return impl_->group->barrier(); });
}

}  // namespace trainer
