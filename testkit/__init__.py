"""What the test suite and the benchmarks share: simulators of the exporters and of the SaaS alertd talks
to (written to their documented contracts), runners of the real services, webhook and rule builders.
Pytest's own fixtures stay in tests/support; bench/ imports alertd, bench and this package only."""
