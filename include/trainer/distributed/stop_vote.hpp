// The ranks' agreement to stop after a step, or to save a timed checkpoint (train.checkpoint_every_minutes: the
// ranks' clocks differ, so they vote). SLURM signals every rank, but Ctrl-C under a launcher may reach only
// one: after every step each rank casts its own stop request (a signal number, 0 for none) and all ranks take
// the same decision, so all stop after the same step and save the same checkpoint. A ballot is counted with one
// small all-reduce and read one step later: under NCCL the sum stays on the GPU's queue, is copied to page-locked
// memory behind that step's work, and is read when the next step has been queued, so no step waits for the GPU
// (reading it at once would stall the host every step). The cost: a stop takes effect one step later.
//   StopVote vote(group);
//   const StopVote::Decision d = vote.cast(stop.pending(), /*save_due=*/minutes >= every);
//   if (d.stop) { save(); return d.stop; }
#pragma once

#include <torch/types.h>

#include <memory>

#include "trainer/distributed/collectives.hpp"

namespace trainer {

class StopVote {
 public:
  explicit StopVote(Collectives& group);
  ~StopVote();
  StopVote(const StopVote&) = delete;
  StopVote& operator=(const StopVote&) = delete;

  struct Decision {
    int stop = 0;       // 0 to go on, or the signal every rank stops with: SIGTERM if any rank had it, else SIGINT
    bool save = false;  // a rank's timed checkpoint is due: all save
  };

  // Casts this step's ballot (`own`: this rank's pending signal, 0 for none; `save_due`: its timed checkpoint is
  // due; a collective every rank calls once per step) and returns the previous step's decision. The first call
  // of a run decides nothing.
  Decision cast(int own, bool save_due);

 private:
  struct Pending;
  Collectives& group_;
  std::unique_ptr<Pending> pending_;  // the ballot cast at the previous step, being counted
};

}  // namespace trainer
