"""The weight registries: :class:`Registry` (versioned safetensors checkpoints of the
FuseMoE weights) and :class:`ModelRegistry` (any safetensors checkpoint: a single
``model.safetensors`` or a sharded Hugging Face directory, any dtype).

Checkpoints load as dicts of read-only numpy arrays that are views into the mapped
safetensors files (no copy; pass ``copy=True`` for writable arrays). Files are readable
by Python's ``safetensors`` and vice versa.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Union

import numpy as np

from . import _tensorvault as _native
from ._common import PathLike, fspath
from ._errors import InvalidArgumentError, UnsupportedError


class Weights(dict):
    """``{tensor name: ndarray}`` plus ``.version``: the version's metadata (version,
    source_id, created_at, checksum, metrics)."""

    version: Dict[str, Any]

    def __init__(self, tensors: Mapping[str, np.ndarray], version: Dict[str, Any]) -> None:
        super().__init__(tensors)
        self.version = version


def _weights(pair: Any, copy: bool) -> Weights:
    tensors, version = pair
    if copy:
        tensors = {k: np.array(v, copy=True) for k, v in tensors.items()}
    return Weights(tensors, version)


def load_checkpoint(path: PathLike, verify: bool = True, copy: bool = False) -> Weights:
    """Load one checkpoint directory (``metadata.json`` + ``weights.safetensors``).

    Args:
        path: The checkpoint directory.
        verify: Check the SHA-256 recorded in ``metadata.json`` first.
        copy: Return writable copies instead of read-only views into the map.

    Raises:
        NotFoundError, CorruptionError (checksum), InvalidFormatError (bad safetensors),
        UnsupportedFormatError (dtype other than F32/F16/BF16).
    """
    return _weights(_native.registry_load_checkpoint(fspath(path), bool(verify)), copy)


class _Versioned:
    """What both registries share: one ``registry.json`` manifest of versions, a golden
    marker and a current pointer (the native object is ``self._r``)."""

    _r: Any
    _kind = "Registry"

    @property
    def root(self) -> str:
        """The registry directory."""
        return str(self._r.root)

    @property
    def golden(self) -> Optional[str]:
        """The golden version, if marked."""
        return self._r.golden

    @property
    def current_version(self) -> Optional[str]:
        """The active (or last recorded current) version."""
        return self._r.current_version

    def list_versions(self) -> List[Dict[str, Any]]:
        """Every saved version, oldest first (version, source_id, created_at, checksum,
        metrics)."""
        return self._r.list_versions()

    def set_golden(self, version: str) -> None:
        """Mark ``version`` golden (verified first)."""
        self._r.set_golden(version)

    def __repr__(self) -> str:
        return f"<tensorvault.{self._kind} {self.root!r}: {len(self.list_versions())} versions>"


class Registry(_Versioned):
    """A versioned weight registry rooted at a directory (created if missing).

    Args:
        root: Registry directory (``registry.json`` + ``versions/<version>/``).
        config: FuseMoE shapes: ``"default"`` (the seed's), ``"tiny"``, or a dict of
            ``input_dim, num_experts, expert_hidden_dim, expert_output_dim,
            output_dim``. ``None`` takes them from the newest saved FuseMoE version,
            else the default; a version whose ``metadata.json`` does not read raises
            that error (``InvalidFormatError`` naming the file) rather than falling back.
        seed: Seed of the deterministic initializer.
        verify_checksum: Verify SHA-256 checksums when loading versions.
        device: ``"cpu"``; ``"cuda"`` raises ``UnsupportedError``.
    """

    def __init__(
        self,
        root: PathLike,
        config: Union[None, str, Mapping[str, int]] = None,
        seed: int = 42,
        verify_checksum: bool = True,
        device: str = "cpu",
    ) -> None:
        if str(device).startswith("cuda"):
            raise UnsupportedError(
                "no GPU backend in this build: the registry keeps weights in host memory"
            )
        self._r = _native.Registry(fspath(root), config, int(seed), bool(verify_checksum), device)

    @property
    def config(self) -> Dict[str, int]:
        """The FuseMoE shapes this registry expects."""
        return self._r.config

    def load_checkpoint(self, version: str, copy: bool = False) -> Weights:
        """Load ``version`` and make it current.

        Raises:
            NotFoundError: no such version. CorruptionError: checksum mismatch.
            InvalidArgumentError: a malformed version string.
        """
        return _weights(self._r.load_checkpoint(version), copy)

    def activate(self, version: str, copy: bool = False) -> Weights:
        """Make ``version`` the current one, newer or older than the current: load and
        verify it, swap it in atomically for this process (readers holding the previous
        weights keep them) and record it as current on disk. Saving never does this.

        Raises:
            NotFoundError: no such version. InvalidArgumentError: a malformed version
            string. CorruptionError: checksum mismatch (nothing changes then).
        """
        return _weights(self._r.activate(version), copy)

    def rollback(self, version: str, copy: bool = False) -> Weights:
        """Roll back to an earlier ``version`` (the same as :meth:`activate`)."""
        return _weights(self._r.rollback(version), copy)

    def save_checkpoint(
        self,
        weights: Mapping[str, Any],
        version: Optional[str] = None,
        source_id: str = "python",
        metrics: Optional[Mapping[str, Any]] = None,
    ) -> Dict[str, Any]:
        """Save ``{name: array}`` (every tensor of the layout, exact shapes) as a new
        version, atomically. ``version`` is used as given; ``None`` picks the newest one
        with its patch number bumped. ``metrics`` needs ``epoch``, ``loss``,
        ``learning_rate``; other keys are kept. Returns the saved version's metadata (with
        its checksum). Does not make the version current (:meth:`activate` does).

        Raises:
            InvalidArgumentError: missing/extra tensors, wrong shapes, bad metrics; a
                ``version`` that already exists or is not a valid version string (semver,
                no path characters); nothing is written then.
        """
        arrays = {}
        for name, a in weights.items():
            arr = np.asarray(a)
            if arr.dtype.kind != "f":
                raise InvalidArgumentError(f"tensor {name!r}: dtype {arr.dtype} is not a float")
            arrays[str(name)] = np.require(arr, dtype=np.float32, requirements="C")
        return self._r.save_checkpoint(
            arrays, version, source_id, None if metrics is None else dict(metrics)
        )

    def initialize(
        self,
        strategy: str = "kaiming_uniform",
        seed: Optional[int] = None,
        *,
        mode: str = "fan_in",
        nonlinearity: str = "relu",
        gain: float = 1.0,
    ) -> Weights:
        """Initialize every tensor from scratch: ``kaiming_uniform`` (default),
        ``kaiming_normal``, ``xavier_uniform``, ``xavier_normal``, ``orthogonal``,
        ``zeros`` or ``ones`` (PyTorch's formulas; fans from the ``[in, out]`` layout).
        The same seed gives bit-identical weights on every run; each tensor has its
        own random stream."""
        return _weights(
            self._r.initialize(strategy, seed, mode, nonlinearity, float(gain)), False
        )

    def verify(self, version: str) -> Dict[str, Any]:
        """Verify ``version``'s checksum and safetensors header; returns its metadata."""
        return self._r.verify(version)

    def version_dir(self, version: str) -> str:
        """The checkpoint directory of ``version``."""
        return str(self._r.version_dir(version))


# safetensors dtype name -> numpy dtype (little-endian). BF16 has no numpy dtype: its
# tensors come back as ``uint16`` bit patterns (widen with ``bf16_to_f32``).
_NP = {
    "BOOL": np.dtype(np.bool_), "U8": np.dtype(np.uint8), "I8": np.dtype(np.int8),
    "U16": np.dtype("<u2"), "I16": np.dtype("<i2"), "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"), "U32": np.dtype("<u4"), "I32": np.dtype("<i4"),
    "F32": np.dtype("<f4"), "U64": np.dtype("<u8"), "I64": np.dtype("<i8"),
    "F64": np.dtype("<f8"),
}
_ST = {np.dtype(v).newbyteorder("="): k for k, v in _NP.items() if k != "BF16"}


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """Widen BF16 bit patterns (``uint16``, as :class:`ModelRegistry` returns them) to
    float32, exactly."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


class Model(dict):
    """``{tensor name: ndarray}`` of one model version, plus ``.version`` (version,
    source_id, created_at, checksum, metrics) and ``.dtypes`` (``{name: safetensors dtype
    name}``, e.g. ``"BF16"`` for the ``uint16`` arrays of BF16 tensors)."""

    version: Dict[str, Any]
    dtypes: Dict[str, str]

    def __init__(self, tensors: Mapping[str, np.ndarray], version: Dict[str, Any],
                 dtypes: Dict[str, str]) -> None:
        super().__init__(tensors)
        self.version = version
        self.dtypes = dtypes


def _model(pair: Any, copy: bool) -> "Model":
    raw, version = pair
    tensors, dtypes = {}, {}
    for name, (dtype, shape, buf) in raw.items():
        a = buf.view(_NP[dtype]).reshape(shape)
        tensors[name] = np.array(a, copy=True) if copy else a
        dtypes[name] = dtype
    return Model(tensors, version, dtypes)


class ModelRegistry(_Versioned):
    """A versioned registry of any safetensors checkpoints, rooted at a directory (created
    if missing): ``registry.json`` (the same manifest as :class:`Registry`) and
    ``versions/<version>/`` holding the checkpoint's files byte for byte plus
    ``metadata.json`` (whole-file SHA-256 and 4 MiB chunk digests of every file).

    Args:
        root: Registry directory.
        preset: ``"any"`` (any tensors, any dtype) or ``"fusemoe"`` (the FuseMoE layout
            of ``config``, as for :class:`Registry`).
        config: FuseMoE shapes for ``preset="fusemoe"`` (default: the seed's).
        verify: How loads check the files: ``"chunks"`` (default: every 4 MiB chunk's BLAKE3,
            hashed on all cores), ``"full"`` (whole-file SHA-256s), ``"both"``, ``"none"``.
    """

    _kind = "ModelRegistry"

    def __init__(self, root: PathLike, preset: str = "any",
                 config: Union[None, str, Mapping[str, int]] = None,
                 verify: str = "chunks") -> None:
        self._r = _native.ModelRegistry(fspath(root), preset, config, verify)

    def save(self, path: PathLike, version: Optional[str] = None,
             source_id: Optional[str] = None,
             metrics: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """Save the checkpoint at ``path`` as a new version: a ``.safetensors`` file, a
        sharded checkpoint's ``*.index.json``, or a Hugging Face model directory
        (``model.safetensors.index.json``, else ``model.safetensors``). Files are
        validated and copied byte for byte. ``version`` is used as given; ``None`` picks
        the newest one with its patch number bumped. Returns the version's metadata.
        Does not make the version current (:meth:`activate` does).

        Raises:
            InvalidFormatError: not a checkpoint, bad headers, an index naming a shard
                outside its directory. InvalidArgumentError: preset mismatch; a
                ``version`` that already exists or is not a valid version string (nothing
                is written then).
        """
        return self._r.save(fspath(path), version, source_id,
                            None if metrics is None else dict(metrics))

    def save_tensors(self, tensors: Mapping[str, Any], version: Optional[str] = None,
                     source_id: str = "python",
                     metrics: Optional[Mapping[str, Any]] = None,
                     dtypes: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
        """Save ``{name: array}`` as a new version (one ``model.safetensors``), with
        ``version`` as in :meth:`save`. numpy dtypes map to safetensors ones; ``dtypes={name: "BF16"}`` marks ``uint16`` arrays
        as BF16 bit patterns (a :class:`Model` passes its own ``.dtypes``)."""
        dtypes = dict(dtypes or getattr(tensors, "dtypes", {}) or {})
        items = []
        for name, a in tensors.items():
            arr = np.ascontiguousarray(a)
            st = dtypes.get(name) or _ST.get(arr.dtype.newbyteorder("="))
            if st is None:
                raise InvalidArgumentError(f"tensor {name!r}: dtype {arr.dtype} has no safetensors dtype")
            arr = arr.astype(_NP[st], copy=False)
            items.append((str(name), st, list(arr.shape), arr.reshape(-1).view(np.uint8)))
        return self._r.save_tensors(items, version, source_id,
                                    None if metrics is None else dict(metrics))

    def load(self, version: str, copy: bool = False) -> Model:
        """Load ``version`` (verified), make it active and current."""
        return _model(self._r.load(version), copy)

    def activate(self, version: str, copy: bool = False) -> Model:
        """Make ``version`` the current one, newer or older than the current: load and
        verify it, swap it in atomically for this process (readers holding the previous
        model keep it; the layout may differ, see :meth:`hot_swap` to require the same)
        and record it as current on disk. Saving never does this.

        Raises:
            NotFoundError: no such version. InvalidArgumentError: a malformed version
            string. CorruptionError: damaged files (nothing changes then).
        """
        return _model(self._r.activate(version), copy)

    def rollback(self, version: str, copy: bool = False) -> Model:
        """Roll back to ``version`` (the same as :meth:`activate`)."""
        return _model(self._r.rollback(version), copy)

    def hot_swap(self, version: str, copy: bool = False) -> Model:
        """Load ``version`` and swap it in atomically; it must keep the active model's
        tensor names, dtypes and shapes (otherwise a ``TensorvaultError`` naming the first
        difference, and the active model stays)."""
        return _model(self._r.hot_swap(version), copy)

    def load_active(self, copy: bool = False) -> Model:
        """The active model; if none, the golden version, else the current one, else the
        newest that loads."""
        return _model(self._r.load_active(), copy)

    def current(self, copy: bool = False) -> Optional[Model]:
        """The active model, if any."""
        pair = self._r.current()
        return None if pair is None else _model(pair, copy)

    def verify(self, version: str) -> Dict[str, Any]:
        """Verify ``version`` fully (every file's SHA-256 and chunk digests, headers,
        index); returns its metadata. Raises ``CorruptionError`` on damage."""
        return self._r.verify(version)

    def metadata(self, version: str) -> Dict[str, Any]:
        """``version``'s metadata (files, digests, preset), not verified."""
        return self._r.metadata(version)

    def set_retention(self, keep: Optional[int]) -> List[str]:
        """Keep the ``keep`` newest versions (plus golden, current and active); returns
        the removed versions. ``None`` keeps all."""
        return self._r.set_retention(keep)

    def version_dir(self, version: str) -> str:
        """The directory of ``version`` (a Hugging Face-style model directory)."""
        return str(self._r.version_dir(version))


__all__ = ["Registry", "Weights", "load_checkpoint", "ModelRegistry", "Model", "bf16_to_f32"]
