"""End to end: simulations, scripts, documentation, README, benchmarks and their peers."""
