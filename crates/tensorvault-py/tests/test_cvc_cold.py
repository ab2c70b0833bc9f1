"""Whole-file loads large enough for the read-ahead path (issue 17), from a file evicted
from the page cache: bit-exact with numpy's cast (fp16) and with the per-chunk path."""

import os

import numpy as np
import pytest

import tensorvault as tv


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


@pytest.mark.parametrize("comp", ["fp16", "int8", "bf16"])
def test_cold_load_matches_chunk_path(tmp_path, comp):
    # 6000 x 768: 3 chunks, ~9 MB of fp16 payload, several read-ahead windows of pieces.
    x = np.random.default_rng(17).standard_normal((6000, 768), dtype=np.float32)
    p = tmp_path / f"{comp}.cvc"
    tv.pack_cvc(x, p, compression=comp, chunk_size=2000)
    chunked = np.concatenate([a for _, a in tv.load_cvc_chunked(p)])
    evict(p)
    out = tv.load_cvc(p)
    assert out.shape == (6000, 768)
    np.testing.assert_array_equal(out.view(np.uint32), chunked.view(np.uint32))
    if comp == "fp16":
        np.testing.assert_array_equal(out, x.astype(np.float16).astype(np.float32))
    evict(p)
    part = tv.load_cvc(p, rows=(1999, 4001))
    np.testing.assert_array_equal(part.view(np.uint32), chunked[1999:4001].view(np.uint32))
