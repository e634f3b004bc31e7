//! Checking runs against a branch: the use case behind `plait check` and the git hooks.
