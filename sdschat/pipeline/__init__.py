"""The data pipeline on Spark: reliability reports and parameter sweeps.

* ``sdschat report`` -- :mod:`.report`: a PySpark job over simulation output
  directories and participant databases (:mod:`.inputs`), SQL reductions in
  :mod:`.queries`, metric definitions in :mod:`.metrics`, plots in :mod:`.plots`.
  Its module docstring documents embedded, ``--master`` and spark-submit use.
* ``sdschat sweep`` -- :mod:`.sweep`: a TOML grid of scenarios, one Spark task
  per simulation (example: ``grids/example.toml``).

Imports :mod:`sdschat.sim` and :mod:`sdschat.store` (read-only); the commands
live in :mod:`sdschat.cli.pipeline`.
"""
