#!/usr/bin/python3
"""Writes the fuzz targets' seed inputs into tests/fuzz/corpus/<target>/ (kilobytes each; committed).

Run again only to change the seeds: the fuzz lane adds what it finds to its own working corpus, and inputs that once
crashed a reader are committed by hand next to these (named crash-*, timeout-*, oom-*).
Needs python3 with torch and PIL (Debian: python3-torch, python3-pil).
  scripts/fuzz/make_corpus.py [tests/fuzz/corpus]
"""
import gzip
import io
import json
import os
import struct
import sys
import tarfile
import zipfile
from collections import OrderedDict

import numpy as np
import torch
from PIL import Image

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fuzz", "corpus")


def put(target, name, data):
    folder = os.path.join(root, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def saved(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


torch.manual_seed(0)
small = OrderedDict(w=torch.randn(2, 3), b=torch.zeros(3), n=torch.tensor(7, dtype=torch.long))
tied = OrderedDict(a=torch.ones(4), half=torch.randn(2, 2).half())
tied["view"] = tied["a"][1:3]  # two tensors on one storage, one with an offset
module = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
files = {"small": saved(small), "tied": saved(tied), "module": saved(module.state_dict()),
         "parameter": saved({"p": torch.nn.Parameter(torch.ones(2, 2))})}
for name, data in files.items():
    put("pth", name + ".pth", data)
    put("zip_records", name + ".zip", data)
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        pickle = next(n for n in z.namelist() if n.endswith("data.pkl"))
        put("pickle", name + ".pkl", z.read(pickle))
deflated = io.BytesIO()
with zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
    z.comment = b"a comment"
put("zip_records", "deflated.zip", deflated.getvalue())


def safetensors(tensors, metadata=None):
    header, blobs, at = {}, b"", 0
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(data)]}
        blobs += data
        at += len(data)
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + blobs


put("safetensors", "two.safetensors", safetensors({"w": ("F32", [2, 2], np.arange(4, dtype="<f4").tobytes()),
                                                    "i": ("I64", [1], struct.pack("<q", 3))}, {"format": "pt"}))
put("safetensors", "half.safetensors", safetensors({"h": ("F16", [3], np.ones(3, dtype="<f2").tobytes()),
                                                     "e": ("BF16", [0], b"")}))

scripted = torch.jit.script(torch.nn.Linear(2, 2))
buf = io.BytesIO()
torch.jit.save(scripted, buf)
put("checkpoint", "scripted_linear.pt", buf.getvalue())
put("checkpoint", "state_dict.pt", files["small"])

here = os.path.join(os.path.dirname(__file__), "..", "..", "configs")
for name, sets in [("mnist_cnn.json", ["optim.lr=0.02", "train.epochs=2"]),
                   ("resnet50_imagenet.json", ["data.root=/x", "model.freeze=[\"layer1.*\"]"])]:
    with open(os.path.join(here, name), "rb") as f:
        put("config", name, f.read() + b"\0" + "\n".join(sets).encode())
put("config", "extends.json", b'{"extends": "config.json", "run": {"seed": 3}}\0run.name=x')


def idx(magic, dims, payload):
    return struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + payload


images = idx(2051, [2, 3, 3], bytes(range(18)))
labels = idx(2049, [2], bytes([0, 1]))
put("idx", "plain", struct.pack("<H", len(images)) + images + labels)
gz_images, gz_labels = gzip.compress(images, mtime=0), gzip.compress(labels, mtime=0)
put("idx", "gzip", struct.pack("<H", len(gz_images)) + gz_images + gz_labels)


def encoded(image, fmt, **options):
    buf = io.BytesIO()
    image.save(buf, fmt, **options)
    return buf.getvalue()


rng = np.random.default_rng(0)
rgb = Image.fromarray(rng.integers(0, 256, (12, 17, 3), dtype=np.uint8), "RGB")
grey = rgb.convert("L")
jpegs = {"baseline420": encoded(rgb, "JPEG", quality=90),
         "baseline444": encoded(rgb, "JPEG", quality=90, subsampling=0),
         "baseline422": encoded(rgb, "JPEG", quality=90, subsampling=1),
         "progressive": encoded(rgb, "JPEG", quality=80, progressive=True),
         "grey": encoded(grey, "JPEG", quality=90),
         "cmyk": encoded(rgb.convert("CMYK"), "JPEG", quality=90)}
