"""sdschat.transport imports nothing else from sdschat (DESIGN.md layering)."""

import ast
import sys
from pathlib import Path

import sdschat.transport

ALLOWED_THIRD_PARTY = {"paho", "amqtt"}


def test_transport_imports_only_stdlib_paho_amqtt_and_itself() -> None:
    package_dir = Path(sdschat.transport.__file__).parent
    sources = sorted(package_dir.glob("*.py"))
    assert sources
    for source in sources:
        tree = ast.parse(source.read_text(), str(source))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: must stay inside sdschat.transport
                    assert node.level == 1, (source.name, node.module)
                    continue
                assert node.module is not None
                roots = [node.module.split(".")[0]]
            else:
                continue
            for root in roots:
                assert root in ALLOWED_THIRD_PARTY or root in sys.stdlib_module_names, (source.name, root)
