"""Everything one tenant space owns, run in a process of its own (DESIGN §4).

`process` is the worker's loop (sockets, heartbeats, the request thread pool); `handlers`
maps each worker op to the function that serves it; `store` reads the space's Sibyl store.
"""
