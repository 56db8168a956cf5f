"""``sdschat/cli/submit.py`` is run as a file by spark-submit, which puts ``sdschat/cli/`` first on
``sys.path``: a module there named like a standard-library one would be imported in its place."""

import pathlib
import sys

import sdschat.cli


def test_no_cli_module_is_named_like_a_standard_library_module():
    folder = pathlib.Path(sdschat.cli.__file__).parent
    shadowing = sorted(p.name for p in folder.glob("*.py") if p.stem in sys.stdlib_module_names)
    assert shadowing == []
