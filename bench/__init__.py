"""Benchmarks: each module is a command (`python bench/<name>.py`, `make bench-<name>`); a
package so that tests can drive a benchmark's simulated users (labeling/tests/test_faults.py)."""
