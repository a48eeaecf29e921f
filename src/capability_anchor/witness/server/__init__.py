"""A C2SP tlog-witness server (`capability-anchor witness`, issue #14): it cosigns the
checkpoints of any C2SP log it is configured for, once they are consistent with the last one
it cosigned.

`protocol`: the `add-checkpoint` body and its checks, pure; `service`: one witness (its
store and key) and the check-and-persist step; `app`: the HTTP service.

May import the kernel, the store's witness contract (through `store.open`), `metrics/` and
`api/`'s edge (body limits, errors); never the log, its read side or `witness.client`.
"""
