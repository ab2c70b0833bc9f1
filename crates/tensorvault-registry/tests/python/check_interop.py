"""Python side of the interop check: our checkpoints load in Python's `safetensors` (numpy).

Usage:
    tensorvault registry init /tmp/reg --tiny            # or without --tiny (~312 MB)
    tensorvault registry inspect /tmp/reg/versions/0.0.0-init --json > /tmp/rust.json
    python check_interop.py /tmp/reg/versions/0.0.0-init /tmp/rust.json

Checks for every tensor: same names, dtype float32, same shape, min/max identical and mean
within 1e-9 relative to the statistics tensorvault computed; the file's sha256 equals the
`checksum` in metadata.json. Needs `pip install numpy safetensors`.
"""

import hashlib
import json
import sys

import numpy as np
from safetensors.numpy import load_file


def main(ckpt: str, rust_json: str) -> None:
    meta = json.load(open(f"{ckpt}/metadata.json"))
    raw = open(f"{ckpt}/weights.safetensors", "rb").read()
    assert meta["checksum"] == "sha256:" + hashlib.sha256(raw).hexdigest(), "checksum"
    tensors = load_file(f"{ckpt}/weights.safetensors")
    rust = {t["name"]: t for t in json.load(open(rust_json))}
    assert set(tensors) == set(rust), (sorted(tensors), sorted(rust))
    for name, arr in tensors.items():
        r = rust[name]
        assert arr.dtype == np.float32, (name, arr.dtype)
        assert list(arr.shape) == r["shape"], (name, arr.shape, r["shape"])
        a = arr.astype(np.float64)
        s = r["stats"]
        assert a.min() == s["min"] and a.max() == s["max"], name
        assert abs(a.mean() - s["mean"]) <= 1e-9 * max(1.0, abs(s["mean"])), name
    print(f"OK: {len(tensors)} tensors, {len(raw)} bytes, {meta['checksum'][:23]}...")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
