#!/usr/bin/env python3
"""Independent reader of TensorBoard event files, for the tests: TFRecord framing with every CRC checked,
and a generic protocol-buffer decoder for Event / Summary / Summary.Value / SessionLog.

  read_tensorboard.py FILE...   prints JSON: [{"file": F, "events": [{"wall_time", "step", "file_version" |
                                "values": {tag: float}}]}]; exits 1 on a bad CRC or a malformed message.
"""
import json
import struct
import sys


def crc32c(data):
    # Bit at a time, on purpose: a different implementation from the table-driven one under test.
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(blob, name):
    at = 0
    while at < len(blob):
        if len(blob) - at < 12:
            raise ValueError(f"{name}: {len(blob) - at} stray bytes at {at}")
        header = blob[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", blob[at + 8:at + 12])
        if masked(header) != length_crc:
            raise ValueError(f"{name}: length CRC mismatch at {at}")
        payload = blob[at + 12:at + 12 + length]
        (data_crc,) = struct.unpack("<I", blob[at + 12 + length:at + 16 + length])
        if len(payload) != length or masked(payload) != data_crc:
            raise ValueError(f"{name}: data CRC mismatch at {at}")
        yield payload
        at += 16 + length


def fields(buf):
    """(field number, wire type, value) for each field of a message."""
    at = 0

    def varint():
        nonlocal at
        shift = value = 0
        while True:
            b = buf[at]
            at += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value

    while at < len(buf):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            yield number, wire, varint()
        elif wire == 1:
            yield number, wire, buf[at:at + 8]
            at += 8
        elif wire == 2:
            n = varint()
            yield number, wire, buf[at:at + n]
            at += n
        elif wire == 5:
            yield number, wire, buf[at:at + 4]
            at += 4
        else:
            raise ValueError(f"wire type {wire}")
    if at != len(buf):
        raise ValueError("message overruns its bytes")


def event(payload):
    out = {"step": 0}
    for number, wire, value in fields(payload):
        if number == 1 and wire == 1:
            out["wall_time"] = struct.unpack("<d", value)[0]
        elif number == 2 and wire == 0:
            out["step"] = value if value < 1 << 63 else value - (1 << 64)
        elif number == 3 and wire == 2:
            out["file_version"] = value.decode()
        elif number == 5 and wire == 2:
            values = out.setdefault("values", {})
            for vn, vw, v in fields(value):
                if vn != 1 or vw != 2:
                    raise ValueError(f"Summary field {vn}")
                tag, simple = None, None
                for n, w, x in fields(v):
                    if n == 1 and w == 2:
                        tag = x.decode()
                    elif n == 2 and w == 5:
                        simple = struct.unpack("<f", x)[0]
                if tag is None or simple is None:
                    raise ValueError("Summary.Value without tag or simple_value")
                values[tag] = simple
        else:
            raise ValueError(f"unexpected Event field {number} (wire {wire})")
    return out


def main(paths):
    result = []
    try:
        for path in paths:
            with open(path, "rb") as f:
                blob = f.read()
            result.append({"file": path, "events": [event(p) for p in records(blob, path)]})
    except (ValueError, IndexError, struct.error, UnicodeDecodeError) as e:
        print(f"read_tensorboard: {e}", file=sys.stderr)
        return 1
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
