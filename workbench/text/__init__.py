"""Pure text and arithmetic helpers that the catalog layer (rewards) shares with the environments and tasks: the
syntax of tool calls (`tool_calls`), integer arithmetic as the calculator and countdown verify it (`arithmetic`),
and how a task packs what its verifier needs into an example's answer (`answers`). Standard library only: nothing
here imports from workbench, so a reward reads a task's format without importing the task."""
