"""The crafted files of the hostile-file suite (tests/e2e/hostile_files_test.cpp), each a few bytes edited into a
file the trainer wrote, as a stranger's file would carry them: zip CRCs recomputed by Python's zipfile, so that
every check behind the CRC check is reached.

    hostile_files.py GOOD_CHECKPOINT OUT_DIR [GOOD_ONNX]

Writes into OUT_DIR the files named below; the test runs the real command on each. With GOOD_ONNX (an export of
the checkpoint) and Python's onnx, also two edited ONNX files.
"""
import json
import re
import struct
import sys
import zipfile
from pathlib import Path

import torch


def records(path):
    with zipfile.ZipFile(path) as z:
        return [(info.filename, z.read(info.filename)) for info in z.infolist()]


def write_zip(path, items):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, data in items:
            z.writestr(name, data)


def widen_first_stride(pickle):
    """The first tensor's first stride made 255, as tests/support/archive_edits.hpp's with_first_stride_widened."""
    at = pickle.index(b"_rebuild_tensor_v2\n")
    at = pickle.index(b"tQ", at) + 2
    if pickle[at:at + 1] == b"q":
        at += 2
    assert pickle[at:at + 3] == b"K\x00("
    at = pickle.index(b"t", at + 3)
    assert pickle[at + 1:at + 3] == b"(K"
    return pickle[:at + 3] + b"\xff" + pickle[at + 4:]


def with_meta_edit(pickle, edit):
    """The checkpoint's metadata (one BINUNICODE string of JSON in data.pkl) passed through `edit`."""
    at = pickle.index(b'X', pickle.index(b"meta"))
    while pickle[at + 5:at + 6] != b"{":
        at = pickle.index(b'X', at + 1)
    length = struct.unpack("<I", pickle[at + 1:at + 5])[0]
    text = edit(pickle[at + 5:at + 5 + length].decode())
    data = text.encode()
    return pickle[:at + 1] + struct.pack("<I", len(data)) + data + pickle[at + 5 + length:]


def main():
    good, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    items = records(good)
    archive = items[0][0].split("/")[0]
    pkl = archive + "/data.pkl"
    data_pkl = dict(items)[pkl]

    def replaced(name, data):
        return [(n, data if n == name else d) for n, d in items]

    # 1. data.pkl renamed data.PKL (LibTorch's reader finds it all the same) with a tensor reaching past its storage.
    write_zip(out / "upper_pkl.pt", [(archive + "/data.PKL" if n == pkl else n, widen_first_stride(d) if n == pkl else d)
                                     for n, d in items])
    # 2. A second record whose name folds to data.pkl's: which one the reader takes is up to its sorted directory.
    write_zip(out / "twice.pt", items + [(archive + "/Data.pkl", data_pkl)])
    # 3. Code in a record named .PY, which LibTorch compiles (and runs: __setstate__) as it loads.
    evil = b"class Module(Module):\n  def __setstate__(self, state: Tuple[int]) -> None:\n    torch.from_file('x', True, 8)\n"
    write_zip(out / "code_upper.pt", items + [(archive + "/code/__torch__/evil.PY", evil)])
    # 4. 200,000 nested lists (600 KB): LibTorch frees them recursively, past the end of its stack.
    depth = 200000
    write_zip(out / "deep.pt", replaced(pkl, b"\x80\x02" + b"]" * depth + b"a" * (depth - 1) + b"."))
    # 5. A list that holds itself (EMPTY_LIST, BINPUT 0, BINGET 0, APPEND): a cycle reference counting never frees.
    write_zip(out / "cycle.pt", replaced(pkl, b"\x80\x02]q\x00h\x00a."))
    # 6. One of LibTorch's custom C++ classes, which run a __setstate__ of their own.
    write_zip(out / "custom_class.pt",
              replaced(pkl, b"\x80\x02c__torch__.torch.classes.quantized\nConv2dPackedParamsBase\n)\x81."))
    # 7. The saved config asking for 100,000 threads.
    write_zip(out / "threads.pt",
              replaced(pkl, with_meta_edit(data_pkl, lambda t: re.sub(r'"threads":\d+', '"threads":100000', t))))
    # 8. The saved config naming a run folder outside output_dir.
    write_zip(out / "run_name.pt",
              replaced(pkl, with_meta_edit(data_pkl, lambda t: re.sub(r'("run":\{[^{}]*?"name":")[^"]*"',
                                                                      r'\1../../escape"', t, 1))))
    # 9. data.pkl's directory entry declaring 4 GiB - 2 (LibTorch's reader allocates the declared size first).
    write_zip(out / "huge_record.pt", items)
    raw = bytearray((out / "huge_record.pt").read_bytes())
    entry = raw.index(b"PK\x01\x02")
    while raw[entry + 46:entry + 46 + len(pkl)] != pkl.encode():
        entry = raw.index(b"PK\x01\x02", entry + 4)
    raw[entry + 24:entry + 28] = struct.pack("<I", 0xFFFFFFFE)
    (out / "huge_record.pt").write_bytes(bytes(raw))
    # 10. A state dict whose 1 KB view of one float is 50000 x 50000 (10 GB made contiguous).
    torch.save({"fc.weight": torch.zeros(1).expand(50000, 50000)}, out / "broadcast.pth")
    # 11. A safetensors header of 500,000 nested lists (1 MB).
    header = b'{"a": ' + b"[" * 500000 + b"]" * 500000 + b"}"
    (out / "deep.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    # 12. A config whose value at a typed key nests 500,000 deep.
    (out / "deep_config.json").write_text('{"run": {"seed": ' + "[" * 500000 + "]" * 500000 + "}}")
    if len(sys.argv) > 3:
        onnx_files(Path(sys.argv[3]), out)


def onnx_files(good, out):
    import onnx
    # 13. An initializer storing fewer bytes than its shape needs: OpenCV 4.6's importer reads past its buffer.
    model = onnx.load(str(good))
    weight = max(model.graph.initializer, key=lambda t: len(t.raw_data))
    weight.raw_data = weight.raw_data[:16]
    (out / "short_raw.onnx").write_bytes(model.SerializeToString())
    # 14. The metadata naming 5 classes for a graph that scores 10: predict would look names up past its list.
    model = onnx.load(str(good))
    for p in model.metadata_props:
        if p.key == "num_classes":
            p.value = "5"
        if p.key == "class_names":
            p.value = json.dumps(["a", "b", "c", "d", "e"])
    (out / "more_scores.onnx").write_bytes(model.SerializeToString())


if __name__ == "__main__":
    main()
