"""Make the shared helpers of the SDS engine tests importable (``import sds_helpers``)
under every pytest import mode (the project runs with ``--import-mode=importlib``)."""

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
