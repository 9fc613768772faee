"""Exporting an agent as a folder a person reads and ships: the agent file, its prompts, the
runtime copied from the components layer, and the command line the agent file calls. Its public
names are exported by `agentdesign.components`."""
