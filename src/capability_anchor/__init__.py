"""capability-anchor: a transparency log and Merkle anchor service for Capability Resolution.

The verifying kernel (`merkle`, `leaf`, `keys`, `jws`) is pure: it imports no server or
storage code, so auditors can load it quickly and on its own.
"""

__version__ = "0.1.0"
