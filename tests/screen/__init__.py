"""The screen model (``screen/``): alone, against xterm.js, and inside a running server."""
