"""The store's contract (`store.interface.Store`), run against every engine the registry
(`store.open`) knows: written against the interface only, so a second engine passes it or
shows where it breaks a promise. Each engine's test hooks (where a store goes, how to play
an attacker with access to it) are its entry in `backends.py`."""
