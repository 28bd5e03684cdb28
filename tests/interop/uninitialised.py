"""Builds torchvision models without drawing their initial weights, for the checks that load every tensor strictly
right after (the draws, a truncated normal over every weight of a ConvNeXt, ViT or Swin, are most of their time)."""
import contextlib

import torch


@contextlib.contextmanager
def weights_not_drawn():
    saved = {name: getattr(torch.nn.init, name) for name in dir(torch.nn.init)
             if name.endswith("_") and not name.startswith("_")}
    for name in saved:
        setattr(torch.nn.init, name, lambda t, *args, **kwargs: t)
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch.nn.init, name, fn)
