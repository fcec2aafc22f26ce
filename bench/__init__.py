"""x64guard's benchmarks (`make bench`, i.e. `python -m bench.run` from the repository
root): figures, not tests. One module per section; bench/run.py runs them and writes
bench-out/results.json."""
