"""The built-in components: the workflows, the functional components of each slot (planning,
reasoning, memory, tools, reflection) and workflows written as code. Internal to the components
layer: `agentdesign.components` exports their public names, and registers them all first, in one
order. The export copies these modules into an exported agent's runtime."""
