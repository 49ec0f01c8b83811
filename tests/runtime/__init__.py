"""The runtimes (``runtime/``): Docker engines, remote and several, Swarm, Podman, the local
runtime, kills and faults.
"""
