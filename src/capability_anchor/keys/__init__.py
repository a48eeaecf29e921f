"""Ed25519 keys (PyNaCl does the cryptography): RFC 7638 key IDs, the trusted `KeySet` and signed
statements of trust (`public`, `trust`), the private key file (`private`: mode 0600 at
creation, refused when others may read it). Trust comes only from a `KeySet` the caller built. On
the verifying path: may import only the kernel (`errors`, `encoding`, `strictjson`, `files`, `jws`,
`head`); never the store, the log or HTTP."""

from .private import SigningKey, create_key_file, load_key_file
from .public import ED25519_KEY_SIZE, ED25519_SIGNATURE_SIZE, KeySet, PublicKey, thumbprint

__all__ = [
    "ED25519_KEY_SIZE",
    "ED25519_SIGNATURE_SIZE",
    "KeySet",
    "PublicKey",
    "SigningKey",
    "create_key_file",
    "load_key_file",
    "thumbprint",
]
