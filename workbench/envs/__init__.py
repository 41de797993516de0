"""Environments: the protocol (`base.Env`, the one-turn `base.TaskEnv`), an adapter for TRL's
`environment_factory` classes (`trl`), and the built-in multi-turn tasks with exact verifiers (`calculator`,
`search`, `gridworld`, `keydoor`, `screen`), registered by name with every other task (`registry.get("env",
"calculator")`, built by `workbench.tasks.get_task("calculator")`). The package imports none of its modules."""
