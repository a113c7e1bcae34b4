# SPDX-License-Identifier: MIT
"""`pip install ./python` works offline (Debian's setuptools, no build isolation)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from conftest import PKG


def test_pip_install_offline(tmp):
    for mod in ("pip", "setuptools"):
        if subprocess.run([sys.executable, "-c", f"import {mod}"], capture_output=True).returncode:
            pytest.skip(f"no {mod} for {sys.executable}")
    src = os.path.join(tmp, "src")  # a copy: the build writes next to its sources
    shutil.copytree(PKG, src, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    target = os.path.join(tmp, "site")
    r = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-deps",
         "--no-index", "--no-cache-dir", "--disable-pip-version-check", "--target", target, src],
        capture_output=True, text=True, timeout=240,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert os.path.exists(os.path.join(target, "vigil", "py.typed"))
    env = dict(os.environ, PYTHONPATH=target)
    r = subprocess.run(
        [sys.executable, "-c", "import vigil, sys; print(vigil.__file__); print(vigil.HeartbeatTable)"],
        capture_output=True, text=True, env=env, cwd=tmp, timeout=60,
    )
    assert r.returncode == 0 and r.stdout.startswith(target), r.stdout + r.stderr
