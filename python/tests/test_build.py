# SPDX-License-Identifier: MIT
"""The package's own build backend (vigil_build.py): the wheel and the
sdist hold the package and metadata from pyproject.toml, RECORD's hashes
are right, and the TOML fallback (for a Python without tomllib) reads
pyproject.toml as tomllib does."""
from __future__ import annotations

import base64
import hashlib
import os
import sys
import tarfile
import zipfile

import pytest

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)
import vigil_build  # noqa: E402


def test_the_fallback_reads_pyproject_as_tomllib_does():
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
        raw = f.read()
    assert vigil_build._small_toml(raw.decode()) == tomllib.loads(raw.decode())


V = vigil_build._project()["version"]


def test_wheel(tmp):
    name = vigil_build.build_wheel(tmp)
    assert name == f"vigil-{V}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(tmp, name)) as z:
        names = z.namelist()
        assert "vigil/__init__.py" in names and "vigil/py.typed" in names
        assert not any("__pycache__" in n or n.startswith("tests/") or n == "vigil_build.py" for n in names)
        meta = z.read(f"vigil-{V}.dist-info/METADATA").decode()
        assert "Name: vigil" in meta and "Requires-Dist: cffi>=1.15" in meta
        assert 'Requires-Dist: pytest; extra == "test"' in meta and "License: MIT" in meta
        assert "Permission is hereby granted" in z.read(f"vigil-{V}.dist-info/licenses/LICENSE").decode()
        record = z.read(f"vigil-{V}.dist-info/RECORD").decode().splitlines()
        assert sorted(line.split(",")[0] for line in record) == sorted(names)
        for line in record:
            path, digest, size = line.split(",")
            if not digest:
                continue
            data = z.read(path)
            want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={want}" and int(size) == len(data), path


def test_editable_wheel_points_at_the_tree(tmp):
    with zipfile.ZipFile(os.path.join(tmp, vigil_build.build_editable(tmp))) as z:
        pth = [n for n in z.namelist() if n.endswith(".pth")]
        assert len(pth) == 1 and z.read(pth[0]).decode().strip() == HERE


def test_sdist(tmp):
    name = vigil_build.build_sdist(tmp)
    with tarfile.open(os.path.join(tmp, name)) as t:
        names = t.getnames()
    for need in ("pyproject.toml", "vigil_build.py", "README.md", "LICENSE", "PKG-INFO", "vigil/__init__.py"):
        assert f"vigil-{V}/{need}" in names, need


def test_a_wheel_built_from_the_sdist_carries_the_license(tmp):
    """The sdist stands alone: unpacked anywhere, its backend finds the
    license in it (not in a repository above it) and puts it in the wheel."""
    import importlib.util

    with tarfile.open(os.path.join(tmp, vigil_build.build_sdist(tmp))) as t:
        t.extractall(os.path.join(tmp, "src"))
    root = os.path.join(tmp, "src", f"vigil-{V}")
    spec = importlib.util.spec_from_file_location("vigil_build_from_sdist", os.path.join(root, "vigil_build.py"))
    backend = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(backend)
    assert backend._license() == os.path.join(root, "LICENSE")
    out = os.path.join(tmp, "out")
    os.mkdir(out)
    with zipfile.ZipFile(os.path.join(out, backend.build_wheel(out))) as z:
        assert "Permission is hereby granted" in z.read(f"vigil-{V}.dist-info/licenses/LICENSE").decode()
