import sys
from pathlib import Path

# The naive RFC 9162 reference and other test helpers live beside the tests.
sys.path.insert(0, str(Path(__file__).parent))

# The RFC 3161 test TSA's fixtures (tsakit), for every test module without an import each.
from tsakit import (  # noqa: F401
    other_pki_ec,
    other_pki_rsa,
    pki_ec,
    pki_rsa,
    tsa_ec,
    tsa_rsa,
)
