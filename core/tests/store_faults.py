"""A process that dies half-way through an upload to the store, for the tests that kill one.

`DIE_AFTER_TWO_UPLOADS` is the start of a `python -c` script: Django set up, then the store's
upload of a file wrapped so that the process SIGKILLs itself once two files are in the store
(and before the manifest, which goes last). The script goes on with what it publishes.
"""

DIE_AFTER_TWO_UPLOADS = """
import os, signal, sys
from pathlib import Path
import django
django.setup()
from core import store
backend = store._backend()
put, done = backend.fs.put_file, []
def put_then_die(*args, **kwargs):
    put(*args, **kwargs)
    done.append(args)
    if len(done) == 2:
        os.kill(os.getpid(), signal.SIGKILL)
backend.fs.put_file = put_then_die
"""
