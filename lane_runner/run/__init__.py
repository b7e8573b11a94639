"""One claimed task, from its lane state and worktree to an accepted result."""
