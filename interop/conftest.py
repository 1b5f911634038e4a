"""Shared fixtures of the interop tests. scripts/test.sh runs them with
REBUCKET_BIN pointing at a freshly built binary; tests that need the binary
skip without it, so the pure cross-checks (test_hash_vectors.py) still run."""

import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def repo_root():
    return REPO


@pytest.fixture(scope="session")
def rebucket_bin():
    path = os.environ.get("REBUCKET_BIN")
    if not path:
        pytest.skip("REBUCKET_BIN is not set (scripts/test.sh sets it)")
    if not os.access(path, os.X_OK):
        pytest.fail(f"REBUCKET_BIN={path} is not an executable")
    return path


@pytest.fixture
def rebucket(rebucket_bin):
    """Run the binary: rebucket("inspect", dir, "--json") -> CompletedProcess.
    check=True by default; pass check=False to look at a failing exit code."""

    def run(*args, check=True):
        p = subprocess.run(
            [rebucket_bin, "--quiet", *map(str, args)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if check and p.returncode != 0:
            pytest.fail(f"rebucket {' '.join(map(str, args))}: exit {p.returncode}\n{p.stderr}")
        return p

    return run
