"""llama.cpp saved states (``llama_state_get_data``) as per-layer KV, and back.

This module needs neither llama_cpp nor a model: it parses the bytes llama.cpp's
``llama_context::state_write_data`` writes (the layout of llama-cpp-python 0.3.36's
vendored llama.cpp; spec: docs/formats/llama_state.md) into per-layer f16 keys and
values ``[kv_heads, T, head_dim]`` and rebuilds a state from them.
:class:`LlamaKVStore` keeps states in a :class:`tensorvault.PrefixCache` (chunks found by
their tokens, quantized by age, checksummed, shared by processes); a state it cannot
parse exactly (another llama.cpp version, several sequences, a quantized KV type) is
kept as a raw blob instead, so a hit is never wrong data.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import zlib
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ._common import PathLike, fspath
from ._errors import InvalidArgumentError, InvalidFormatError
from ._prefix import PrefixCache, _tokens

#: ggml type id of f16 (``GGML_TYPE_F16``).
GGML_TYPE_F16 = 1
#: Longest architecture name accepted in a state.
MAX_ARCH_LEN = 256
#: Magic of a raw state file.
RAW_MAGIC = b"TVLLRAW1"
#: Bytes before a raw file's token ids: magic, u32 n_tokens, u32 reserved, u64 state_len.
RAW_HEADER = 24
#: Version of the layout file.
LAYOUT_VERSION = 1


class StateFormatError(InvalidFormatError):
    """A llama.cpp state this parser does not read exactly (names the field and offset)."""

    def __init__(self, field: str, offset: int, reason: str) -> None:
        super().__init__(f"llama.cpp state: {field} at byte {offset}: {reason}")
        self.field = field
        self.offset = offset


@dataclass
class StateLayout:
    """What a rebuilt state needs besides the KV: the context's choices."""

    arch: str
    v_trans: bool
    n_layer: int
    n_embd_k: int
    n_embd_v: int

    def to_json(self) -> Dict[str, Any]:
        return {
            "version": LAYOUT_VERSION,
            "arch": self.arch,
            "v_trans": self.v_trans,
            "n_layer": self.n_layer,
            "n_embd_k": self.n_embd_k,
            "n_embd_v": self.n_embd_v,
        }


@dataclass
class ParsedState:
    """A state's layout and its KV: per layer ``[kv_heads, n_tokens, head_dim]`` f16."""

    layout: StateLayout
    n_tokens: int
    keys: List[np.ndarray]
    values: List[np.ndarray]


class _Reader:
    def __init__(self, b: bytes) -> None:
        self.b = memoryview(b)
        self.off = 0

    def take(self, n: int, field: str) -> memoryview:
        if n < 0 or self.off + n > len(self.b):
            raise StateFormatError(
                field, self.off, f"needs {n} bytes, {len(self.b) - self.off} left"
            )
        out = self.b[self.off : self.off + n]
        self.off += n
        return out

    def u32(self, field: str) -> int:
        return struct.unpack("<I", self.take(4, field))[0]

    def i32(self, field: str) -> int:
        return struct.unpack("<i", self.take(4, field))[0]

    def u64(self, field: str) -> int:
        return struct.unpack("<Q", self.take(8, field))[0]

    def expect(self, field: str, got: int, want: int, at: int) -> None:
        if got != want:
            raise StateFormatError(field, at, f"{got}, expected {want}")


