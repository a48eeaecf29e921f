"""Imported only by the body workers' forkserver, as a preload (`api/bodies.py`): it ties
the forkserver to the process that started it, which its own "alive" pipe does not (the
body workers hold it too). Importing it anywhere else would tie that process to its parent.
"""

from capability_anchor.parentdeath import die_with_parent

die_with_parent()
