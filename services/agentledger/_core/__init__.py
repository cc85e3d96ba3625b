"""The private core every front end shares: writer, loader, effect flow, ports, keys, payloads.

Not public API: the SDK (:mod:`agentledger.worker`), the fleet, the reconciler and the
integrations import from here; agent authors import from :mod:`agentledger`.
"""
