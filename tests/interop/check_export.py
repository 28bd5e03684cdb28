"""Opens files written by `trainer export` with Python's own libraries, as a deployer would, and prints one JSON
line for tests/e2e/export_cli_test.cpp:
  - ONNX: onnx.checker.check_model(full_check=True), the input's dimensions, the opset and the metadata keys;
    where ONNX Runtime is installed (Debian 13's python3-onnxruntime: the torch2 lane), its logits on the input;
  - TorchScript: torch.jit.load with its metadata.json extra file, and its logits on the given input;
  - torchvision: the TorchScript state_dict() loaded strictly into torchvision.models.ARCH, and its logits.
Usage: check_export.py --input X.f32 --shape N,C,H,W --expected LOGITS.f32 --classes K
                       [--onnx F.onnx ...] [--torchscript F.pt] [--torchvision ARCH]
"""
import argparse
import json

import numpy as np
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--input", required=True)
parser.add_argument("--shape", required=True)
parser.add_argument("--expected", required=True)
parser.add_argument("--classes", type=int, required=True)
parser.add_argument("--onnx", action="append", default=[])
parser.add_argument("--torchscript")
parser.add_argument("--torchvision")
args = parser.parse_args()

shape = [int(v) for v in args.shape.split(",")]
x = torch.from_numpy(np.fromfile(args.input, dtype=np.float32).reshape(shape))
expected = torch.from_numpy(np.fromfile(args.expected, dtype=np.float32).reshape(shape[0], args.classes))
out = {"onnx": []}
try:
    import onnxruntime
    out["onnxruntime"] = onnxruntime.__version__
except ImportError:
    onnxruntime = None
    out["onnxruntime"] = None

for path in args.onnx:
    import onnx

    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    dims = [d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    entry = {"file": path, "checker": "ok", "input_dims": dims,
             "opset": [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")][0],
             "metadata_keys": sorted(p.key for p in model.metadata_props)}
    if onnxruntime:
        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        (logits,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
        entry["onnxruntime_max_diff"] = float(np.abs(logits - expected.numpy()).max())
    out["onnx"].append(entry)

if args.torchscript:
    extra = {"metadata.json": ""}
    module = torch.jit.load(args.torchscript, _extra_files=extra)
    with torch.no_grad():
        logits = module(x)
    out["torchscript_max_diff"] = (logits - expected).abs().max().item()
    out["torchscript_metadata"] = json.loads(extra["metadata.json"])
    if args.torchvision:
        import torchvision
        from uninitialised import weights_not_drawn

        with weights_not_drawn():  # every tensor is loaded strictly below
            net = getattr(torchvision.models, args.torchvision)(num_classes=args.classes)
        net.load_state_dict(module.state_dict(), strict=True)
        net.eval()
        with torch.no_grad():
            out["torchvision_max_diff"] = (net(x) - expected).abs().max().item()

print(json.dumps(out))
