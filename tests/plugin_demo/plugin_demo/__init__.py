"""A third-party agentdesign plugin for the tests: one workflow, one benchmark, one strategy.

It touches none of agentdesign's files; the entry points in plugin_demo-0.1.dist-info (what
`pip install` of its pyproject.toml would write) are all that make agentdesign find it.
"""
