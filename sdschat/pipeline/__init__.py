"""The data pipeline on Spark: reliability reports and parameter sweeps.

* ``sdschat simulate`` -- :mod:`sdschat.sim` (CLI wiring in :mod:`.commands`).
* ``sdschat report`` -- :mod:`.report`: a PySpark job over simulation output
  directories and participant databases (:mod:`.inputs`), SQL reductions in
  :mod:`.queries`, metric definitions in :mod:`.metrics`, plots in :mod:`.plots`.
  Its module docstring documents embedded, ``--master`` and spark-submit use.
* ``sdschat sweep`` -- :mod:`.sweep`: a TOML grid of scenarios, one Spark task
  per simulation (example: ``grids/example.toml``).

Layering (DESIGN.md): imports :mod:`sdschat.sim` and :mod:`sdschat.store`
(read-only), and :class:`sdschat.cli.CliError` for one-line errors.
CLI hooks for the lead to register: :data:`.commands.COMMANDS`
(``simulate_configure``/``simulate_run``, ``report_*``, ``sweep_*``);
until then ``python -m sdschat.pipeline simulate|report|sweep`` runs them.
"""
