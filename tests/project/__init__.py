"""The repository as a whole: documentation, imports, the one door, the demo, upstream reliance,
the benchmark's guard.
"""
