"""Benchmark scripts (``python benchmarks/NAME.py``); importable for the tests that call their functions."""
