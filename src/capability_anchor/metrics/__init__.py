"""What the service measures (`/metrics`, Prometheus text through prometheus-client).

`defs`: every metric the processes count, made once per process (`make`); `service`: the
registry, the multiprocess folder, the state gauges and the exposition. The bottom layer:
imports only `errors` and `envvars`, so the store, the log and the HTTP edge may all count.
"""
