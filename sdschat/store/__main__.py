"""``python -m sdschat.store sync-migrations``: regenerate the embedded copy of migrations/*.sql."""

import sys

from .migrate import main

if __name__ == "__main__":
    if sys.argv[1:] != ["sync-migrations"]:
        print("usage: python -m sdschat.store sync-migrations", file=sys.stderr)
        raise SystemExit(2)
    raise SystemExit(main())
