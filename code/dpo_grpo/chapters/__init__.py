"""Chapter experiments: the computations a chapter runs beyond the core formulas (the
seven-step update, pitfalls, cost model, paper numbers, TRL parity tables, reward
hacking, the checks script). Builds on every lower layer."""
