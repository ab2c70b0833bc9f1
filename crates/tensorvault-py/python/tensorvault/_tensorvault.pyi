"""Type stubs of the native module (built from crates/tensorvault-py/src). Use the
documented wrappers in ``tensorvault`` rather than these functions directly."""

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

__version__: str

F32 = npt.NDArray[np.float32]
CorruptRows = Tuple[int, int, int]
WeightsPair = Tuple[Dict[str, F32], Dict[str, Any]]

class RustBuffer:
    """Rust-owned memory behind arrays returned by loads (their ``base``)."""
    @property
    def nbytes(self) -> int: ...

# CVC
def cvc_pack(
    vectors: F32,
    output_path: str,
    compression: str = "fp16",
    chunk_size: int = 100000,
    chunk_metadata: Optional[List[Any]] = None,
    mmap_optimized: bool = False,
    format: str = "v1",
    chunk_compression: Optional[List[str]] = None,
    sync: bool = True,
    reference_exact: bool = False,
) -> Dict[str, int]:
    """Pack a C-contiguous float32 (n, dim) array into a .cvc file."""
def cvc_pack_sections(
    sections: List[Tuple[F32, Any]],
    output_path: str,
    compression: str = "fp16",
    chunk_size: int = 100000,
    format: str = "v1",
    sync: bool = True,
    reference_exact: bool = False,
) -> Dict[str, int]:
    """Pack [(array, metadata), ...] as sections, streaming."""
def cvc_load_all(path: str) -> F32:
    """Load a whole file through a memory map, CRCs verified."""
def cvc_validate(path: str) -> Dict[str, Any]:
    """The structural validation report (raises NotFoundError for a missing file)."""

class CvcFile:
    """A CVC file opened for reading (header and chunk table validated)."""
    def __init__(self, path: str) -> None: ...
    @property
    def num_vectors(self) -> int: ...
    @property
    def dimension(self) -> int: ...
    @property
    def num_chunks(self) -> int: ...
    @property
    def version(self) -> Tuple[int, int]: ...
    def load(
        self, rows: Optional[Tuple[int, int]] = None, fill_value: Optional[float] = None
    ) -> Tuple[F32, List[CorruptRows]]:
        """Rows [a, b) (all if None); corrupt chunks filled with fill_value if given."""
    def load_chunks(self, indices: Sequence[int]) -> F32:
        """The given chunks, concatenated in order."""
    def load_section(self, key: str, value: Any) -> F32:
        """Rows of every section whose metadata[key] == value."""
    def chunks_where(self, key: str, value: Any) -> List[int]:
        """Indices of chunks whose metadata[key] == value."""
    def info(self) -> Dict[str, Any]:
        """The get_cvc_info dictionary."""
    def integrity(self, details: bool = False) -> Dict[str, Any]:
        """The validate_cvc_integrity dictionary."""

