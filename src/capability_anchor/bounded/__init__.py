"""Bounded I/O: what other parties hand us, read under a deadline and a size cap.

`read`: files, stdin and HTTP bodies an auditor is handed (`verify-proof`, `monitor`, the
TSA CA files); `post`: one HTTP POST under one deadline and a reply cap (the TSA and
witness clients). Owns nothing stateful; imports only the kernel (`errors`, `encoding`) and,
lazily, httpx, so the verifying path may use `read` without loading an HTTP client.
"""
