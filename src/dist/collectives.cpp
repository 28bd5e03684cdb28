#include "trainer/dist/collectives.hpp"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

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

}  // namespace

struct Collectives::Impl {
  World world;
  std::chrono::milliseconds timeout;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;

  // A timeout or a peer that went away, as the error that ends the run.
  TrainError failure(const char* operation, const std::exception& e) const {
    return TrainError(std::string("distributed ") + operation + " failed on rank " + std::to_string(world.rank) +
                      " of " + std::to_string(world.size) + " (timeout " + std::to_string(timeout.count() / 1000) +
                      " s): " + message_of(e));
  }

  // Runs one collective to completion.
  void run(const char* operation, const std::function<c10::intrusive_ptr<c10d::Work>()>& start) const {
    try {
      start()->wait(timeout);
    } catch (const std::exception& e) {  // c10::Error, or Gloo's own (a peer that closed its connection)
      throw failure(operation, e);
    }
  }
};

Collectives::Collectives(const World& world, std::chrono::milliseconds timeout) : impl_(std::make_unique<Impl>()) {
  impl_->world = world;
  impl_->timeout = timeout;
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
      impl_->store = c10::make_intrusive<c10d::PrefixStore>(
          "/worker/attempt_" + std::to_string(world.restart_count), tcp);
    else
      impl_->store = tcp;
  } catch (const std::exception& e) {
    const std::string message = message_of(e);
    if (world.rank == 0 && (message.find("in use") != std::string::npos || message.find("bind") != std::string::npos))
      throw UsageError("distributed: rank 0 cannot listen on " + where + " (MASTER_PORT): " + message +
                       "; choose another MASTER_PORT");
    throw not_met(message);
  }
  auto gloo = c10d::ProcessGroupGloo::Options::create(timeout);
  // A one-machine world talks over loopback; across machines Gloo takes the address this host's name resolves to.
  const bool loopback = world.master_addr == "127.0.0.1" || world.master_addr == "localhost";
  gloo->devices.push_back(loopback ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                   : c10d::ProcessGroupGloo::createDefaultDevice());
  try {
    impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, static_cast<int>(world.rank),
                                                               static_cast<int>(world.size), gloo);
  } catch (const std::exception& e) {
    throw not_met(message_of(e));
  }
}

Collectives::~Collectives() = default;

const World& Collectives::world() const { return impl_->world; }

void Collectives::all_reduce_sum(const std::vector<torch::Tensor>& tensors) {
  std::vector<std::function<void()>> pending;
  for (const auto& t : tensors) pending.push_back(start_all_reduce_sum(t));
  for (const auto& wait : pending) wait();
}

// c10d's collectives take one tensor per device of this process (all alike): here always one.
std::function<void()> Collectives::start_all_reduce_sum(const torch::Tensor& tensor) {
  auto kept = std::make_shared<std::vector<torch::Tensor>>(1, tensor);
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = impl_->group->allreduce(*kept);
  } catch (const std::exception& e) {
    throw impl_->failure("all-reduce", e);
  }
  const Impl* impl = impl_.get();
  return [impl, kept, work] { impl->run("all-reduce", [&] { return work; }); };
}

void Collectives::broadcast(const std::vector<torch::Tensor>& tensors, int64_t root) {
  c10d::BroadcastOptions options;
  options.rootRank = root;
  for (const auto& t : tensors) {
    std::vector<torch::Tensor> one{t};
    impl_->run("broadcast", [&] { return impl_->group->broadcast(one, options); });
  }
}

void Collectives::barrier() {
  impl_->run("barrier", [&] { return impl_->group->barrier(); });
}

}  // namespace trainer
