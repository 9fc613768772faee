"""Interactive benchmarks: episodes in simulated environments (TextWorldExpress, ScienceWorld),
scored by the environment. Their public names are exported by `agentdesign.evaluators`."""
