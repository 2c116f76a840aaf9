"""Self-contained stand-ins for the controller's external systems (for tests, benches, demos)."""
