"""Bursting past the cluster: a service on the lead that brings followers up elsewhere for burstable jobs.

plugin.py (the interface plugins implement), policy.py (when to burst, which plugin, when to tear down: pure),
discovery.py (plugins from the `miniclusters.burst_plugins` entry points), service.py (the loop: observe the
lead, decide, act through a plugin), plugins/ (`local`, `kubernetes`).
"""
