"""Route each task to the capability adapter it needs; serve and evaluate the routed agent."""
