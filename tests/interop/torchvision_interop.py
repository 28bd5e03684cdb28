#!/usr/bin/env python3
"""The Python side of the weight-interop tests: torchvision models against the trainer's safetensors files.

  torchvision_interop.py check ARCH WEIGHTS IO   load WEIGHTS into ARCH, run IO's "input", compare with IO's "logits"
  torchvision_interop.py make ARCH SEED WEIGHTS IO [HxW]   write a seeded ARCH's weights, and an input with its
                                                   logits (WEIGHTS ending in .pth: torch.save's file of the state
                                                   dict; HxW: the input's size, for a model that takes any)
  torchvision_interop.py step ARCH SEED WEIGHTS OUT  one training step of a seeded ARCH (weights written first); OUT
                                                   holds its input, target, loss, gradients and buffers after
  torchvision_interop.py keys OUT ARCH...           write each ARCH's state-dict names and shapes, in order, to OUT
                                                   as JSON {arch: [[name, shape], ...]}
  torchvision_interop.py unreadable KIND PATH        write a .pth the trainer must refuse: KIND is legacy (the
                                                   pre-1.6 format), class (a pickled argparse.Namespace beside a
                                                   tensor), tar (the oldest format's layout) or truncated
                                                   (a state dict cut in half)

  torchvision_interop.py resize ARCH SEED FROM TO WEIGHTS IO   a seeded ViT's weights at FROM pixels, and an input
                                                   at TO with the logits of those weights resized by torchvision

ARCH is a torchvision classification model's name (10 classes, 3 channels, 64x64 images; a ViT's the largest
multiple of its patch up to 64) or mnist_cnn (PyTorch's MNIST example network).
The safetensors package is not in Debian, so the format is read and written here with struct and json.
Exit status: 0 when the logits agree to 1e-4, 1 when they do not, 2 for bad arguments.
"""
import json
import struct
import sys

import torch
import torch.nn.functional as F
import torchvision

from uninitialised import weights_not_drawn

TOLERANCE = 1e-4
DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
          "BOOL": torch.bool}
NAMES = {v: k for k, v in DTYPES.items()}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = bytearray(f.read())  # writable, so the tensors can view it without a copy each
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(bytes(data[8:8 + n]))
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        dtype = DTYPES[info["dtype"]]
        count = (end - begin) // torch.tensor([], dtype=dtype).element_size()
        flat = torch.frombuffer(data, dtype=dtype, count=count, offset=8 + n + begin) if count else \
            torch.empty(0, dtype=dtype)
        tensors[name] = flat.reshape(info["shape"])
    return tensors, metadata


def write_safetensors(path, tensors, metadata=None):
    header, chunks, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        b = t.detach().contiguous().cpu().numpy().tobytes() if t.dtype != torch.bfloat16 else \
            t.detach().contiguous().cpu().view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        chunks.append(b)
        offset += len(b)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


class MnistCnn(torch.nn.Module):
    """PyTorch's MNIST example network (its dropouts hold no weights and are off in eval mode)."""

    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 3, 1)
        self.conv2 = torch.nn.Conv2d(32, 64, 3, 1)
        self.fc1 = torch.nn.Linear(9216, 128)
        self.fc2 = torch.nn.Linear(128, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2).flatten(1)
        return self.fc2(F.relu(self.fc1(x)))