class CvcWriter:
    """Streaming CVC writer (native)."""
    def __init__(
        self,
        path: str,
        dimension: int,
        compression: str = "fp16",
        chunk_size: int = 100000,
        chunk_metadata: Optional[List[Any]] = None,
        mmap_optimized: bool = False,
        format: str = "v1",
        sync: bool = True,
        reference_exact: bool = False,
    ) -> None: ...
    @property
    def rows(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    def write(self, rows: F32) -> None:
        """Append rows."""
    def write_chunk(
        self, rows: F32, compression: Optional[str] = None, metadata: Any = None
    ) -> None:
        """Write rows as one chunk of their own."""
    def close(self) -> Dict[str, int]:
        """Commit the file atomically."""
    def abort(self) -> None:
        """Abandon the file."""

# CGEB
def cgeb_encode(
    vector: F32,
    expert_weights: F32,
    selected_experts: npt.NDArray[np.uint8],
    pipeline_latency_us: int = 0,
    aux_data: Optional[bytes] = None,
    aux_compression: Optional[str] = None,
    little_endian: bool = False,
) -> bytes:
    """Encode one record."""
def cgeb_decode(data: bytes, verify: bool = True) -> Tuple[F32, F32, npt.NDArray[np.uint8], int, int, Optional[bytes]]:
    """Decode one record: (vector, expert_weights, selected_experts, latency, hash, aux)."""
def cgeb_write_batch(
    path: str,
    vectors: F32,
    expert_weights: F32,
    selected_experts: npt.NDArray[np.uint8],
    pipeline_latency_us: Optional[List[int]] = None,
    alignment: int = 4096,
    little_endian: bool = False,
) -> Tuple[str, str]:
    """Write NAME.cgeb + NAME.cgei; returns both paths."""

class BatchReader:
    """A memory-mapped CGEB batch; items are read-only views into the map."""
    def __init__(self, path: str, verify_data_hash: bool = True, verify_records: bool = True) -> None: ...
    def __len__(self) -> int: ...
    def __getitem__(self, i: int) -> npt.NDArray[Any]: ...
    def record_fields(self, i: int) -> Tuple[npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[np.uint8], int, int, Optional[bytes]]:
        """Every field of record i (arrays are views into the map)."""
    def vectors(self) -> F32:
        """All vectors as one native float32 array (decoded copy)."""
    def verify(self) -> Dict[str, Any]:
        """Hash, record and alignment checks."""
    @property
    def offsets(self) -> List[int]: ...
    @property
    def _data_span(self) -> Tuple[int, int]: ...

# Registry
class LoadedWeightsOwner:
    """Owner (array base) of loaded checkpoint tensors."""
    @property
    def all_mapped(self) -> bool: ...

def registry_load_checkpoint(path: str, verify: bool = True) -> WeightsPair:
    """Load one checkpoint directory."""

class Registry:
    """A versioned weight registry (native)."""
    def __init__(
        self, root: str, config: Any = None, seed: int = 42, verify_checksum: bool = True, device: str = "cpu"
    ) -> None: ...
    @property
    def config(self) -> Dict[str, int]: ...
    @property
    def root(self) -> str: ...
    @property
    def golden(self) -> Optional[str]: ...
    @property
    def current_version(self) -> Optional[str]: ...
    def list_versions(self) -> List[Dict[str, Any]]:
        """Version history, oldest first."""
    def set_golden(self, version: str) -> None:
        """Mark a version golden."""
    def verify(self, version: str) -> Dict[str, Any]:
        """Verify a version."""
    def load_checkpoint(self, version: str) -> WeightsPair:
        """Load a version and make it current."""
    def activate(self, version: str) -> WeightsPair:
        """Make a version current (forward or back)."""
    def rollback(self, version: str) -> WeightsPair:
        """Roll back to a version."""
    def save_checkpoint(
        self, weights: Dict[str, F32], version: Optional[str] = None, source_id: str = "python", metrics: Any = None
    ) -> Dict[str, Any]:
        """Save a new version."""
    def initialize(
        self, strategy: str = "kaiming_uniform", seed: Optional[int] = None, mode: str = "fan_in",
        nonlinearity: str = "relu", gain: float = 1.0,
    ) -> WeightsPair:
        """Deterministic initialization."""
    def version_dir(self, version: str) -> str:
        """A version's checkpoint directory."""

ModelTensors = Dict[str, Tuple[str, List[int], np.ndarray]]
ModelPair = Tuple[ModelTensors, Dict[str, Any]]

class LoadedModelOwner:
    """Owner (array base) of a loaded model version's tensors."""
    @property
    def all_mapped(self) -> bool: ...

class ModelRegistry:
    """A versioned registry of any safetensors checkpoints (native)."""
    def __init__(self, root: str, preset: str = "any", config: Any = None, verify: str = "chunks") -> None: ...
    @property
    def root(self) -> str: ...
    @property
    def golden(self) -> Optional[str]: ...
    @property
    def current_version(self) -> Optional[str]: ...
    def save(
        self, path: str, version: Optional[str] = None, source_id: Optional[str] = None, metrics: Any = None
    ) -> Dict[str, Any]:
        """Save a checkpoint file, index or model directory as a version."""
    def save_tensors(
        self, tensors: List[Tuple[str, str, List[int], np.ndarray]], version: Optional[str] = None,
        source_id: Optional[str] = None, metrics: Any = None,
    ) -> Dict[str, Any]:
        """Save (name, dtype, shape, uint8 bytes) tensors as a version."""
    def load(self, version: str) -> ModelPair: ...
    def activate(self, version: str) -> ModelPair: ...
    def rollback(self, version: str) -> ModelPair: ...
    def hot_swap(self, version: str) -> ModelPair: ...
    def load_active(self) -> ModelPair: ...
    def current(self) -> Optional[ModelPair]: ...
    def list_versions(self) -> List[Dict[str, Any]]: ...
    def verify(self, version: str) -> Dict[str, Any]: ...
    def metadata(self, version: str) -> Dict[str, Any]: ...
    def set_golden(self, version: str) -> None: ...
    def set_retention(self, keep: Optional[int]) -> List[str]: ...
    def version_dir(self, version: str) -> str: ...

# Store
class StoreBuffer:
    """Rust-owned bytes behind arrays returned by Store.get_tensor (their ``base``)."""
    @property
    def nbytes(self) -> int: ...

class Store:
    """One collection of the temporal tensor store (native; GIL released per call)."""
    def __init__(
        self,
        root: str,
        tenant: str,
        collection: str,
        create: bool = True,
        durability: str = "every-write",
        max_blocks_per_tier: Optional[List[Optional[int]]] = None,
        block_elems: Optional[int] = None,
        kv_head_dim: Optional[int] = None,
        codec: Optional[int] = None,
        read_only: bool = False,
    ) -> None: ...
    @property
    def path(self) -> str: ...
    @property
    def tenant(self) -> str: ...
    @property
    def collection(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    @property
    def geometry(self) -> Dict[str, Any]: ...
    def put_tensor(
        self,
        name: str,
        dtype: str,
        shape: List[int],
        data: npt.NDArray[np.uint8],
        tier: int,
        kind: str = "generic",
    ) -> Dict[str, Any]:
        """Store little-endian element bytes (1-D uint8, C-contiguous) as a tensor."""
    def get_tensor(self, name: str) -> Tuple[Dict[str, Any], npt.NDArray[np.uint8]]:
        """(info, little-endian element bytes over a StoreBuffer)."""
    def tensors(self) -> List[Dict[str, Any]]:
        """Every tensor's info dict, sorted by name."""
    def delete_tensor(self, name: str) -> int:
        """Delete a tensor; returns its block count."""
    def migrate_tensor(self, name: str, tier: int) -> int:
        """Move a tensor's blocks to a tier; returns how many moved."""
    def stats(self) -> Dict[str, Any]:
        """Store-wide statistics."""
    def maintain(self, budget: int = 1024) -> Dict[str, Any]:
        """One tiering step."""
    def verify(self) -> List[Dict[str, Any]]:
        """One dict per corrupt block."""
    def flush(self) -> None:
        """Make writes durable."""
    def close(self) -> None:
        """Flush and release the collection."""

# MOBI
def mobi_read(path: str) -> Dict[str, Any]:
    """Read and validate a .mobi file."""
def mobi_from_bytes(data: bytes) -> Dict[str, Any]:
    """Read and validate .mobi bytes."""
def mobi_example(name: str, seed: int = 1) -> Dict[str, Any]:
    """A built-in example model."""
def mobi_write(path: str, model: Dict[str, Any], quantize: Optional[str] = None, gzip: bool = False) -> int:
    """Write a model structure atomically; returns bytes written."""
def mobi_to_bytes(model: Dict[str, Any], quantize: Optional[str] = None, gzip: bool = False) -> bytes:
    """Encode a model structure."""
def onnx_convert(src: str, dst: str, weights: str = "f32", gzip: bool = False, batch: Optional[int] = None) -> Dict[str, Any]:
    """Convert an ONNX model to a MOBI file (atomic); returns the import statistics."""

class KvCache:
    """A KV cache in one store collection (native; GIL released per call)."""
    def __init__(
        self,
        root: str,
        tenant: str,
        collection: str,
        head_dim: int,
        create: bool = True,
        durability: str = "os",
        max_blocks_per_tier: Optional[List[Optional[int]]] = None,
        age_tiers: Optional[Tuple[int, int, int]] = None,
        block_tokens: Optional[int] = None,
    ) -> None: ...
    @property
    def head_dim(self) -> int: ...
    @property
    def tokens_per_block(self) -> int: ...
    @property
    def path(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    def append_batch(self, items: List[Tuple[int, int, str, npt.NDArray[np.uint8]]]) -> None: ...
    def tokens(self, layer: int, head: int, kind_: str) -> int: ...
    def read(
        self, layer: int, head: int, kind_: str, start: int, end: int
    ) -> npt.NDArray[np.uint8]: ...
    def pin(self, layer: int, head: int, kind_: str, block_index: int) -> bool: ...
    def unpin(self, layer: int, head: int, kind_: str, block_index: int) -> bool: ...
    def maintain(self, budget: int = 1024) -> Dict[str, Any]: ...
    @property
    def age_tiers(self) -> Optional[Tuple[int, int, int]]: ...
    def stats(self) -> Dict[str, Any]: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...

class MobiSession:
    """A MOBI model prepared for the reference runtime."""
    def __init__(self, model: Dict[str, Any], int_tensors: Optional[Dict[int, Any]] = None) -> None: ...
    @staticmethod
    def open(path: str) -> "MobiSession":
        """Open a .mobi file, f32 weights used in place from its memory map."""
    @property
    def constant_memory(self) -> Dict[str, int]: ...
    @property
    def input_names(self) -> List[str]: ...
    @property
    def output_names(self) -> List[str]: ...
    def run(self, inputs: Dict[str, Any]) -> Dict[str, Any]:
        """Run on name -> float32/int64 arrays; returns name -> array per output."""

class PrefixCache:
    """A KV prefix cache of one model (native; GIL released per call)."""
    def __init__(
        self,
        root: str,
        model: str,
        layers: int,
        kv_heads: int,
        head_dim: int,
        chunk_tokens: int = 256,
        age_tiers: Optional[Tuple[int, int, int]] = None,
        budget_bytes: Optional[int] = None,
        read_only: bool = False,
        durability: str = "every-write",
    ) -> None: ...
    def store(
        self,
        tokens: npt.NDArray[np.uint32],
        keys: List[npt.NDArray[np.uint8]],
        values: List[npt.NDArray[np.uint8]],
        dtype: str,
    ) -> int: ...
    def lookup(self, tokens: npt.NDArray[np.uint32]) -> int: ...
    def load(
        self, tokens: npt.NDArray[np.uint32], n: Optional[int] = None
    ) -> Tuple[int, List[npt.NDArray[np.uint8]], List[npt.NDArray[np.uint8]]]: ...
    def stats(self) -> Dict[str, Any]: ...
    def verify(self) -> Dict[str, Any]: ...
    def maintain(self) -> Dict[str, Any]: ...
    @property
    def chunk_tokens(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    def close(self) -> None: ...
