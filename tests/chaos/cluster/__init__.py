"""Chaos tests on the cluster stack: one cluster (3 SASL_SSL brokers + Redis) per package."""
