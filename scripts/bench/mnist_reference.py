#!/usr/bin/env python3
"""The Python reference for scripts/bench/compare_mnist.sh: one epoch of Fashion-MNIST with the same CNN,
optimizer, schedule, batch size, threads and loader workers as configs/fashion_mnist_cnn.json, written the
way PyTorch's MNIST example is (torchvision dataset, ToTensor + Normalize, torch DataLoader).
Prints one JSON line: images/s of the training epoch (end to end, data loading included) and eval top-1.
With --nproc N it trains as PyTorch's data-parallel recipe does: N processes (torch.multiprocessing), Gloo,
DistributedDataParallel (25 MB buckets), DistributedSampler, batch-size / N images per process and threads / N
intra-op threads each; rank 0 times the epoch and evaluates."""
import argparse, gzip, json, math, os, shutil, socket, tempfile, time

import torch.distributed as dist
import torch.multiprocessing as mp

import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision import datasets, transforms


class Net(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2).flatten(1)
        x = F.relu(self.fc1(self.dropout(x)))
        return self.fc2(self.dropout(x))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--root", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--eval-batch-size", type=int, default=256)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--nproc", type=int, default=1)
    p.add_argument("--limit-train", type=int, default=0, help="train on N evenly spaced images (as data.limit_train)")
    a = p.parse_args()
    if a.nproc == 1:
        print(json.dumps(run(0, a)))
        return
    with socket.socket() as s:  # a free loopback port for the rendezvous
        s.bind(("127.0.0.1", 0))
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(s.getsockname()[1]))
    results = mp.get_context("spawn").Manager().dict()
    mp.spawn(worker, args=(a, results), nprocs=a.nproc)
    print(json.dumps(results[0]))


def worker(rank, a, results):
    dist.init_process_group("gloo", rank=rank, world_size=a.nproc)
    results[rank] = run(rank, a)
    dist.destroy_process_group()


def run(rank, a):
    torch.set_num_threads(max(1, a.threads // a.nproc))
    torch.manual_seed(0)

    # torchvision reads raw/<name> without the .gz suffix: decompress into a scratch folder once.
    scratch = tempfile.mkdtemp(prefix="fmnist-ref-")
    raw = os.path.join(scratch, "FashionMNIST", "raw")
    os.makedirs(raw)
    for name in os.listdir(a.root):
        src = os.path.join(a.root, name)
        with (gzip.open(src) if name.endswith(".gz") else open(src, "rb")) as f, \
                open(os.path.join(raw, name[:-3] if name.endswith(".gz") else name), "wb") as g:
            shutil.copyfileobj(f, g)
    tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.2860,), (0.3530,))])
    train = datasets.FashionMNIST(scratch, train=True, download=False, transform=tf)
    test = datasets.FashionMNIST(scratch, train=False, download=False, transform=tf)
    if a.limit_train:
        train = torch.utils.data.Subset(train, [i * len(train) // a.limit_train for i in range(a.limit_train)])
    sampler = torch.utils.data.DistributedSampler(train, a.nproc, rank) if a.nproc > 1 else None
    train_loader = torch.utils.data.DataLoader(train, batch_size=a.batch_size // a.nproc, shuffle=sampler is None,
                                               sampler=sampler, num_workers=max(1, a.workers // a.nproc))
    test_loader = torch.utils.data.DataLoader(test, batch_size=a.eval_batch_size, num_workers=a.workers)

    model = Net(0.25)
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    net = torch.nn.parallel.DistributedDataParallel(model) if a.nproc > 1 else model
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
    steps_per_epoch = len(train_loader)
    total = steps_per_epoch * a.epochs
    warmup = round(0.5 * steps_per_epoch)  # schedule.warmup_epochs 0.5, start factor 0.1, then cosine to 0

    def factor(step):
        if step < warmup:
            return 0.1 + 0.9 * step / warmup
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total - warmup))))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    speeds = []
    for epoch in range(a.epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)
        model.train()
        start, images = time.perf_counter(), 0
        for x, y in train_loader:
            x = x.contiguous(memory_format=fmt)
            opt.zero_grad()
            loss = F.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            sched.step()
            images += y.numel() * a.nproc
        speeds.append(images / (time.perf_counter() - start))
    model.eval()
    correct, count = 0, 0
    with torch.no_grad():
        for x, y in test_loader:
            correct += (model(x.contiguous(memory_format=fmt)).argmax(1) == y).sum().item()
            count += y.numel()
    shutil.rmtree(scratch)
    return {"images_per_s": speeds[-1], "top1": correct / count}


if __name__ == "__main__":
    main()
