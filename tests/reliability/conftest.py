"""Reliability and security tests: real brokers, real processes, real SQLite files.

The drivers of the long runs live in tests/support (chaos_bots.py, crash_loop.py, broker_faults.py,
fuzz_frames.py) and run there at full size as slow tests (tests/harness, tests/fuzz: ``pytest -m slow``); these
tests run the same code with short settings in the default run, so the long runs cannot rot. bench/kit holds what
they share with the benches (mosquitto that can be killed and restarted, `sdschat bot` processes, readers of the
databases).
"""