others = {"rgb.png": encoded(rgb, "PNG"), "grey.png": encoded(grey, "PNG"),
          "rgba.png": encoded(rgb.convert("RGBA"), "PNG"), "palette.png": encoded(rgb.convert("P"), "PNG"),
          "image.bmp": encoded(rgb, "BMP"), "lossy.webp": encoded(rgb, "WEBP", quality=80),
          "lossless.webp": encoded(rgb, "WEBP", lossless=True), "image.ppm": encoded(rgb, "PPM"),
          "grey.pgm": encoded(grey, "PPM"), "bits.pbm": encoded(grey.convert("1"), "PPM"),
          "image.tiff": encoded(rgb, "TIFF"), "deflate.tiff": encoded(rgb, "TIFF", compression="tiff_adobe_deflate"),
          # Formats imdecode would pick by content that are refused before it sees them:
          "radiance.hdr": b"#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 2 +X 2\n" + bytes(16),
          "float.pfm": b"PF\n2 2\n-1.0\n" + bytes(48),
          "arbitrary.pam": b"P7\nWIDTH 2\nHEIGHT 2\nDEPTH 3\nMAXVAL 255\nTUPLTYPE RGB\nENDHDR\n" + bytes(12)}
for name, data in jpegs.items():
    put("image_probe", name + ".jpg", data)
    put("image_decode", name + ".jpg", data)
    put("jpeg_region", name, struct.pack("<HHHHB", 2, 1, 9, 8, 0) + data)
    put("jpeg_region", name + "-grey-reduced", struct.pack("<HHHHB", 0, 0, 9, 6, 4 | 1) + data)
for name, data in others.items():
    put("image_probe", name, data)
    put("image_decode", name, data)

put("labels", "plain", b"a.JPEG 0\nb.JPEG 1\r\n\nc d.JPEG 2\n\0n01440764 tench, Tinca tinca\nn01443537 goldfish\n")
put("labels", "crlf", b"b.JPEG 2\r\na.JPEG 0\r\n\0n01443537 goldfish, Carassius auratus\r\n")

# Addresses and names on their way to the hub cache (weights_hub.hpp).
put("download", "published", b"https://weights.example/models/resnet50-11ad3fa6.pth")
put("download", "query", b"http://127.0.0.1:8000/m/r-1a2b.pth?x=1#y")
put("download", "file", b"file:///tmp/w-deadbeef.safetensors")
put("download", "name", b"resnet50-11ad3fa6.pth")
# The events, metrics and model seeds are a tiny run's own files (tb/events.out.tfevents.*, metrics.jsonl + NUL +
# metrics.csv) and a 34 KB ONNX graph with an export's metadata: committed as they were written, not made here.

put("glob", "freeze", b"layer4.*.bn?.*\nfc.*\0layer4.0.bn1.weight")
put("glob", "sets", b"[!a-z]x[a-c]\\*\0" + b"1xb*")

# A remote shard's listing in the cache (shard_listing.hpp): a tar of its index, the kept members' table and bytes.
def ustar(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 0
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


listing_index = b"v1.2 2\njpg 512 100 a.jpg cls 1024 1 a.cls\njpg 1536 10 b/c.jpg cls 2048 2 b/c.cls\n"
put("shard_listing", "two_samples_kept",
    ustar([("index", listing_index), ("kept.txt", b"1024 1\n2048 2\n"), ("kept.bin", b"312")]))
put("shard_listing", "nothing_kept", ustar([("index", listing_index), ("kept.txt", b""), ("kept.bin", b"")]))
put("shard_listing", "stray_kept", ustar([("index", listing_index), ("kept.txt", b"7 1\n"), ("kept.bin", b"3")]))

# An answer's header lines as libcurl hands them over (http_range.hpp): a range's, a redirect's then a whole file's.
put("http_headers", "range_answer",
    b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-0/48128\r\nETag: \"5f3a-bc00\"\r\n"
    b"Last-Modified: Mon, 07 Dec 2026 10:00:00 GMT\r\nContent-Length: 1\r\n\r\n")
put("http_headers", "redirect_then_whole",
    b"HTTP/1.1 302 Found\r\nLocation: /x\r\nETag: \"old\"\r\n\r\nHTTP/2 200\r\ncontent-length: 48128\r\n"
    b"etag: W/\"weak\"\r\nlast-modified: Mon, 07 Dec 2026 10:00:00 GMT\r\n\r\n")
put("http_headers", "odd_numbers",
    b"HTTP/1.1 206\r\nContent-Range: bytes 0-0/*\r\nContent-Length: 99999999999999999999999\r\nETag:\r\n:\r\n")
