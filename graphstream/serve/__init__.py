"""graphstream serve: the dataset preprocessing service (specs/service.md, docs/service.md)."""
