"""Benchmarks for the dashboard (`make bench`); see bench/README.md."""
