"""Target kits: one folder per target (tool schemas, implementations, world)."""