def parse_state(blob: bytes, n_layer: int, kv_heads: int, head_dim: int) -> ParsedState:
    """Parse a whole-context state of one sequence with f16 K and V.

    Raises :class:`StateFormatError` (field and offset) for anything else: several
    streams or sequences, cells out of position order, another KV type or row size, a
    layer count other than ``n_layer``, trailing or missing bytes. Every length is
    checked against the bytes present before it is used.
    """
    r = _Reader(blob)
    at = r.off
    arch_len = r.u32("arch_len")
    if arch_len == 0 or arch_len > MAX_ARCH_LEN:
        raise StateFormatError("arch_len", at, f"{arch_len}, expected 1..{MAX_ARCH_LEN}")
    try:
        arch = bytes(r.take(arch_len, "arch")).decode("utf-8")
    except UnicodeDecodeError as e:
        raise StateFormatError("arch", at + 4, "not UTF-8") from e
    at = r.off
    r.expect("n_stream", r.u32("n_stream"), 1, at)
    at = r.off
    cells = r.u32("cell_count")
    if cells == 0:
        raise StateFormatError("cell_count", at, "an empty cache")
    # Cell metadata: i32 pos, u32 n_seq_id, i32 seq_id[n_seq_id] (no cell extension).
    meta = r.take(12 * cells, "cells")
    m = np.frombuffer(meta, dtype="<i4").reshape(cells, 3)
    bad = np.flatnonzero(
        (m[:, 0] != np.arange(cells)) | (m[:, 1] != 1) | (m[:, 2] != 0)
    )
    if bad.size:
        i = int(bad[0])
        raise StateFormatError(
            "cells",
            at + 4 + 12 * i,
            f"cell {i} is (pos {m[i, 0]}, {m[i, 1]} sequences, seq {m[i, 2]}); "
            "expected one sequence 0 at positions 0, 1, ...",
        )
    at = r.off
    v_trans = r.u32("v_trans")
    if v_trans > 1:
        raise StateFormatError("v_trans", at, f"{v_trans}, expected 0 or 1")
    at = r.off
    r.expect("n_layer", r.u32("n_layer"), n_layer, at)
    n_embd = kv_heads * head_dim
    row = 2 * n_embd

    def heads(rows: np.ndarray) -> np.ndarray:  # [T, H*D] -> [H, T, D]
        return np.ascontiguousarray(rows.reshape(cells, kv_heads, head_dim).transpose(1, 0, 2))

    keys = []
    for layer in range(n_layer):
        at = r.off
        r.expect(f"k_type[{layer}]", r.i32("k_type"), GGML_TYPE_F16, at)
        at = r.off
        r.expect(f"k_size_row[{layer}]", r.u64("k_size_row"), row, at)
        k = np.frombuffer(r.take(cells * row, f"k[{layer}]"), dtype="<f2")
        keys.append(heads(k.reshape(cells, n_embd)))
    values = []
    for layer in range(n_layer):
        at = r.off
        r.expect(f"v_type[{layer}]", r.i32("v_type"), GGML_TYPE_F16, at)
        if v_trans:
            at = r.off
            r.expect(f"v_size_el[{layer}]", r.u32("v_size_el"), 2, at)
            at = r.off
            r.expect(f"n_embd_v_gqa[{layer}]", r.u32("n_embd_v_gqa"), n_embd, at)
            v = np.frombuffer(r.take(cells * row, f"v[{layer}]"), dtype="<f2")
            values.append(heads(v.reshape(n_embd, cells).T))
        else:
            at = r.off
            r.expect(f"v_size_row[{layer}]", r.u64("v_size_row"), row, at)
            v = np.frombuffer(r.take(cells * row, f"v[{layer}]"), dtype="<f2")
            values.append(heads(v.reshape(cells, n_embd)))
    if r.off != len(blob):
        raise StateFormatError("end", r.off, f"{len(blob) - r.off} trailing bytes")
    layout = StateLayout(arch, bool(v_trans), n_layer, n_embd, n_embd)
    return ParsedState(layout, cells, keys, values)


def build_state(layout: StateLayout, keys: Sequence[np.ndarray], values: Sequence[np.ndarray]) -> bytes:
    """The state bytes of a context holding one sequence whose per-layer KV
    (``[kv_heads, T, head_dim]``) is given; the inverse of :func:`parse_state`."""
    if len(keys) != layout.n_layer or len(values) != layout.n_layer:
        raise InvalidArgumentError(
            f"{len(keys)} key and {len(values)} value layers, the layout has {layout.n_layer}"
        )
    h, t, d = keys[0].shape
    if t == 0:
        raise InvalidArgumentError("no tokens to build a state of")
    n_embd = h * d
    arch = layout.arch.encode("utf-8")
    out = [struct.pack("<I", len(arch)), arch, struct.pack("<II", 1, t)]
    meta = np.zeros((t, 3), dtype="<i4")
    meta[:, 0] = np.arange(t)
    meta[:, 1] = 1
    out.append(meta.tobytes())
    out.append(struct.pack("<II", int(layout.v_trans), layout.n_layer))

    def rows(a: np.ndarray) -> np.ndarray:  # [H, T, D] -> [T, H*D]
        return np.asarray(a, dtype="<f2").transpose(1, 0, 2).reshape(t, n_embd)

    for k in keys:
        out.append(struct.pack("<iQ", GGML_TYPE_F16, 2 * n_embd))
        out.append(rows(k).tobytes())
    for v in values:
        if layout.v_trans:
            out.append(struct.pack("<iII", GGML_TYPE_F16, 2, n_embd))
            out.append(np.ascontiguousarray(rows(v).T).tobytes())
        else:
            out.append(struct.pack("<iQ", GGML_TYPE_F16, 2 * n_embd))
            out.append(rows(v).tobytes())
    return b"".join(out)


