"""Memory tasks."""
