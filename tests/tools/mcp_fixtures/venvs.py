"""Build (once) and find a venv holding one MCP server package from PyPI.

Each server gets its own venv, so its pins never fight loopwright's own, and is launched by the
absolute path of its console script. Venvs are cached under ``$XDG_CACHE_HOME`` (or the real home's
``.cache``, whatever ``HOME`` the tests set) in ``loopwright-tests/mcp/<package>-<version>``. A build
runs under a file lock (concurrent test runs wait for each other) and marks the venv complete only at
the end, so an interrupted build is thrown away and redone, never trusted.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

SERVERS: dict[str, str] = {
    "mcp-server-time": "2026.10.19",
    "mcp-server-git": "2026.10.19",
}
"""Package -> pinned version (the cache key)."""

_MCP_PIN = "mcp>=2.3,<3"
_PIP_TIMEOUT = 900.0
_ATTEMPTS = 3


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(pwd.getpwuid(os.getuid()).pw_dir, ".cache")
    return Path(base) / "loopwright-tests" / "mcp"


def server_executable(package: str) -> Path:
    """The absolute path of ``package``'s console script, building its venv first if needed."""
    version = SERVERS[package]
    home = cache_root() / f"{package}-{version}"
    executable = home / "bin" / package
    marker = home / ".complete"
    if marker.exists() and executable.exists():
        return executable
    home.parent.mkdir(parents=True, exist_ok=True)
    with open(home.parent / f".{package}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run may be building it right now
        errors: list[str] = []
        for _ in range(_ATTEMPTS):
            if marker.exists() and executable.exists():
                return executable
            shutil.rmtree(home, ignore_errors=True)
            try:
                _build(home, package, version)
            except (subprocess.SubprocessError, OSError) as exc:
                detail = getattr(exc, "stderr", None) or b""
                errors.append(f"{exc} {detail.decode(errors='replace')[-500:]}".strip())
        raise RuntimeError(f"could not build a venv for {package}=={version}: " + " | ".join(errors))


def _build(folder: Path, package: str, version: str) -> None:
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, timeout=300, capture_output=True)
    pip = [str(folder / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, f"{package}=={version}", _MCP_PIN], check=True, timeout=_PIP_TIMEOUT, capture_output=True
    )
    (folder / ".complete").write_text(f"{package}=={version}\n", encoding="utf-8")