def _atomic_write(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def encode_raw(tokens: np.ndarray, blob: bytes) -> bytes:
    """A raw state file: header, the token ids, the state, CRC-32 of all before it."""
    head = RAW_MAGIC + struct.pack("<IIQ", len(tokens), 0, len(blob))
    body = head + np.asarray(tokens, dtype="<u4").tobytes() + blob
    return body + struct.pack("<I", zlib.crc32(body))


def decode_raw(data: bytes, name: str = "raw state") -> Tuple[np.ndarray, bytes]:
    """``(tokens, state)`` of a raw state file; :class:`InvalidFormatError` naming the
    field and offset for a bad magic, reserved field, length or checksum."""
    if len(data) < RAW_HEADER + 4:
        raise InvalidFormatError(f"{name}: length: {len(data)} bytes, shorter than a header")
    if data[:8] != RAW_MAGIC:
        raise InvalidFormatError(f"{name}: magic at byte 0: not a raw llama.cpp state file")
    n, reserved, blob_len = struct.unpack("<IIQ", data[8:RAW_HEADER])
    if reserved != 0:
        raise InvalidFormatError(f"{name}: reserved at byte 12: {reserved}, expected 0")
    want = RAW_HEADER + 4 * n + blob_len + 4
    if len(data) != want:
        raise InvalidFormatError(
            f"{name}: length: {len(data)} bytes, the header says {want}"
        )
    crc = struct.unpack("<I", data[-4:])[0]
    if crc != zlib.crc32(data[:-4]):
        raise InvalidFormatError(f"{name}: crc32 at byte {len(data) - 4}: checksum mismatch")
    tokens = np.frombuffer(data, dtype="<u4", count=n, offset=RAW_HEADER).copy()
    return tokens, bytes(data[RAW_HEADER + 4 * n : -4])


def _common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


class LlamaKVStore:
    """llama.cpp states kept by their tokens under a store root; no llama_cpp needed.

    Parsed states go to a :class:`tensorvault.PrefixCache` (``model``, ``layers``,
    ``kv_heads``, ``head_dim``, ``chunk_tokens`` as there; the full chunks of the
    evaluated tokens are kept) and ``ROOT/llama_cpp/<collection>.layout.json`` records
    the context's layout for rebuilding. States that do not parse are kept whole as
    ``ROOT/llama_cpp/<collection>.raw/<sha256 of the tokens>.state`` (checksummed).
    """

    def __init__(
        self,
        root: PathLike,
        model: str,
        layers: int,
        kv_heads: int,
        head_dim: int,
        *,
        chunk_tokens: int = 64,
        budget_bytes: Optional[int] = None,
        age_tiers: Optional[Sequence[int]] = None,
        read_only: bool = False,
        durability: Any = "every-write",
    ) -> None:
        self._cache = PrefixCache(
            root,
            model,
            layers,
            kv_heads,
            head_dim,
            chunk_tokens=chunk_tokens,
            budget_bytes=budget_bytes,
            age_tiers=age_tiers,
            read_only=read_only,
            durability=durability,
        )
        self._geo = (layers, kv_heads, head_dim)
        self._read_only = read_only
        coll = "m" + hashlib.blake2b(model.encode(), digest_size=16).hexdigest()
        base = os.path.join(fspath(root), "llama_cpp")
        self._layout_path = os.path.join(base, f"{coll}.layout.json")
        self._raw_dir = os.path.join(base, f"{coll}.raw")
        if not read_only:
            os.makedirs(self._raw_dir, exist_ok=True)
        #: What the last :meth:`put` did: "chunks", "raw" or "none".
        self.last_put = "none"

    @property
    def prefix_cache(self) -> PrefixCache:
        """The prefix cache the parsed states go to."""
        return self._cache

    def _layout(self) -> Optional[StateLayout]:
        try:
            with open(self._layout_path, "rb") as f:
                j = json.loads(f.read(1 << 16))
            if j.get("version") != LAYOUT_VERSION:
                return None
            return StateLayout(
                str(j["arch"]), bool(j["v_trans"]), int(j["n_layer"]),
                int(j["n_embd_k"]), int(j["n_embd_v"]),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, token_ids: Any, blob: bytes) -> int:
        """Keep the state ``blob`` of a context that evaluated ``token_ids``; returns
        the tokens newly stored as chunks (0 for a raw blob)."""
        if self._read_only:
            raise InvalidArgumentError("this LlamaKVStore is read-only")
        t = _tokens(token_ids)
        layers, heads, dim = self._geo
        try:
            p = parse_state(blob, layers, heads, dim)
            if p.n_tokens != len(t):
                raise StateFormatError(
                    "cell_count", 0, f"{p.n_tokens} cells for {len(t)} tokens"
                )
        except StateFormatError:
            self._put_raw(t, blob)
            self.last_put = "raw"
            return 0
        if self._layout() != p.layout:
            os.makedirs(os.path.dirname(self._layout_path), exist_ok=True)
            _atomic_write(self._layout_path, json.dumps(p.layout.to_json()).encode())
        self.last_put = "chunks"
        return self._cache.store(t, p.keys, p.values)

    def _raw_path(self, t: np.ndarray) -> str:
        name = hashlib.sha256(np.asarray(t, dtype="<u4").tobytes()).hexdigest()
        return os.path.join(self._raw_dir, f"{name}.state")

    def _put_raw(self, t: np.ndarray, blob: bytes) -> None:
        _atomic_write(self._raw_path(t), encode_raw(t, blob))

    def _best_raw(self, t: np.ndarray) -> Tuple[int, Optional[str]]:
        """The raw state whose tokens are the longest prefix of ``t``."""
        best, path = 0, None
        try:
            names = sorted(os.listdir(self._raw_dir))
        except OSError:
            return 0, None
        for name in names:
            if not name.endswith(".state"):
                continue
            p = os.path.join(self._raw_dir, name)
            try:
                with open(p, "rb") as f:
                    head = f.read(RAW_HEADER)
                    if len(head) < RAW_HEADER or head[:8] != RAW_MAGIC:
                        continue
                    n = struct.unpack("<I", head[8:12])[0]
                    if n > len(t) or n <= best:
                        continue
                    toks = np.frombuffer(f.read(4 * n), dtype="<u4")
            except OSError:
                continue
            if len(toks) == n and _common_prefix(toks, t) == n:
                best, path = n, p
        return best, path

    def lookup(self, token_ids: Any) -> int:
        """Tokens of the longest kept prefix of ``token_ids`` (chunks or a raw state)."""
        t = _tokens(token_ids)
        n = self._cache.lookup(t) if self._layout() is not None else 0
        return max(n, self._best_raw(t)[0])

    def get(self, token_ids: Any) -> Optional[Tuple[np.ndarray, bytes]]:
        """``(prefix token ids, state bytes)`` of the longest kept prefix, or ``None``.

        A chunk that turns out damaged shortens the prefix (never wrong data); a raw
        file that fails its checksum is a miss."""
        t = _tokens(token_ids)
        layout = self._layout()
        n_chunks = self._cache.lookup(t) if layout is not None else 0
        n_raw, raw = self._best_raw(t)
        if raw is not None and n_raw >= n_chunks:
            try:
                with open(raw, "rb") as f:
                    toks, blob = decode_raw(f.read(), raw)
                return toks, blob
            except (OSError, InvalidFormatError):
                pass  # damaged: fall back to the chunks
        if n_chunks == 0 or layout is None:
            return None
        keys, values = self._cache.load(t, n_chunks, dtype=np.float16)
        got = keys[0].shape[1]
        if got == 0:
            return None
        return t[:got].copy(), build_state(layout, keys, values)

    def close(self) -> None:
        """Close the prefix cache (idempotent)."""
        self._cache.close()
