"""Round trips through the real product path: `tensorvault.Store` from Python.

Every quantized figure of the harness comes from `put_tensor(name, array, tier=...)`
followed by `get_tensor(name)` on a store in a scratch directory. When the binding takes
`kind=` (codec v2, issue 14) the tensor's kind is passed; before that the call has no
such argument and every tensor goes through the v1 (generic) codec. `kinds_supported()`
finds out with a real put.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Dict, Iterable, Optional, Tuple

import numpy as np

import tensorvault as tv

_KIND_OK: Optional[bool] = None
#: Extra `tensorvault.Store` options of every scratch store (e.g. `{"codec": 3}`).
STORE_OPTS: Dict = {}


#: Tier-file bytes the last `roundtrip` store allocated (every tier, `stats()["usage"]`).
LAST_ALLOCATED = {"bytes": 0}


def codec_opts(spec: str) -> Dict:
    """Store options of a codec spec: "2".."4", plus "e" for codec 4 with entropy-coded
    weight/embedding levels (`entropy=True, ecsq=True`, session 12) and "x" for extent
    allocation (disk that follows the payload), "g" for per-row gains on embeddings
    (`row_gains=True`, session 13), "m" for model-coded ECSQ with "e" (`ecsq_model=True`,
    session 14), "c" (with "g") for centred embeddings (`centre=True`, session 14), e.g.
    "4ex", "4exg", "4egm", "4egmc"."""
    opts: Dict = {"codec": int(spec[0])}
    if "g" in spec[1:]:
        opts["row_gains"] = True
    if "c" in spec[1:]:
        opts["centre"] = True
    if "e" in spec[1:]:
        opts.update(entropy=True, ecsq=True)
    if "x" in spec[1:]:
        opts["allocation"] = "extent"
    if "m" in spec[1:]:
        opts["ecsq_model"] = True
    return opts


def set_store_opts(**opts) -> None:
    """Create every scratch store with these extra options (replacing earlier ones)."""
    STORE_OPTS.clear()
    STORE_OPTS.update(opts)


def disable_kinds() -> None:
    """Never pass `kind=` (measure the generic codec even where kinds exist)."""
    global _KIND_OK
    _KIND_OK = False


def kinds_supported() -> bool:
    """Whether `Store.put_tensor` accepts `kind=` (tried once, on a scratch store)."""
    global _KIND_OK
    if _KIND_OK is None:
        d = tempfile.mkdtemp(prefix="tvq-probe-")
        try:
            with tv.Store(d, "q", "probe", durability="os") as s:
                try:
                    s.put_tensor("x", np.ones((4, 64), np.float16), tier=1, kind="kv_key")
                    _KIND_OK = True
                except TypeError:
                    _KIND_OK = False
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return _KIND_OK


def kv_layout(arrays) -> Dict:
    """Store options for `arrays`: the KV-cache layout (`kv_head_dim`, codec v2) when every
    array is a KV tensor of one head dimension and the binding takes it, as a user storing
    a KV cache would create the collection; else the default layout."""
    kinds = {kind for _, _, kind in arrays}
    dims = {a.shape[-1] for _, a, _ in arrays}
    if not kinds or not kinds <= {"kv_key", "kv_value"} or len(dims) != 1 or not kinds_supported():
        return {}
    head_dim = int(next(iter(dims)))
    d = tempfile.mkdtemp(prefix="tvq-probe-")
    try:
        with tv.Store(d, "q", "probe", durability="os", kv_head_dim=head_dim):
            pass
    except TypeError:
        return {}
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return {"kv_head_dim": head_dim}


class Scratch:
    """A store in a fresh temporary directory, deleted on close."""

    def __init__(self, collection: str = "c", **opts) -> None:
        self.dir = tempfile.mkdtemp(prefix="tvq-")
        self.store = tv.Store(self.dir, "q", collection, durability="os", **{**STORE_OPTS, **opts})

    def put(self, name: str, a: np.ndarray, tier: int, kind: Optional[str]) -> Dict:
        if kind is not None and kinds_supported():
            return self.store.put_tensor(name, a, tier=tier, kind=kind)
        return self.store.put_tensor(name, a, tier=tier)

    def get(self, name: str) -> np.ndarray:
        return np.array(self.store.get_tensor(name))

    def close(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "Scratch":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def roundtrip(
    arrays: Iterable[Tuple[str, np.ndarray, Optional[str]]], tier: int, demote_from: Optional[int] = None
) -> Tuple[Dict[str, np.ndarray], int, int]:
    """Put every `(name, array, kind)` at `tier` and read it back.

    With `demote_from`, each tensor is put at that (warmer) tier first and then moved to
    `tier` with `migrate_tensor`, one tier at a time (the store's demotion path), so the
    result carries the compounded error.

    Returns `(decoded arrays by name, stored payload bytes, values)`.
    """
    arrays = list(arrays)
    out: Dict[str, np.ndarray] = {}
    stored = values = 0
    with Scratch(**kv_layout(arrays)) as s:
        for name, a, kind in arrays:
            if demote_from is None:
                s.put(name, a, tier, kind)
            else:
                s.put(name, a, demote_from, kind)
                for t in range(demote_from + 1, tier + 1):
                    s.store.migrate_tensor(name, t)
            out[name] = s.get(name)
            values += a.size
        for info in s.store.tensors():
            stored += int(info["stored_bytes"])
        usage = s.store.stats().get("usage")
        if usage:
            LAST_ALLOCATED["bytes"] = sum(int(u.get("allocated_bytes", 0)) for u in usage)
    return out, stored, values
