"""Helpers of the tests (no tests here): clients, servers, engines, a Hub, a swarm, the reference
terminal.
"""
