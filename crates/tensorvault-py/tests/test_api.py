"""The package surface: every public name documented, stubs and py.typed shipped."""

import inspect
import os

import tensorvault as tv


def test_every_public_name_has_a_docstring():
    missing = [n for n in tv.__all__ if n != "__version__" and not inspect.getdoc(getattr(tv, n))]
    assert missing == []
    for cls in (tv.CvcWriter, tv.BatchReader, tv.Registry, tv.MobiModel, tv.Store):
        for name, member in inspect.getmembers(cls):
            if not name.startswith("_") and callable(member):
                assert inspect.getdoc(member), f"{cls.__name__}.{name}"


def test_type_stubs_and_marker_are_installed():
    pkg = os.path.dirname(tv.__file__)
    assert os.path.exists(os.path.join(pkg, "py.typed"))
    assert os.path.exists(os.path.join(pkg, "_tensorvault.pyi"))


def test_exception_hierarchy():
    for cls in (tv.NotFoundError, tv.InvalidFormatError, tv.CorruptionError,
                tv.InvalidArgumentError, tv.UnsupportedError, tv.StorageError,
                tv.FrameworkNotAvailableError, tv.UnsupportedFormatError, tv.CapacityError):
        assert issubclass(cls, tv.TensorvaultError)
    assert issubclass(tv.NotFoundError, FileNotFoundError)
    assert issubclass(tv.CorruptionError, ValueError)
    assert tv.CorruptedChunkError is tv.CorruptionError
