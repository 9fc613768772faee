"""The model boundary: litellm, the embedded in-process provider, the response cache and the
per-task call trace. Internal to the components layer: its public names are exported by
`agentdesign.components`. The export copies these modules into an exported agent's runtime."""
