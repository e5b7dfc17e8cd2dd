#!/usr/bin/env python3
"""Quantizes all-MiniLM-L6-v2's model.safetensors (f32) into the bundled 4-bit format.

The format is pocket-encoder's `q4-symmetric-g32-f16-v1`, which edgar's loader reads
(host/src/tools/search/model/weights.rs): every tensor of two or more dimensions is
stored as `NAME.q4` (U8, two values a byte, low nibble first, nibble = q + 8, q in
[-8, 7]) and `NAME.scales` (F16, one per group of 32 values); a value is read back as
q * scale. Vectors stay F32. The pooler and `position_ids` are dropped (mean pooling
uses neither).

Each group's scale is the one among max|x| / l, for l from 6.0 to 9.0 in steps of 0.1
(8.0 to 8.9 are tried twice, which changes nothing), whose rounding leaves the least
squared error, with the scale as stored (f16); q = -8 is used only when the largest
value is negative. Plain max|x| / 7 left the
encoder's vectors at 0.90 cosine of the f32 model's; this search brings them to the
value the unit test checks.

Deterministic: the same input gives the same bytes. Needs numpy.

    python3 quantize.py IN/model.safetensors OUT/model.safetensors
"""

import json
import struct
import sys

import numpy as np

GROUP = 32


def quantize(values):
    """(packed nibbles, f16 scales) of a flat float32 array of whole groups."""
    g = values.astype(np.float64).reshape(-1, GROUP)
    top = np.abs(g).max(axis=1)
    extreme = g[np.arange(len(g)), np.abs(g).argmax(axis=1)]
    best_q = np.zeros(g.shape, dtype=np.int64)
    best_s = np.ones(len(g), dtype=np.float16)
    best_err = np.full(len(g), np.inf)
    steps = [7.0 + 0.1 * i for i in range(-10, 21)] + [8.0 + 0.1 * i for i in range(0, 10)]
    for levels in steps:
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = (top / levels).astype(np.float16)
        scale[(scale == 0) | ~np.isfinite(scale)] = 1.0
        s = scale.astype(np.float64)[:, None]
        q = np.clip(np.rint(g / s), -8, 7)
        # Only a negative extreme may use -8; elsewhere the range stays [-7, 7].
        q = np.where((q == -8) & (extreme[:, None] >= 0), -7, q)
        err = ((q * s - g) ** 2).sum(axis=1)
        better = err < best_err
        best_err[better] = err[better]
        best_q[better] = q[better]
        best_s[better] = scale[better]
    nibbles = (best_q + 8).astype(np.uint8).reshape(-1)
    packed = nibbles[0::2] | (nibbles[1::2] << 4)
    return packed.tobytes(), best_s.astype("<f2").tobytes()


def main(src, dst):
    data = open(src, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    out = []  # (name, dtype, shape, bytes)
    for name in sorted(k for k in header if k != "__metadata__"):
        t = header[name]
        if name.startswith("pooler.") or name.endswith("position_ids"):
            continue
        assert t["dtype"] == "F32", name
        start, end = t["data_offsets"]
        raw = body[start:end]
        if len(t["shape"]) == 1:
            out.append((name, "F32", t["shape"], raw))
            continue
        q, s = quantize(np.frombuffer(raw, dtype="<f4"))
        out.append((name + ".q4", "U8", [len(q)], q))
        out.append((name + ".scales", "F16", [len(s) // 2], s))
    new_header, offset = {}, 0
    for name, dtype, shape, raw in out:
        new_header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(new_header, separators=(",", ":"), sort_keys=True).encode()
    # Pad the header so the data (and every F32 tensor, all at offsets that are
    # multiples of 4) starts 8-byte aligned.
    text += b" " * (-(8 + len(text)) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, _, raw in out:
            f.write(raw)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
