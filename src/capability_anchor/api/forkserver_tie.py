"""Imported by the body workers' forkserver only, as one of its preloads (`api/bodies.py`):
the one hook multiprocessing gives for running code in the forkserver before it serves.

It ties the forkserver to the process that started it (`parentdeath.die_with_parent`). The
forkserver also leaves by itself once every process holding its "alive" pipe is gone, but
the body workers hold that pipe too: the kernel's signal does not wait for them. Importing
this module anywhere else would tie that process to its parent: nothing else imports it.
"""

from capability_anchor.parentdeath import die_with_parent

die_with_parent()
