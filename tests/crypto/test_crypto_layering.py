"""sdschat.crypto imports nothing else from sdschat (DESIGN.md layering)."""

import ast
from pathlib import Path

import sdschat.crypto

ALLOWED_THIRD_PARTY = {"cryptography"}


def test_crypto_imports_only_stdlib_cryptography_and_itself():
    import sys

    package_dir = Path(sdschat.crypto.__file__).parent
    for source in package_dir.glob("*.py"):
        tree = ast.parse(source.read_text(), str(source))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: must stay inside sdschat.crypto
                    assert node.level == 1, (source.name, node.module)
                    continue
                roots = [node.module.split(".")[0]]
            else:
                continue
            for root in roots:
                assert root in ALLOWED_THIRD_PARTY or root in sys.stdlib_module_names, (source.name, root)
