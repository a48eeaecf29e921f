"""Bounded I/O: what other parties hand us, read under a deadline and a size cap. `read`: the files,
stdin and HTTP bodies an auditor is handed; `post`: one POST with a deadline and a reply cap (TSA
and witness clients). Imports only the kernel and, lazily, httpx and urllib3."""
