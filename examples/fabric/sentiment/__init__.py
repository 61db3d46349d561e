"""A toy sentiment model, shipped with each run (examples/fabric)."""
