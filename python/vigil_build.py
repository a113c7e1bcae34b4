# SPDX-License-Identifier: MIT
"""The package's build backend (PEP 517, PEP 660), in the tree: nothing to
download and nothing to have installed but Python itself.

`vigil` is pure Python (cffi in ABI mode: no compiler at install time), so
its wheel is a zip of vigil/ and the metadata pyproject.toml's [project]
table gives. pip's usual backend, setuptools, needs the `wheel` package
for a wheel as well (setuptools before 70.1), which a python3 of pyenv's
or python.org's lacks: `pip install ./python` stopped at "invalid command
'bdist_wheel'", and fetching them needs the network. Here pip's isolated
build installs nothing (requires = []), so `python3 -m pip install
./python` works with any python3 that has pip, offline; Debian's pybuild
(python3-build) builds through the same hooks.
"""
import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "vigil"
# Reproducible archives: every entry dated as SOURCE_DATE_EPOCH says, or 1980.
EPOCH = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))


def _project() -> Dict[str, Any]:
    """pyproject.toml's [project] table (tomllib from Python 3.11; before,
    the subset of TOML this file is written in: strings, arrays of strings,
    inline tables of strings, and [project.*] sub-tables)."""
    with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
        raw = f.read()
    try:
        import tomllib
    except ImportError:
        return _small_toml(raw.decode("utf-8"))["project"]
    return tomllib.loads(raw.decode("utf-8"))["project"]


def _small_toml(text: str) -> Dict[str, Any]:
    doc: Dict[str, Any] = {}
    table = doc
    key, items = None, None
    for line in text.splitlines():
        line = line.split(" #")[0].strip()
        if not line or line.startswith("#"):
            continue
        if items is not None:  # inside a multi-line array
            items.extend(re.findall(r'"((?:[^"\\]|\\.)*)"', line))
            if line.endswith("]"):
                table[key], items = items, None
            continue
        header = re.fullmatch(r"\[([\w.-]+)\]", line)
        if header:
            table = doc
            for part in header.group(1).split("."):
                table = table.setdefault(part, {})
            continue
        key, value = (s.strip() for s in line.split("=", 1))
        key = key.strip('"')
        if value.startswith("["):
            found = re.findall(r'"((?:[^"\\]|\\.)*)"', value)
            if value.endswith("]"):
                table[key] = found
            else:
                items = found
        elif value.startswith("{"):
            table[key] = dict(re.findall(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"', value))
        else:
            table[key] = value.strip('"')
    return doc


def _dist(project: Dict[str, Any]) -> str:
    return f"{project['name']}-{project['version']}"


def _metadata(project: Dict[str, Any]) -> str:
    """The core metadata (PKG-INFO, METADATA), version 2.1."""
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project.get('description', '')}",
    ]
    lic = project.get("license", {})
    if isinstance(lic, dict) and lic.get("text"):
        lines.append(f"License: {lic['text']}")
    if project.get("requires-python"):
        lines.append(f"Requires-Python: {project['requires-python']}")
    lines += [f"Classifier: {c}" for c in project.get("classifiers", [])]
    lines += [f"Requires-Dist: {d}" for d in project.get("dependencies", [])]
    for extra, deps in sorted(project.get("optional-dependencies", {}).items()):
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {d}; extra == "{extra}"' for d in deps]
    readme = project.get("readme")
    body = ""
    if readme:
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(HERE, readme), encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _license() -> str:
    """The license's text on disk: the sdist's own copy, else the
    repository's LICENSE (the package lives in its python/ directory)."""
    for path in (os.path.join(HERE, "LICENSE"), os.path.join(HERE, os.pardir, "LICENSE")):
        if os.path.isfile(path):
            return path
    raise FileNotFoundError("LICENSE: neither in the package's directory nor in the repository above it")


