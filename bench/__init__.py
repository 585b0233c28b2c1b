"""Benchmarks on the sandbox (`make bench`; README, "Benchmarks"). Not part of `make test`."""
