"""The web edge: REST handlers, the terminal WebSocket, files, access and refusals
(``websocket.py``, ``api_handlers.py``, ``base.py``, ``files.py``).
"""
