# SPDX-License-Identifier: MIT
"""JAX, unmodified: GIB GiB of live arrays, then a jitted training step of a small MLP.

The arrays are uint32 (exact checksums: wrapping sums compare bit for bit);
the MLP (3 layers of WIDTH, synthetic regression data from a fixed key) is
trained STEPS steps of SGD and its losses are reported.  The allocator is
whatever XLA_PYTHON_CLIENT_* in the environment choose (frameworks.sh sets
them per mode).  Prints one RESULT line (common.py).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--gib", type=float, default=8.0, help="GiB of live arrays")
ap.add_argument("--steps", type=int, default=20)
ap.add_argument("--width", type=int, default=1024)
args = ap.parse_args()

jax = common.need("jax")
jnp = common.need("jax.numpy")


def main():
    if not any(d.platform == "gpu" for d in jax.devices()):
        print("SKIP: JAX sees no GPU")
        sys.exit(common.SKIP)
    per = 1 << 28  # 1 GiB of uint32
    n = max(1, int(args.gib))
    arrays, sums = [], []
    for i in range(n):
        a = (jnp.arange(per, dtype=jnp.uint32) * jnp.uint32(2 * i + 1)) ^ jnp.uint32(0x9E3779B9 * (i + 1) & 0xFFFFFFFF)
        a.block_until_ready()
        arrays.append(a)
    for a in arrays:  # every array still live: the whole GIB is held at once
        sums.append(int(jnp.sum(a, dtype=jnp.uint32)))

    key = jax.random.PRNGKey(0)
    k1, k2, k3, kx, kw = jax.random.split(key, 5)
    w = args.width
    params = [jax.random.normal(k, (i, o), jnp.float32) * (1.0 / i) ** 0.5
              for k, (i, o) in zip((k1, k2, k3), ((w, w), (w, w), (w, 1)))]
    x = jax.random.normal(kx, (4096, w), jnp.float32)
    y = jnp.sin(x @ jax.random.normal(kw, (w, 1), jnp.float32) * 0.1)

    def loss(ps, x, y):
        h = x
        for p in ps[:-1]:
            h = jax.nn.relu(h @ p)
        return jnp.mean((h @ ps[-1] - y) ** 2)

    @jax.jit
    def step(ps, x, y):
        l, g = jax.value_and_grad(loss)(ps, x, y)
        return [p - 0.05 * gp for p, gp in zip(ps, g)], l

    losses = []
    for _ in range(args.steps):
        params, l = step(params, x, y)
        losses.append(float(l))
    del arrays
    return {"sums": sums, "losses": losses[::5] + [losses[-1]]}


common.run(main)
