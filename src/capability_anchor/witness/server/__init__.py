"""A C2SP tlog-witness server (`capability-anchor witness`): it cosigns the checkpoints of any
C2SP log it is configured for. `protocol`: the `add-checkpoint` checks and one witness; `app`: its
HTTP service. May import the kernel, the store's witness contract, `metrics/` and `web/`."""
