"""``pip install .`` into a new virtual environment, from a copy of the source tree, like a user's install.

The copy holds what the package is built from (pyproject.toml, README.md, alertd/, rules/): no tests, no
.venv, nothing that would let the installed alertd find files of a repository by accident. The build is a
real, non-editable wheel build with setuptools (its wheel is downloaded from PyPI once and cached); the
runtime dependencies are the test environment's own, made visible to the new environment by a .pth line
(the editable alertd of that environment is not, since only site directories run .pth files).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CACHE = Path.home() / ".cache" / "alertd-test" / "wheels"
BUILT_FROM = ("pyproject.toml", "README.md", "alertd", "rules")
SETUPTOOLS = "setuptools>=77"  # pyproject's build-system requires


class InstallUnavailable(RuntimeError):
    pass


def _setuptools_wheel() -> Path:
    found = sorted(CACHE.glob("setuptools-*.whl"))
    if not found:
        CACHE.mkdir(parents=True, exist_ok=True)
        # Into a private directory, then renamed: a concurrent run never sees half a wheel.
        with tempfile.TemporaryDirectory(dir=CACHE) as part:
            done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", part,
                                   SETUPTOOLS], capture_output=True, text=True, timeout=300)
            for wheel in Path(part).glob("setuptools-*.whl"):
                os.replace(wheel, CACHE / wheel.name)
        found = sorted(CACHE.glob("setuptools-*.whl"))
        if done.returncode or not found:
            raise InstallUnavailable(f"could not download {SETUPTOOLS}: {done.stderr[-500:]}")
    return found[-1]


def copy_source(dest: Path) -> Path:
    dest.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in BUILT_FROM:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, symlinks=True, ignore=ignore)
        else:
            shutil.copy2(src, dest / name)
    return dest


def install(tmp: Path) -> Path:
    """A new venv with alertd installed from a copy of this tree; returns the venv's bin directory."""
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    bindir = venv / "bin"
    pip = [str(bindir / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "--no-index", str(_setuptools_wheel())], check=True, timeout=300)
    site = subprocess.run([str(bindir / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    src = copy_source(tmp / "src")
    subprocess.run([*pip, "install", "--no-index", "--no-deps", "--no-build-isolation", str(src)], check=True,
                   timeout=600, cwd=tmp)
    shutil.rmtree(src)  # nothing of the source is left to be found
    return bindir
