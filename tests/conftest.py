import sys
from pathlib import Path

# The naive RFC 9162 reference and other test helpers live beside the tests.
sys.path.insert(0, str(Path(__file__).parent))
