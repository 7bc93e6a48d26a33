"""``python -m synfire.cluster batch ...``: what ``synfire batch`` runs (:func:`main`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
