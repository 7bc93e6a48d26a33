"""The distribution name (ADR 0005): installed as ``synfire-mining``, imported as ``synfire``,
and a warning when the package index's other ``synfire`` is installed next to it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

import synfire
from synfire import _distribution

ROOT = Path(__file__).resolve().parents[2]


def test_installed_as_synfire_mining():
    dist = metadata.distribution("synfire-mining")
    assert dist.version == synfire.__version__
    assert dist.metadata["Name"].lower().replace("_", "-") == "synfire-mining"
    assert dist.metadata["Summary"].startswith("Frequent serial episodes in spike trains")
    # No distribution named `synfire` next to it (the other project's, or this one's old name).
    with pytest.raises(metadata.PackageNotFoundError):
        metadata.distribution("synfire")


def test_pyproject_names_the_distribution():
    text = (ROOT / "pyproject.toml").read_text()
    assert f'name = "{_distribution.DISTRIBUTION}"' in text


def test_no_clash_warning_in_this_environment():
    assert _distribution.check_clash() is None


def test_other_synfire_distribution_is_warned_about(tmp_path):
    # The other project's metadata, as its wheel installs it (synfire 0.0.2 on the index).
    info = tmp_path / "synfire-0.0.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.4\nName: synfire\nVersion: 0.0.2\n"
        "Summary: Python SDK and CLI for the Synfire Model Registry\n")
    code = textwrap.dedent(f"""
        import sys, warnings
        sys.path.insert(0, {str(tmp_path)!r})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import synfire
        texts = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
        print("\\n".join(texts))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert "'synfire' (0.0.2: Python SDK and CLI for the Synfire Model Registry)" in out.stdout
    assert "pip uninstall synfire" in out.stdout
    assert "pip install --force-reinstall synfire-mining" in out.stdout
