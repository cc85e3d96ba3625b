"""Observability shared by the services: Prometheus metrics and OpenTelemetry spans."""
