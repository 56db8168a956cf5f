"""Regenerate ``sds_pb2.py`` from ``proto/sds.proto`` (needs the pinned grpcio-tools dev dependency).

python -m sdschat.sds.protogen [OUT_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parents[2] / "proto"
OUT_DIR = Path(__file__).resolve().parent


def generate(out_dir: Path = OUT_DIR) -> Path:
    from grpc_tools import protoc  # type: ignore[import-untyped]  # grpcio-tools ships no type information

    out_dir.mkdir(parents=True, exist_ok=True)
    code = protoc.main(["protoc", f"-I{PROTO_DIR}", f"--python_out={out_dir}", str(PROTO_DIR / "sds.proto")])
    if code != 0:
        raise RuntimeError(f"protoc failed with exit code {code}")
    return out_dir / "sds_pb2.py"


if __name__ == "__main__":
    print(generate(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT_DIR))