def randomize(model, logit_scales=True):
    """Non-trivial norm values, so a swapped buffer shows in the logits; layer scales off their 1e-6.

    logit_scales: Swin V2's spread up to its cap, where attention is at its steepest: float32 logits then differ from
    float64 ones by ~2e-5 (swin_v2_t here) and gradients by ~6e-4 relative, more than one training step's test can
    tell from a defect; left at log(10) for that test, where the gradients' float32 error is ~4e-6."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0, 0.1)
                m.running_mean.normal_(0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.num_batches_tracked.fill_(3)
            elif isinstance(m, torch.nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0, 0.1)
        for name, p in model.named_parameters():
            if name.endswith("layer_scale"):  # 1e-6 at the start would hide a wrong block
                p.uniform_(0.1, 0.3)
            elif name in ("class_token", "heads.head.weight", "heads.head.bias"):  # ViT's zeros: logits all 0
                p.normal_(0, 0.02)
            elif name.endswith("qkv.bias"):  # Swin's zeros would hide V2's zeroed key third
                p.normal_(0, 0.1)
            elif name.endswith("logit_scale") and logit_scales:  # from log(10): some above the cap of log(100)
                p.uniform_(1.5, 5.0)


def side(arch):
    """64, or for a ViT the largest multiple of its patch (vit_b_16: 16) up to 64."""
    return 64 // int(arch.split("_")[-1]) * int(arch.split("_")[-1]) if arch.startswith("vit_") else 64


def build(arch, size=None):
    if arch == "mnist_cnn":
        return MnistCnn(), (2, 1, 28, 28)
    if isinstance(size, tuple):  # (height, width), for the models that take any
        return getattr(torchvision.models, arch)(num_classes=10), (2, 3) + size
    size = size or side(arch)
    extra = {"image_size": size} if arch.startswith("vit_") else {}
    return getattr(torchvision.models, arch)(num_classes=10, **extra), (2, 3, size, size)


def main(argv):
    if len(argv) == 5 and argv[1] == "check":
        _, _, arch, weights, io = argv
        with weights_not_drawn():  # every tensor is loaded strictly below
            model, _ = build(arch)
            fresh = build(arch)[0].state_dict()
        state, metadata = read_safetensors(weights)
        model.load_state_dict(state, strict=True)  # names and shapes must be torchvision's exactly
        model.eval()
        tensors, _ = read_safetensors(io)
        with torch.no_grad():
            logits = model(tensors["input"])
        diff = (logits - tensors["logits"]).abs().max().item()
        # Buffers computed at construction (Swin's relative position index and coordinates) as torchvision's own.
        computed = [(state[n].double() - fresh[n].double()).abs().max().item() for n in state if "relative_" in n
                    and not n.endswith("bias_table")]
        worst = max(computed, default=0.0)
        print(f"{arch}: {len(state)} tensors loaded into torchvision, max |logit difference| {diff:.3g}"
              f" (metadata arch {metadata.get('arch', '?')}); {len(computed)} computed buffers, worst {worst:.3g}")
        return 0 if diff <= TOLERANCE and worst <= 1e-6 else 1
    if len(argv) == 6 and argv[1] == "step":
        # One training step from seeded weights (written to WEIGHTS first): train mode, so BatchNorm takes batch
        # statistics and updates its running ones, and stochastic depth and dropout draw from the generator seeded
        # with SEED + 1 just before the forward pass. OUT: input, target, loss, grad.NAME, state.BUFFER (after).
        _, _, arch, seed, weights, out = argv
        torch.manual_seed(int(seed))
        model, shape = build(arch)
        randomize(model, logit_scales=False)
        write_safetensors(weights, model.state_dict(), {"format": "pt", "arch": arch})
        model.train()
        x = torch.randn((4,) + shape[1:])
        target = torch.randint(0, 10, (4,))
        torch.manual_seed(int(seed) + 1)
        loss = F.cross_entropy(model(x), target)
        loss.backward()
        tensors = {"input": x, "target": target, "loss": loss.detach().reshape(1)}
        tensors.update({"grad." + n: p.grad for n, p in model.named_parameters()})
        # The buffers after the step (running statistics); the parameters take no step here.
        tensors.update({"state." + n: t for n, t in model.named_buffers()})
        write_safetensors(out, tensors)
        print(f"{arch}: one training step, loss {loss.item():.6f}")
        return 0
    if len(argv) in (6, 7) and argv[1] == "make":
        _, _, arch, seed, weights, io = argv[:6]
        torch.manual_seed(int(seed))
        model, shape = build(arch, tuple(int(v) for v in argv[6].split("x")) if len(argv) == 7 else None)
        randomize(model)
        model.eval()
        x = torch.randn(shape)
        with torch.no_grad():
            logits = model(x)
        if weights.endswith(".pth"):
            torch.save(model.state_dict(), weights)
        else:
            write_safetensors(weights, model.state_dict(), {"format": "pt", "arch": arch})
        write_safetensors(io, {"input": x, "logits": logits})
        print(f"{arch}: wrote {len(model.state_dict())} tensors from torchvision")
        return 0
    if len(argv) == 8 and argv[1] == "resize":
        # A seeded ViT at FROM pixels (its weights written), then the same weights in one built for TO pixels
        # through torchvision's interpolate_embeddings, and an input at TO with its logits.
        _, _, arch, seed, size_from, size_to, weights, io = argv
        torch.manual_seed(int(seed))
        model, _ = build(arch, int(size_from))
        randomize(model)
        state = model.state_dict()
        write_safetensors(weights, state, {"format": "pt", "arch": arch})
        target, shape = build(arch, int(size_to))
        from torchvision.models.vision_transformer import interpolate_embeddings
        target.load_state_dict(interpolate_embeddings(int(size_to), target.patch_size, state), strict=True)
        target.eval()
        x = torch.randn(shape)
        with torch.no_grad():
            logits = target(x)
        write_safetensors(io, {"input": x, "logits": logits})
        print(f"{arch}: {size_from} px weights run at {size_to} px")
        return 0
    if len(argv) >= 4 and argv[1] == "keys":
        out = {}
        for arch in argv[3:]:
            with weights_not_drawn():  # names and shapes need no values
                model, _ = build(arch)
            out[arch] = [[name, list(t.shape)] for name, t in model.state_dict().items()]
        with open(argv[2], "w") as f:
            json.dump(out, f)
        return 0
    if len(argv) == 4 and argv[1] == "unreadable":
        _, _, kind, path = argv
        state = MnistCnn().state_dict()
        if kind == "legacy":
            torch.save(state, path, _use_new_zipfile_serialization=False)
        elif kind == "class":
            import argparse
            torch.save({"conv1.weight": state["conv1.weight"], "args": argparse.Namespace(lr=0.1)}, path)
        elif kind == "tar":  # the oldest format's layout: a tar of sys_info, pickle, storages, tensors
            import io
            import tarfile
            with tarfile.open(path, "w") as tar:
                for name in ("sys_info", "pickle", "storages", "tensors"):
                    data = b"\x80\x02}q\x00."  # an empty pickled dict stands in for each member
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        elif kind == "truncated":
            torch.save(state, path)
            with open(path, "rb") as f:
                data = f.read()
            with open(path, "wb") as f:
                f.write(data[:len(data) // 2])
        else:
            return 2
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
