"""Stop glibc from handing freed memory back to the OS after every training step.

A packed step allocates and frees tensors of tens of MB. By default glibc serves each from a
fresh mmap and unmaps it on free, so every step pays page faults on all its memory; measured here
this made a K=256 ViT step 1.6x and an evaluation 2x slower. Keeping freed memory in the heap
removes that cost. It changes nothing where the C library is not glibc.
"""

import ctypes
import ctypes.util

_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4


def keep_freed_memory() -> bool:
    """Ask glibc to serve large blocks from the heap and never trim it; True when it did."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))
