"""scripts/gen_pyi.py: Rust types become the annotations of the generated stub and the stub
covers the installed module. (That the committed stub is what the generator writes is
checked by scripts/test.sh's python stage, which prints the diff.)"""

import ast
import importlib.util
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("gen_pyi", ROOT / "scripts" / "gen_pyi.py")
gen = importlib.util.module_from_spec(spec)
sys.modules["gen_pyi"] = gen
spec.loader.exec_module(gen)


@pytest.fixture(scope="module")
def src():
    return gen.read_rust(gen.RUST_SRC)


@pytest.mark.parametrize(
    "rust, arg, py",
    [
        ("PyReadonlyArray2<'py, f32>", True, "npt.NDArray[np.float32]"),
        ("Bound<'py, PyArrayDyn<u8>>", False, "npt.NDArray[np.uint8]"),
        ("Option<Vec<Option<u64>>>", True, "Optional[List[Optional[int]]]"),
        ("PyResult<(Bound<'py, PyDict>, Vec<(usize, u64, u64)>)>", False,
         "Tuple[Dict[str, Any], List[Tuple[int, int, int]]]"),
        ("PathBuf", True, "StrPath"),
        ("std::path::PathBuf", False, "Path"),
        ("&[u8]", True, "bytes"),
        ("Vec<u8>", False, "bytes"),
        ("PyResult<()>", False, "None"),
        ("HashMap<String, f64>", False, "Dict[str, float]"),
        ("&str", True, "str"),
        ("SomethingUnknown<T>", True, "Any"),
    ],
)
def test_rust_types_map_to_annotations(rust, arg, py):
    assert gen.rust_to_py(rust, gen.RustSource(), arg) == py


def test_signatures_from_rust_source_with_attributes_and_doc_comments_between():
    text = '''
#[pyclass(module = "m", name = "Thing", frozen)]
pub struct PyThing {}

#[pymethods]
impl PyThing {
    /// Open it.
    #[new]
    /// More words about opening.
    #[pyo3(signature = (root, n=3, tags=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(root: PathBuf, n: u32, tags: Option<Vec<String>>) -> PyResult<Self> { todo!() }

    #[getter]
    fn size(&self) -> u64 { 0 }

    #[pyo3(name = "read")]
    fn read_rs<'py>(&self, py: Python<'py>, #[pyo3(from_py_with = f)] at: (u64, u64)) -> PyResult<Bound<'py, PyBytes>> { todo!() }
}

#[pyfunction]
#[pyo3(signature = (x, /))]
pub fn double(x: f64) -> f64 { x * 2.0 }
'''
    with tempfile.TemporaryDirectory() as d:
        Path(d, "thing.rs").write_text(text)
        src = gen.read_rust(Path(d))
    assert src.classes == {"PyThing": "Thing"}
    m = src.methods["Thing"]
    assert set(m) == {"__init__", "size", "read"}
    assert m["__init__"].params == {"root": "PathBuf", "n": "u32", "tags": "Option<Vec<String>>"}
    assert m["size"].getter and m["size"].ret == "u64"
    assert m["read"].params == {"at": "(u64, u64)"}
    assert gen.rust_to_py(m["read"].ret, src, arg=False) == "bytes"
    params, ret = gen.signature("($self, root, n=3, tags=None)", m["__init__"], src, "Thing")
    assert params == ["self", "root: StrPath", "n: int = 3", "tags: Optional[List[str]] = None"]
    params, ret = gen.signature("(x, /)", src.functions["double"], src, None)
    assert (params, ret) == (["x: float", "/"], "float")


def test_the_stub_covers_the_installed_module_and_is_valid_python(src):
    import tensorvault._tensorvault as ext

    text = gen.generate(ext, src)
    tree = ast.parse(text)
    top = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    public = {n for n in dir(ext) if not n.startswith("_") and callable(getattr(ext, n))}
    assert public <= top, public - top
    # Every pyfunction and constructor got its types from Rust (no bare Any parameters).
    store = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Store")
    init = next(f for f in store.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
    assert ast.unparse(init.args.args[1].annotation) == "StrPath"
