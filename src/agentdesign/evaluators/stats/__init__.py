"""Statistics of scores: intervals that hold at small n, paired comparisons, selection overfit,
and the least gain a comparison could show. Its public names are exported by
`agentdesign.evaluators`."""
