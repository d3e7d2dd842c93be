"""mrtr's benchmarks: `make bench` (docs/performance.md). Not part of the test suite."""
