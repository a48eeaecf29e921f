"""Ed25519 keys: RFC 7638 key IDs, the private key file, and the trusted public key set.

All cryptography is PyNaCl (libsodium); this module only moves bytes in and out of JWKs.

- `thumbprint(x)` is the RFC 7638 `kid` of an OKP Ed25519 public key. The RFC's canonical
  input for OKP keys is the JSON object of the required members `crv`, `kty`, `x` in
  lexicographic order with no whitespace; `x` is base64url, which never needs escaping,
  so the bytes are built directly and cannot drift with a JSON library's settings.
- `PublicKey` and `KeySet` validate when they are built: holding one means it is a
  well-formed Ed25519 key whose `kid` is its thumbprint, unless `thumbprint_kid` is False.
  Only `KeySet.from_jwks` makes such a key, for a verifier's trusted key set: Capability
  Resolution §8 says a kid SHOULD be the thumbprint, so another resolver's key set may name
  a key otherwise, and it is matched by the kid the set gives. Keys this project creates
  (`from_raw`, `from_x`, `SigningKey`) and loads for its own log (`require_thumbprints`)
  always have thumbprint kids.
- The private key file is a private OKP JWK. It is created with mode 0600 by `os.open`
  itself (never chmod-ed after the secret is on disk, which would leave a window where
  it is readable), never overwritten, and refused on load when group or others have any
  permission bit: a key that others could read must be assumed copied.

Trust comes only from a `KeySet` the caller built from files it chose; nothing in a token
or a document adds a key to it.

`public`: thumbprints, `PublicKey`, `KeySet`; `private`: `SigningKey` and the key file.

On the verifying path: may import only the kernel (`errors`, `encoding`, `strictjson`,
`files`, and `jws` and `head` for the signed statements of `trust` and `statements`);
never the store, the log, the service or an HTTP client.
"""

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
