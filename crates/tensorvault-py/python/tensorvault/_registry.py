"""The weight registry: versioned safetensors checkpoints of the FuseMoE weights.

Checkpoints load as dicts of read-only numpy arrays that are views into the mapped
``weights.safetensors`` file (no copy; pass ``copy=True`` for writable arrays). Files
are readable by Python's ``safetensors`` and vice versa.
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


class Registry:
    """A versioned weight registry rooted at a directory (created if missing).

    Args:
        root: Registry directory (``registry.json`` + ``versions/<version>/``).
        config: FuseMoE shapes: ``"default"`` (the seed's), ``"tiny"``, or a dict of
            ``input_dim, num_experts, expert_hidden_dim, expert_output_dim,
            output_dim``. ``None`` takes them from the newest saved version, else the
            default.
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

    def load_checkpoint(self, version: str, copy: bool = False) -> Weights:
        """Load ``version`` and make it current.

        Raises:
            NotFoundError: no such version. CorruptionError: checksum mismatch.
            InvalidArgumentError: a malformed version string.
        """
        return _weights(self._r.load_checkpoint(version), copy)

    def rollback(self, version: str, copy: bool = False) -> Weights:
        """Roll back to an earlier ``version`` (load it and make it current)."""
        return _weights(self._r.rollback(version), copy)

    def save_checkpoint(
        self,
        weights: Mapping[str, Any],
        version: Optional[str] = None,
        source_id: str = "python",
        metrics: Optional[Mapping[str, Any]] = None,
    ) -> Dict[str, Any]:
        """Save ``{name: array}`` (every tensor of the layout, exact shapes) as a new
        version, atomically. ``version`` defaults to the newest one with its patch
        number bumped. ``metrics`` needs ``epoch``, ``loss``, ``learning_rate``; other
        keys are kept. Returns the saved version's metadata (with its checksum).

        Raises:
            InvalidArgumentError: missing/extra tensors, wrong shapes, bad metrics.
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

    def set_golden(self, version: str) -> None:
        """Mark ``version`` golden (verified first)."""
        self._r.set_golden(version)

    def verify(self, version: str) -> Dict[str, Any]:
        """Verify ``version``'s checksum and safetensors header; returns its metadata."""
        return self._r.verify(version)

    def version_dir(self, version: str) -> str:
        """The checkpoint directory of ``version``."""
        return str(self._r.version_dir(version))

    def __repr__(self) -> str:
        return f"<tensorvault.Registry {self.root!r}: {len(self.list_versions())} versions>"


__all__ = ["Registry", "Weights", "load_checkpoint"]
