"""Use cases of the change flow, one job per module (see docs/architecture.md); no re-exports."""
