import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LOCAL_VECTORS = ROOT / "tests" / "data" / "waku-sds-0.0.8.json"


@pytest.fixture(scope="session")
def waku_vectors() -> dict:
    """The @waku/sds 0.0.8 reference vectors (copied into tests/data so a clone is self-contained)."""
    return json.loads(LOCAL_VECTORS.read_text())
