"""Whether the loaded BLAS gives a float32 product's elements the same bits however the product
is cut and on however many threads it runs.

The convolution parts that one image is worked in on several threads (bands of output rows,
blocks of filters, a product left whole on the BLAS's threads) give the bits of one thread only
where it does. OpenBLAS's SkylakeX kernels (AVX-512) do; its Haswell kernels, which it runs
where there is no AVX-512 (AMD Zen 2 and 3 among others), do not: there an element's last bits
depend on where its row and column fall in the kernel's tiles, which a cut or a thread count
moves. Tests of those parts assert the bits where
the BLAS keeps them and a float32 rounding's distance elsewhere; the parts' own plumbing is
tested bitwise on every machine with sums that are exact in any order.
"""
import functools

import numpy as np

from trainer_cli.ndarray import host_threads


@functools.lru_cache(maxsize=None)
def cuts_keep_bits() -> bool:
    libs = host_threads._blas()
    counts = [(lib, lib.num_threads) for lib in libs]
    rng = np.random.default_rng(0)
    try:
        for m, k, n in ((64, 147, 3136), (256, 64, 256), (512, 4608, 49)):
            a = rng.standard_normal((m, k)).astype(np.float32)
            b = rng.standard_normal((k, n)).astype(np.float32)
            whole = {}
            for threads in (1, 2, 3):
                for lib in libs:
                    lib.set_num_threads(threads)
                whole[threads] = a @ b
            rows = np.vstack([a[: m // 3] @ b, a[m // 3:] @ b])
            columns = np.hstack([a @ b[:, : n // 3], a @ b[:, n // 3:]])
            for other in (whole[2], whole[3], rows, columns):
                if not np.array_equal(other, whole[1]):
                    return False
        return True
    finally:
        for lib, count in counts:
            lib.set_num_threads(count)