def _sources() -> List[Tuple[str, str]]:
    """(path in the archive, path on disk) of the package's files: its .py
    files and py.typed, sorted, no caches."""
    out = []
    root = os.path.join(HERE, PACKAGE)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py") or name == "py.typed":
                full = os.path.join(dirpath, name)
                out.append((os.path.relpath(full, HERE).replace(os.sep, "/"), full))
    return out


class _Wheel:
    """A wheel being written: each entry hashed for RECORD as it goes in."""

    def __init__(self, path: str) -> None:
        self.zip = zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED)
        self.record: List[str] = []

    def _entry(self, name: str, data: bytes) -> None:
        info = zipfile.ZipInfo(name, time.gmtime(max(EPOCH, 315532800))[:6])
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)

    def add(self, name: str, data: bytes) -> None:
        self._entry(name, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.record.append(f"{name},sha256={digest},{len(data)}")

    def close(self, dist_info: str) -> None:
        """RECORD last: every entry's hash, and itself unhashed."""
        self.record.append(f"{dist_info}/RECORD,,")
        self._entry(f"{dist_info}/RECORD", ("\n".join(self.record) + "\n").encode("utf-8"))
        self.zip.close()


def _write_metadata(directory: str, project: Dict[str, Any]) -> str:
    dist_info = _dist(project) + ".dist-info"
    os.makedirs(os.path.join(directory, dist_info), exist_ok=True)
    with open(os.path.join(directory, dist_info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata(project))
    with open(os.path.join(directory, dist_info, "WHEEL"), "w", encoding="utf-8") as f:
        f.write(_wheel_file())
    return dist_info


def _wheel_file() -> str:
    return "Wheel-Version: 1.0\nGenerator: vigil_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _build(wheel_directory: str, editable: bool) -> str:
    project = _project()
    dist_info = _dist(project) + ".dist-info"
    name = f"{_dist(project)}-py3-none-any.whl"
    wheel = _Wheel(os.path.join(wheel_directory, name))
    if editable:
        # The source directory on sys.path: the package is used where it is.
        wheel.add(f"__editable__.{project['name']}.pth", (HERE + "\n").encode())
    else:
        for arcname, full in _sources():
            with open(full, "rb") as f:
                wheel.add(arcname, f.read())
    wheel.add(f"{dist_info}/METADATA", _metadata(project).encode("utf-8"))
    wheel.add(f"{dist_info}/WHEEL", _wheel_file().encode())
    with open(_license(), "rb") as f:
        wheel.add(f"{dist_info}/licenses/LICENSE", f.read())  # where PEP 639 puts it
    wheel.close(dist_info)
    return name


# ---- PEP 517 ------------------------------------------------------------


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str,
                                     config_settings: Optional[Dict[str, Any]] = None) -> str:
    return _write_metadata(metadata_directory, _project())


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    return _build(wheel_directory, editable=False)


def build_editable(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                   metadata_directory: Optional[str] = None) -> str:
    return _build(wheel_directory, editable=True)


def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    """The package's source: pyproject.toml, this backend, the README, the
    license, the package and its tests, with PKG-INFO."""
    project = _project()
    base = _dist(project)
    name = f"{base}.tar.gz"
    files = [("pyproject.toml", os.path.join(HERE, "pyproject.toml")),
             ("vigil_build.py", os.path.join(HERE, "vigil_build.py")),
             ("README.md", os.path.join(HERE, "README.md")),
             ("LICENSE", _license())] + _sources()
    tests = os.path.join(HERE, "tests")
    for entry in sorted(os.listdir(tests)) if os.path.isdir(tests) else []:
        if entry.endswith((".py", ".c", ".sh")):
            files.append((f"tests/{entry}", os.path.join(tests, entry)))
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        def add(arcname: str, data: bytes) -> None:
            info = tarfile.TarInfo(f"{base}/{arcname}")
            info.size, info.mtime, info.mode = len(data), EPOCH, 0o644
            tar.addfile(info, io.BytesIO(data))

        for arcname, full in files:
            with open(full, "rb") as f:
                add(arcname, f.read())
        add("PKG-INFO", _metadata(project).encode("utf-8"))
    return name
