"""The sandbox that runs model-written Python in a confined child process: the child's bootstrap,
its seccomp filter and namespaces, its work folder, and the request channel it calls the engine
through. Internal to the components layer: `agentdesign.components` exports its public names.
The export copies these modules, as they are, into an exported agent's runtime."""
