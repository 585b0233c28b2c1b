"""Benchmarks on the sandbox (`make bench`; bench/README.md). Not part of `make test`."""
