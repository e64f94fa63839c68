"""The loopback page of `kint authorize page`: a one-shot server (server.py, each request
answered in handler.py) and the files it serves (static/: the page, its script and style,
and a pinned copy of the Base Account SDK with its licence). Package data, so a wheel
carries them."""
