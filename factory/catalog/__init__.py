"""What the factory can build: target kits and capability archetypes."""
