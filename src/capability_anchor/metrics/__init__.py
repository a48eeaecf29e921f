"""What the service measures (`/metrics`, Prometheus text through prometheus-client).

`defs`: every metric the processes count, made once per process (`make`); `service`: the
registry, the store collector and the exposition. Imports the read side and the store's
interface for the collector; the log, the API and the witness server import it.
"""
