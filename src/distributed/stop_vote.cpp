#include "trainer/distributed/stop_vote.hpp"

#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <chrono>
#include <csignal>
#include <optional>
#include <thread>

namespace trainer {

struct StopVote::Pending {
  torch::Tensor sums;                // {ranks with SIGINT, ranks with SIGTERM, ranks due a timed save}, host
  std::optional<c10::Event> copied;  // NCCL: recorded on the device's stream after the copy into `sums`

  // Waits for the copy by polling: LibTorch 1.13's device-generic event can only be queried. The copy sits
  // behind the previous step's work, which has usually finished by the time the next step is queued.
  void wait() const {
    if (!copied) return;
    while (!copied->query()) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
};

StopVote::StopVote(Collectives& group) : group_(group) {}
StopVote::~StopVote() = default;

StopVote::Decision StopVote::cast(int own, bool save_due) {
  Decision decision;
  if (pending_) {
    pending_->wait();
    const int64_t* sums = pending_->sums.data_ptr<int64_t>();
    // A signal is an identifier, not a quantity: every rank takes the same one, SIGTERM (a scheduler's
    // preemption, a shutdown) over SIGINT.
    decision.stop = sums[1] > 0 ? SIGTERM : sums[0] > 0 ? SIGINT : 0;
    decision.save = sums[2] > 0;
  }
  auto next = std::make_unique<Pending>();
  // Any request other than SIGTERM counts as SIGINT (the platform layer gives no other).
  const int64_t terms = own == SIGTERM ? 1 : 0, ints = own != 0 && own != SIGTERM ? 1 : 0, saves = save_due ? 1 : 0;
  if (group_.backend() == DistBackend::nccl) {
    // Made on the device by fill kernels, not copied from the host (a pageable copy would synchronise).
    const torch::Device device = group_.device();
    auto ballot = torch::full({3}, ints, torch::TensorOptions().dtype(torch::kInt64).device(device));
    ballot.narrow(0, 1, 1).fill_(terms);
    ballot.narrow(0, 2, 1).fill_(saves);
    group_.all_reduce_sum({ballot});
    next->sums = torch::empty({3}, torch::TensorOptions().dtype(torch::kInt64).pinned_memory(true));
    next->sums.copy_(ballot, /*non_blocking=*/true);
    const c10::impl::VirtualGuardImpl guard(device.type());
    next->copied.emplace(device.type());
    next->copied->record(guard.getStream(device));
  } else {
    next->sums = torch::tensor({ints, terms, saves}, torch::kInt64);
    group_.all_reduce_sum({next->sums});
  }
  pending_ = std::move(next);
  return decision;
}

}  // namespace trainer
