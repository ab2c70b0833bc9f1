"""llama.cpp states through the prefix cache, without llama_cpp: the parser on a real
state saved by llama-cpp-python 0.3.36 running SmolLM2-135M (committed fixture), its
inverse, damaged and foreign states (raw fallback, never wrong data)."""

import json
import os
import struct

import numpy as np
import pytest

from tensorvault._llama_state import (
    LlamaKVStore,
    StateFormatError,
    StateLayout,
    build_state,
    decode_raw,
    encode_raw,
    parse_state,
)
from tensorvault import InvalidFormatError

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "data", "llama_state")
# SmolLM2-135M: 30 layers, 3 KV heads of 64.
L, H, D = 30, 3, 64


def _fixture():
    with open(os.path.join(FIXTURE, "smollm2_state.bin"), "rb") as f:
        blob = f.read()
    with open(os.path.join(FIXTURE, "smollm2_state.json")) as f:
        meta = json.load(f)
    return blob, np.array(meta["tokens"], dtype=np.int64), meta


def test_a_real_state_parses_and_rebuilds_byte_for_byte():
    blob, tokens, meta = _fixture()
    p = parse_state(blob, L, H, D)
    assert p.n_tokens == len(tokens) == meta["n_tokens"]
    assert p.layout.arch == "llama" and p.layout.v_trans == meta["v_trans"]
    assert len(p.keys) == L and p.keys[0].shape == (H, len(tokens), D)
    assert p.keys[0].dtype == np.float16
    # Real attention KV: finite, not all zero, keys of different layers differ.
    assert all(np.isfinite(k).all() for k in p.keys + p.values)
    assert np.abs(p.keys[3]).max() > 0.1 and not np.array_equal(p.keys[0], p.keys[1])
    assert build_state(p.layout, p.keys, p.values) == blob


@pytest.mark.parametrize("v_trans", [False, True])
def test_build_and_parse_are_inverse(v_trans):
    rng = np.random.default_rng(3)
    k = [rng.standard_normal((2, 5, 4)).astype(np.float16) for _ in range(3)]
    v = [rng.standard_normal((2, 5, 4)).astype(np.float16) for _ in range(3)]
    lay = StateLayout("llama", v_trans, 3, 8, 8)
    b = build_state(lay, k, v)
    p = parse_state(b, 3, 2, 4)
    assert p.layout == lay and p.n_tokens == 5
    for a, c in zip(k + v, p.keys + p.values):
        assert np.array_equal(a, c)


def _mutate(blob, off, fmt, value):
    b = bytearray(blob)
    struct.pack_into(fmt, b, off, value)
    return bytes(b)


def test_every_kind_of_foreign_or_damaged_state_names_its_field():
    blob, tokens, _ = _fixture()
    arch_len = struct.unpack_from("<I", blob, 0)[0]
    n_stream_off = 4 + arch_len
    cells_off = n_stream_off + 8
    n = len(tokens)
    data_off = cells_off + 12 * n

    def field(b, geo=(L, H, D)):
        with pytest.raises(StateFormatError) as e:
            parse_state(b, *geo)
        return e.value.field, e.value.offset

    assert field(blob[:3]) == ("arch_len", 0)
    assert field(_mutate(blob, 0, "<I", 10**9)) == ("arch_len", 0)
    assert field(_mutate(blob, n_stream_off, "<I", 2)) == ("n_stream", n_stream_off)
    # A cell count far beyond the bytes: refused before anything is allocated.
    assert field(_mutate(blob, n_stream_off + 4, "<I", 2**32 - 1))[0] == "cells"
    # Two sequences in a cell, or positions out of order.
    assert field(_mutate(blob, cells_off + 12 * 2 + 4, "<I", 2)) == ("cells", cells_off + 24)
    assert field(_mutate(blob, cells_off + 12 * 3, "<i", 7)) == ("cells", cells_off + 36)
    assert field(_mutate(blob, data_off, "<I", 5)) == ("v_trans", data_off)
    assert field(_mutate(blob, data_off + 4, "<I", 29)) == ("n_layer", data_off + 4)
    # A quantized K type (q8_0 = 8) is not f16.
    assert field(_mutate(blob, data_off + 8, "<i", 8)) == ("k_type[0]", data_off + 8)
    assert field(blob + b"\0")[0] == "end"
    assert field(blob[:-1])[0].startswith("v[")
    # Another geometry than the cache's.
    assert field(blob, (L, H, 32))[0] == "k_size_row[0]"
    assert field(blob, (29, H, D))[0] == "n_layer"


def test_a_state_stored_as_chunks_comes_back_as_its_prefix(tmp_path):
    blob, tokens, _ = _fixture()
    s = LlamaKVStore(tmp_path, "smollm2-test", L, H, D, chunk_tokens=8)
    assert s.get(tokens) is None
    stored = s.put(tokens, blob)
    assert s.last_put == "chunks" and stored == len(tokens) // 8 * 8
    longer = np.concatenate([tokens, [1, 2, 3]])
    assert s.lookup(longer) == stored
    got_tokens, state = s.get(longer)
    assert np.array_equal(got_tokens, tokens[:stored])
    whole = parse_state(blob, L, H, D)
    part = parse_state(state, L, H, D)
    assert part.n_tokens == stored
    for a, b in zip(whole.keys + whole.values, part.keys + part.values):
        assert np.array_equal(a[:, :stored], b), "Tier0 is bit-exact"
    s.close()
    # Another process (a read-only open) finds it too.
    r = LlamaKVStore(tmp_path, "smollm2-test", L, H, D, chunk_tokens=8, read_only=True)
    assert r.get(longer)[1] == state
    r.close()


def test_an_unparseable_state_is_kept_raw_and_a_damaged_raw_file_is_a_miss(tmp_path):
    blob, tokens, _ = _fixture()
    arch_len = struct.unpack_from("<I", blob, 0)[0]
    foreign = _mutate(blob, 4 + arch_len, "<I", 2)  # two streams: not ours to parse
    s = LlamaKVStore(tmp_path, "m", L, H, D, chunk_tokens=8)
    assert s.put(tokens, foreign) == 0 and s.last_put == "raw"
    assert s.prefix_cache.lookup(tokens) == 0
    got_tokens, state = s.get(np.concatenate([tokens, [5]]))
    assert np.array_equal(got_tokens, tokens) and state == foreign
    assert s.get(tokens[:-1]) is None, "a raw state is only a prefix as a whole"
    raw_dir = [d for d in os.listdir(tmp_path / "llama_cpp") if d.endswith(".raw")][0]
    (path,) = (tmp_path / "llama_cpp" / raw_dir).iterdir()
    b = bytearray(path.read_bytes())
    b[100] ^= 1
    path.write_bytes(bytes(b))
    assert s.get(tokens) is None
    s.close()


def test_raw_file_damage_names_the_field():
    t = np.arange(5, dtype=np.uint32)
    good = encode_raw(t, b"state")
    toks, st = decode_raw(good)
    assert np.array_equal(toks, t) and st == b"state"
    for bad, what in [
        (good[:10], "length"),
        (b"X" + good[1:], "magic"),
        (good[:12] + b"\1" + good[13:], "reserved"),
        (good[:-5] + good[-4:], "length"),
        (good[:30] + bytes([good[30] ^ 1]) + good[31:], "crc32"),
    ]:
        with pytest.raises(InvalidFormatError, match=what):
            decode_raw(bad)
