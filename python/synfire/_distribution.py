"""The distribution this package is installed as, and a check for a clash of import names.

The package is distributed as ``synfire-mining`` and imported as ``synfire``
(``docs/adr/0005-distribution-name.md``). The package index's ``synfire`` is another project
(a model-registry SDK) that also installs an import package ``synfire`` and a ``synfire``
command: with both installed in one environment, whichever was installed last has overwritten
the other's ``synfire/__init__.py``, and uninstalling either removes files the other needs.
pip does not detect this, so :func:`check_clash` does when the package is imported.
"""

from __future__ import annotations

import warnings
from importlib import metadata

#: The distribution name on the package index (``pyproject.toml``'s ``[project] name``).
DISTRIBUTION = "synfire-mining"
#: The name of the other project's distribution that installs the same import package.
CLASHING = "synfire"


def check_clash() -> str | None:
    """Warns (``UserWarning``) when a distribution named ``synfire`` is installed too.

    Returns the warning's text, or ``None`` when there is no clash. Looks only at installed
    distribution metadata (``importlib.metadata``, no network, a few milliseconds). The
    message names the other distribution's version and summary and the two commands that
    repair the environment.
    """
    try:
        other = metadata.distribution(CLASHING)
    except metadata.PackageNotFoundError:
        return None
    summary = (other.metadata.get_all("Summary") or ["no summary"])[0]
    text = (
        f"a distribution named {CLASHING!r} ({other.version}: {summary}) is installed next to "
        f"{DISTRIBUTION!r}, and both install the import package 'synfire', so one has "
        f"overwritten files of the other. Repair the environment with "
        f"`pip uninstall {CLASHING}` then `pip install --force-reinstall {DISTRIBUTION}` "
        f"(from a clone: `pip install --force-reinstall .`)."
    )
    warnings.warn(text, UserWarning, stacklevel=3)
    return text
