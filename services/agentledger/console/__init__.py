"""The operator console: server-rendered pages over the views the CLI reads."""
