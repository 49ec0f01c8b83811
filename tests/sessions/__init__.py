"""Sessions through the manager: the terminal contract, output, limits, sharing, recording, audit
and settings (``manager.py``, ``session.py``).
"""
