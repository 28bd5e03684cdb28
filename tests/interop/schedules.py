"""PyTorch's learning rates for a warmup + schedule setting, one per optimizer step, as JSON on stdout.

The warmup scheduler (LinearLR or ConstantLR) gives steps [0, W); the main scheduler, started afresh at the
base rate, gives steps [W, total). Each is stepped once per optimizer step, as the trainer's schedule is.
  schedules.py '{"kind": "cosine", "base": 0.1, "total": 50, "per_epoch": 5, "warmup": 7, ...}'
"""
import json
import sys

import torch
from torch.optim import lr_scheduler as S


def rates(optimizer, scheduler, steps):
    out = []
    for _ in range(steps):
        out.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return out


def main():
    a = json.loads(sys.argv[1])
    base, total, per_epoch, w = a["base"], a["total"], a["per_epoch"], a["warmup"]
    param = torch.zeros(1, requires_grad=True)

    def fresh():
        return torch.optim.SGD([param], lr=base)

    lrs = []
    if w > 0:
        opt = fresh()
        if a["warmup_kind"] == "linear":
            warm = S.LinearLR(opt, start_factor=a["start_factor"], end_factor=1.0, total_iters=w)
        else:
            warm = S.ConstantLR(opt, factor=a["start_factor"], total_iters=w)
        lrs += rates(opt, warm, w)
    t = total - w
    opt = fresh()
    kind = a["kind"]
    if kind == "constant":
        main_s = S.LambdaLR(opt, lambda step: 1.0)
    elif kind == "cosine":
        main_s = S.CosineAnnealingLR(opt, T_max=t, eta_min=a["min_lr"])
    elif kind == "step":
        main_s = S.StepLR(opt, step_size=round(a["step_epochs"] * per_epoch), gamma=a["gamma"])
    elif kind == "multistep":
        main_s = S.MultiStepLR(opt, milestones=[round(m * per_epoch) for m in a["milestones"]], gamma=a["gamma"])
    elif kind == "exponential":
        main_s = S.ExponentialLR(opt, gamma=a["gamma"] ** (1.0 / per_epoch))
    elif kind == "polynomial":
        main_s = S.PolynomialLR(opt, total_iters=t, power=a["power"])
    else:
        raise SystemExit("unknown kind " + kind)
    lrs += rates(opt, main_s, t)
    print(json.dumps(lrs))


if __name__ == "__main__":
    main()
