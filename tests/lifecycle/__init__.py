"""A server's life: sessions that end, SIGTERM, a crash and the hand-over to a successor
(``handover/``).
"""
