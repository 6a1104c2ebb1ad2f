"""xent_jax against optax and jax.nn in float64, on JAX's cpu platform (the
cpu backend's own code; a GPU run sets XENT_JAX_PLATFORMS=cuda): values and gradients (jax.grad through the
custom_vjp) for integer and soft labels, every dtype JAX has, the options,
the hard cases (every row ignored, logits of +-1e8, one class, the class
axis in place), abstract evaluation, jit, vmap, and a jitted training step
beside optax's.

Tolerances: float64 1e-10 relative (two summation orders); float32 2e-5;
float16 and bfloat16 the output's rounding to its dtype (4e-3, 2.5e-2),
the inputs the oracle sees being the same rounded values."""

import functools
import hashlib
import os
import subprocess
import sys
import unittest

# What the test installs where this Python has no JAX (CI's Debian Python):
# a venv of its own, from PyPI, cached across runs.
PINS = ["jax==0.10.2", "jaxlib==0.10.2", "optax==0.2.8"]


def _bootstrap():
    """Runs the test under a Python with jax and optax: this one, or a venv
    the test makes (pip from PyPI), or says SKIPPED with the reason."""
    try:
        import jax  # noqa: F401
        return
    except ImportError as e:
        missing = str(e)
    if os.environ.get("XENT_JAX_TEST_CHILD"):
        print(f"SKIPPED: the test's venv has no JAX ({missing})")
        sys.exit(0)
    root = os.environ.get("XENT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "xent")
    venv = os.path.join(root, "jax-test-" + hashlib.sha256(" ".join(PINS).encode()).hexdigest()[:12])
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(os.path.join(venv, "ready")):
        try:
            subprocess.run([sys.executable, "-m", "venv", "--clear", venv], check=True, capture_output=True)
            subprocess.run([python, "-m", "pip", "install", "--quiet", *PINS], check=True, capture_output=True,
                           timeout=900)
        except (subprocess.SubprocessError, OSError) as e:
            err = getattr(e, "stderr", b"") or b""
            print(f"SKIPPED: JAX could not be installed into {venv} ({e}; "
                  f"{err.decode(errors='replace').strip().splitlines()[-1:] or ''})")
            sys.exit(0)
        open(os.path.join(venv, "ready"), "w").close()
    env = dict(os.environ, XENT_JAX_TEST_CHILD="1")
    runfiles = os.environ.get("TEST_SRCDIR")
    if runfiles:
        env.setdefault("XENT_LIBRARY", os.path.join(runfiles, "xent", "runtime", "libxent_shared.so"))
        env["PYTHONPATH"] = os.path.join(runfiles, "xent", "python")
        env.setdefault("XENT_CACHE_DIR", os.environ.get("TEST_TMPDIR", root))
    os.execve(python, [python, os.path.abspath(__file__), *sys.argv[1:]], env)


if __name__ == "__main__":
    _bootstrap()
    # JAX's cpu platform (the cpu backend's own code) unless a GPU run asks
    # for its device; four host devices for the vocabulary split.
    os.environ.setdefault("JAX_PLATFORMS", os.environ.get("XENT_JAX_PLATFORMS", "cpu"))
    if os.environ["JAX_PLATFORMS"] == "cpu":
        os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
try:  # optax where installed (CI's venv); else its two losses from their definitions
    import optax  # noqa: E402
except ImportError:
    optax = None

jax.config.update("jax_enable_x64", True)
ON_CPU = jax.default_backend() == "cpu"


def int_labels_loss(x, y):
    """optax.softmax_cross_entropy_with_integer_labels."""
    if optax is not None:
        return optax.softmax_cross_entropy_with_integer_labels(x, y)
    return -jnp.take_along_axis(jax.nn.log_softmax(x, -1), y[..., None], -1)[..., 0]


def soft_labels_loss(x, t):
    """optax.softmax_cross_entropy."""
    if optax is not None:
        return optax.softmax_cross_entropy(x, t)
    return -(t * jax.nn.log_softmax(x, -1)).sum(-1)

import xent_jax  # noqa: E402

TOL = {jnp.float64: 1e-10, jnp.float32: 2e-5, jnp.float16: 4e-3, jnp.bfloat16: 2.5e-2}
DTYPES = (jnp.float64, jnp.float32, jnp.bfloat16, jnp.float16)


def close(test, got, want, dtype, what):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = max(np.abs(want[np.isfinite(want)]).max() if np.isfinite(want).any() else 1.0, 1e-3)
    err = np.abs(got - want)[np.isfinite(want)].max() if want.size else 0.0
    test.assertTrue(np.array_equal(np.isnan(got), np.isnan(want)), f"{what}: NaN where the oracle has none, or not")
    test.assertLessEqual(err, TOL[dtype] * scale, f"{what}: max error {err:.3g} > {TOL[dtype]:.1g} * {scale:.3g}")


def oracle(z, labels, weight=None, ignore_index=-100, smoothing=0.0, z_loss=0.0, tw=None, reduction="none",
           count=False):
    """PyTorch's cross entropy from its definition in float64 jnp, rows along
    axis 0 and classes along axis 1 of z (already scaled), with token
    weights tw; differentiable in z."""
    c = z.shape[1]
    logp = jax.nn.log_softmax(z, axis=1)
    lse = jax.nn.logsumexp(z, axis=1)
    w = jnp.ones(c) if weight is None else weight
    if jnp.issubdtype(labels.dtype, jnp.floating):
        t = (1 - smoothing) * labels + smoothing / c
        per_row = -(w * t * logp).sum(1) + z_loss * lse * lse
        base = jnp.ones(z.shape[0])
    else:
        counted = labels != ignore_index
        y = jnp.clip(labels, 0, c - 1)
        wy = w[y]
        nll = -jnp.take_along_axis(logp, y[:, None], 1)[:, 0]
        smooth = -(w * logp).sum(1) / c
        per_row = jnp.where(counted, (1 - smoothing) * wy * nll + smoothing * smooth + z_loss * lse * lse, 0.0)
        base = jnp.where(counted, wy, 0.0)
    u = jnp.ones(z.shape[0]) if tw is None else tw
    per_row = jnp.where(u == 0, 0.0, per_row * u)
    if reduction == "none":
        return per_row
    if reduction == "sum":
        return per_row.sum()
    return per_row.sum() / (base.sum() if count else (base * u).sum())


class VsOptax(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(7)

    def logits(self, shape, dtype, scale=3.0):
        return jnp.asarray(self.rng.standard_normal(shape) * scale).astype(dtype)

    def test_integer_labels(self):
        """optax.softmax_cross_entropy_with_integer_labels: per row, and its
        gradient, every dtype, int32 and int64 labels."""
        for dtype in DTYPES:
            for label_dtype in (jnp.int32, jnp.int64):
                x = self.logits((9, 37), dtype)
                y = jnp.asarray(self.rng.integers(0, 37, 9)).astype(label_dtype)
                up = jnp.asarray(self.rng.uniform(0.5, 1.5, 9))
                got, grad = jax.value_and_grad(
                    lambda x: (xent_jax.cross_entropy(x, y).astype(jnp.float64) * up).sum())(x)
                x64 = x.astype(jnp.float64)
                want, wgrad = jax.value_and_grad(
                    lambda x: (int_labels_loss(x, y) * up).sum())(x64)
                what = f"{dtype.__name__} {label_dtype.__name__}"
                close(self, got, want, dtype, what + " loss")
                close(self, grad, wgrad, dtype, what + " gradient")
                self.assertEqual(xent_jax.cross_entropy(x, y).dtype, dtype)

    def test_soft_labels(self):
        """optax.softmax_cross_entropy: the loss and the gradients of the
        logits and of the labels."""
        for dtype in (jnp.float64, jnp.float32, jnp.bfloat16):
            x = self.logits((7, 23), dtype)
            t = jax.nn.softmax(jnp.asarray(self.rng.standard_normal((7, 23)) * 2)).astype(dtype)
            fn = lambda x, t: xent_jax.cross_entropy(x, t, reduction="sum").astype(jnp.float64)
            got, (gx, gt) = jax.value_and_grad(fn, argnums=(0, 1))(x, t)
            ref = lambda x, t: soft_labels_loss(x, t).sum()
            want, (wx, wt) = jax.value_and_grad(ref, argnums=(0, 1))(x.astype(jnp.float64), t.astype(jnp.float64))
            close(self, got, want, dtype, f"{dtype.__name__} soft loss")
            close(self, gx, wx, dtype, f"{dtype.__name__} soft gradient of the logits")
            close(self, gt, wt, dtype, f"{dtype.__name__} soft gradient of the labels")

    def test_options(self):
        """Class weights, ignore_index, smoothing, z-loss, the soft cap, a
        temperature (one, or one a row) and token weights (both divisors),
        each reduction, against their definitions."""
        for dtype in (jnp.float64, jnp.float32):
            for reduction in ("none", "sum", "mean"):
                for count in (False, True):
                    x = self.logits((11, 29), dtype)
                    y = jnp.asarray(self.rng.integers(0, 29, 11)).at[2].set(-100)
                    w = jnp.asarray(self.rng.uniform(0.5, 1.5, 29))
                    tau = jnp.asarray(self.rng.uniform(0.5, 2.0, 11))
                    u = jnp.asarray(self.rng.uniform(-1 if count else 0, 1, 11)).at[4].set(0.0)
                    kw = dict(weight=w, label_smoothing=0.1, z_loss=1e-3, softcap=6.0, reduction=reduction,
                              token_weight=u, token_weight_mean="count" if count else "weights")
                    for temperature in (0.8, tau):
                        fn = lambda x: xent_jax.cross_entropy(x, y, temperature=temperature, **kw)
                        got = fn(x)
                        grad = jax.grad(lambda x: fn(x).astype(jnp.float64).sum())(x)
                        acc = jnp.float64 if dtype == jnp.float64 else jnp.float32
                        t = temperature if isinstance(temperature, float) else temperature.astype(acc)
                        w_, u_ = w.astype(acc).astype(jnp.float64), u.astype(acc).astype(jnp.float64)

                        def ref(x):
                            z = 6.0 * jnp.tanh(x / 6.0) / (t[:, None] if not isinstance(t, float) else t)
                            return oracle(z, y, w_, smoothing=0.1, z_loss=1e-3, tw=u_, reduction=reduction,
                                          count=count)

                        x64 = x.astype(jnp.float64)
                        what = f"{dtype.__name__} {reduction} count={count} per-row tau={not isinstance(t, float)}"
                        close(self, got, ref(x64), dtype, what + " loss")
                        close(self, grad, jax.grad(lambda x: ref(x).sum())(x64), dtype, what + " gradient")

    def test_per_token_outputs(self):
        """Entropy, the label's log-prob and argmax of z = x / tau (per row
        too), and the gradient of an objective of all three with the loss,
        against their definitions; soft labels' entropy."""
        for dtype in (jnp.float64, jnp.float32, jnp.bfloat16):
            for per_row in (False, True):
                x = self.logits((10, 31), dtype)
                y = jnp.asarray(self.rng.integers(0, 31, 10)).at[3].set(-100)
                tau = jnp.asarray(self.rng.uniform(0.5, 2.0, 10)) if per_row else 0.7
                a, b, c = (jnp.asarray(self.rng.standard_normal(10)) for _ in range(3))
                u = jnp.asarray(self.rng.uniform(0, 1, 10))

                def ours(x):
                    loss, ent, lp, am = xent_jax.cross_entropy(x, y, temperature=tau, token_weight=u,
                                                               label_smoothing=0.1, return_entropy=True,
                                                               return_logprob=True, return_argmax=True)
                    f = lambda v: v.astype(jnp.float64)
                    return (f(loss) * a).sum() + (f(ent) * b).sum() + (f(lp) * c).sum(), (ent, lp, am)

                acc = jnp.float64 if dtype == jnp.float64 else jnp.float32
                t = tau.astype(acc).astype(jnp.float64)[:, None] if per_row else tau
                u64 = u.astype(acc).astype(jnp.float64)

                def ref(x):
                    z = x / t
                    logp = jax.nn.log_softmax(z, 1)
                    counted = y != -100
                    ent = jnp.where(counted, -(jnp.exp(logp) * logp).sum(1), 0.0)
                    lp = jnp.where(counted, jnp.take_along_axis(logp, jnp.clip(y, 0)[:, None], 1)[:, 0], 0.0)
                    loss = oracle(z, y, smoothing=0.1, tw=u64)
                    return (loss * a).sum() + (ent * b).sum() + (lp * c).sum(), (ent, lp, jnp.argmax(z, 1))

                (got, (ent, lp, am)), grad = jax.value_and_grad(ours, has_aux=True)(x)
                x64 = x.astype(jnp.float64)
                (want, (went, wlp, wam)), wgrad = jax.value_and_grad(ref, has_aux=True)(x64)
                what = f"{dtype.__name__} per-row tau={per_row}"
                close(self, ent, went, dtype if dtype == jnp.float64 else jnp.float32, what + " entropy")
                close(self, lp, wlp, dtype if dtype == jnp.float64 else jnp.float32, what + " log-prob")
                np.testing.assert_array_equal(am, wam, err_msg=what + " argmax")
                close(self, got, want, dtype, what + " objective")
                close(self, grad, wgrad, dtype, what + " gradient")
        x = self.logits((4, 9), jnp.float32)
        t = jax.nn.softmax(jnp.asarray(self.rng.standard_normal((4, 9))))
        _, ent = xent_jax.cross_entropy(x, t, return_entropy=True)
        p = jax.nn.softmax(x.astype(jnp.float64), 1)
        close(self, ent, -(p * jnp.log(p)).sum(1), jnp.float32, "soft labels' entropy")

    def test_linear_cross_entropy(self):
        """The fused linear cross entropy against logits made whole: the loss
        and the gradients of hidden, weight and bias, each reduction, chunks
        of 3 rows, with class weights, smoothing, per-row temperatures and
        token weights; soft labels."""
        for dtype in (jnp.float64, jnp.float32):
            for reduction in ("mean", "sum", "none"):
                h = jnp.asarray(self.rng.standard_normal((2, 5, 16))).astype(dtype)
                w = jnp.asarray(self.rng.standard_normal((50, 16)) / 4).astype(dtype)
                b = jnp.asarray(self.rng.standard_normal(50) / 4).astype(dtype)
                y = jnp.asarray(self.rng.integers(0, 50, (2, 5))).at[0, 1].set(-100)
                cw = jnp.asarray(self.rng.uniform(0.5, 1.5, 50))
                tau = jnp.asarray(self.rng.uniform(0.5, 2.0, (2, 5)))
                u = jnp.asarray(self.rng.uniform(0, 1, (2, 5))).at[1, 1].set(0.0)
                up = jnp.asarray(self.rng.uniform(0.5, 1.5, (2, 5) if reduction == "none" else ()))
                kw = dict(ce_weight=cw, label_smoothing=0.1, temperature=tau, token_weight=u, reduction=reduction,
                          chunk_rows=3)
                fn = lambda h, w, b: (xent_jax.linear_cross_entropy(h, w, y, b, **kw).astype(jnp.float64) * up).sum()
                got, grads = jax.value_and_grad(fn, argnums=(0, 1, 2))(h, w, b)
                acc = jnp.float64 if dtype == jnp.float64 else jnp.float32
                cw_, t_, u_ = (v.astype(acc).astype(jnp.float64) for v in (cw, tau, u))

                def ref(h, w, b):
                    z = (h.reshape(10, 16) @ w.T + b) / t_.reshape(10, 1)
                    loss = oracle(z, y.reshape(10), cw_, smoothing=0.1, tw=u_.reshape(10), reduction=reduction)
                    return (loss.reshape(up.shape) * up).sum()

                f64 = [v.astype(jnp.float64) for v in (h, w, b)]
                want, wgrads = jax.value_and_grad(ref, argnums=(0, 1, 2))(*f64)
                what = f"{dtype.__name__} {reduction}"
                close(self, got, want, dtype, what + " loss")
                for name, g, e in zip(("hidden", "weight", "bias"), grads, wgrads):
                    close(self, g, e, dtype, f"{what} gradient of {name}")
        # bf16 in 1 MiB: a tiled plan (tests/linear_ce_vs_torch_test.py).
        h = jnp.asarray(self.rng.standard_normal((64, 64))).astype(jnp.bfloat16)
        w = jnp.asarray(self.rng.standard_normal((8192, 64)) / 8).astype(jnp.bfloat16)
        b = jnp.asarray(self.rng.standard_normal(8192) / 4).astype(jnp.bfloat16)
        y = jnp.asarray(self.rng.integers(0, 8192, 64)).at[3].set(-100)
        fn = lambda h, w, b: xent_jax.linear_cross_entropy(h, w, y, b, chunk_rows=16, memory_mib=1, reduction="sum",
                                                           label_smoothing=0.1).astype(jnp.float64)
        got, grads = jax.value_and_grad(fn, argnums=(0, 1, 2))(h, w, b)
        ref = lambda h, w, b: oracle(h @ w.T + b, y, smoothing=0.1, reduction="sum")
        want, wgrads = jax.value_and_grad(ref, argnums=(0, 1, 2))(*(v.astype(jnp.float64) for v in (h, w, b)))
        close(self, got, want, jnp.bfloat16, "bf16 in 1 MiB: loss")
        for name, g, e in zip(("hidden", "weight", "bias"), grads, wgrads):
            close(self, g, e, jnp.bfloat16, f"bf16 in 1 MiB: gradient of {name}")
        h = jnp.asarray(self.rng.standard_normal((6, 8)))
        w = jnp.asarray(self.rng.standard_normal((20, 8)) / 3)
        t = jax.nn.softmax(jnp.asarray(self.rng.standard_normal((6, 20))))
        got, gh = jax.value_and_grad(lambda h: xent_jax.linear_cross_entropy(h, w, t))(h)
        want, wh = jax.value_and_grad(lambda h: soft_labels_loss(h @ w.T, t).mean())(h)
        close(self, got, want, jnp.float64, "soft labels, no bias")
        close(self, gh, wh, jnp.float64, "soft labels, gradient of hidden")

    def test_linear_per_token_outputs(self):
        """The linear cross entropy's entropy, label's log-prob and argmax of z
        = (hidden @ weight.T + bias) / tau, and the gradients of an objective
        of all three with the loss, for a mean and per row: the log-prob's
        folded into each row's dloss (no weights) or made by a call of its
        own (class weights and smoothing); plan= by name."""
        for dtype in (jnp.float64, jnp.float32):
            for reduction in ("mean", "none"):
                for weighted in (False, True):
                    h = jnp.asarray(self.rng.standard_normal((9, 12))).astype(dtype)
                    w = jnp.asarray(self.rng.standard_normal((33, 12)) / 3).astype(dtype)
                    b = jnp.asarray(self.rng.standard_normal(33) / 3).astype(dtype)
                    y = jnp.asarray(self.rng.integers(0, 33, 9)).at[4].set(-100)
                    a = jnp.asarray(self.rng.standard_normal(9 if reduction == "none" else ()))
                    c, d = (jnp.asarray(self.rng.standard_normal(9)) for _ in range(2))
                    acc = jnp.float64 if dtype == jnp.float64 else jnp.float32
                    cw = jnp.asarray(self.rng.uniform(0.5, 1.5, 33)) if weighted else None
                    kw = dict(ce_weight=cw, label_smoothing=0.1) if weighted else {}
                    f = lambda v: v.astype(jnp.float64)

                    def ours(h, w, b):
                        loss, ent, lp, am = xent_jax.linear_cross_entropy(
                            h, w, y, b, reduction=reduction, temperature=0.8, return_entropy=True,
                            return_logprob=True, return_argmax=True, chunk_rows=4, **kw)
                        return (f(loss) * a).sum() + (f(ent) * c).sum() + (f(lp) * d).sum(), (ent, lp, am)

                    cw64 = cw.astype(acc).astype(jnp.float64) if weighted else None

                    def ref(h, w, b):
                        z = (h @ w.T + b) / 0.8
                        logp = jax.nn.log_softmax(z, 1)
                        counted = y != -100
                        ent = jnp.where(counted, -(jnp.exp(logp) * logp).sum(1), 0.0)
                        lp = jnp.where(counted, jnp.take_along_axis(logp, jnp.clip(y, 0)[:, None], 1)[:, 0], 0.0)
                        loss = oracle(z, y, cw64, smoothing=0.1 if weighted else 0.0, reduction=reduction)
                        return (loss * a).sum() + (ent * c).sum() + (lp * d).sum(), (ent, lp, jnp.argmax(z, 1))

                    (got, (ent, lp, am)), grads = jax.value_and_grad(ours, argnums=(0, 1, 2), has_aux=True)(h, w, b)
                    (want, (went, wlp, wam)), wgrads = jax.value_and_grad(ref, argnums=(0, 1, 2), has_aux=True)(
                        *(f(v) for v in (h, w, b)))
                    what = f"{dtype.__name__} {reduction} weighted={weighted}"
                    close(self, ent, went, dtype, what + " entropy")
                    close(self, lp, wlp, dtype, what + " log-prob")
                    np.testing.assert_array_equal(am, wam, err_msg=what + " argmax")
                    close(self, got, want, dtype, what + " objective")
                    for name, g, e in zip(("hidden", "weight", "bias"), grads, wgrads):
                        close(self, g, e, dtype, f"{what} gradient of {name}")
        h = jnp.asarray(self.rng.standard_normal((6, 8)))
        w = jnp.asarray(self.rng.standard_normal((20, 8)) / 3)
        y = jnp.asarray(self.rng.integers(0, 20, 6))
        want = oracle(h @ w.T, y, reduction="mean")
        for plan in ("one_pass", "auto"):
            close(self, xent_jax.linear_cross_entropy(h, w, y, plan=plan), want, jnp.float64, f"plan {plan}")
        with self.assertRaisesRegex(Exception, "sm_90"):
            xent_jax.linear_cross_entropy(h.astype(jnp.bfloat16), w.astype(jnp.bfloat16), y, plan="on_chip")
        with self.assertRaisesRegex(ValueError, "plan is 'fast'"):
            xent_jax.linear_cross_entropy(h, w, y, plan="fast")
        with self.assertRaisesRegex(ValueError, "for integer labels"):
            xent_jax.linear_cross_entropy(h, w, jax.nn.softmax(h @ w.T), return_logprob=True)

    def test_linear_cross_entropy_frozen(self):
        """Gradients of some arguments only (a frozen weight, a frozen
        backbone's hidden): the call makes those alone (the others' outputs
        of xent_lce are empty in the jaxpr, no GEMM for them), and they
        match float64's, for a mean (made in the forward) and per row (in
        the backward's call)."""
        h = jnp.asarray(self.rng.standard_normal((7, 16)))
        w = jnp.asarray(self.rng.standard_normal((30, 16)) / 4)
        b = jnp.asarray(self.rng.standard_normal(30) / 4)
        y = jnp.asarray(self.rng.integers(0, 30, 7))
        names = ("hidden", "weight", "bias")
        sizes = dict(zip(names, (h.size, w.size, b.size)))

        def made(jaxpr):  # the sizes of every xent_lce call's gradients
            out = []
            for eqn in jaxpr.eqns:
                if eqn.primitive.name == "ffi_call" and eqn.params.get("target_name") == "xent_lce":
                    out.append(tuple(v.aval.size for v in eqn.outvars[1:4]))
                for p in eqn.params.values():
                    for sub in p if isinstance(p, (tuple, list)) else (p,):
                        inner = getattr(sub, "jaxpr", None)
                        if inner is not None:
                            out += made(inner if hasattr(inner, "eqns") else inner.jaxpr)
            return out

        for reduction in ("mean", "none"):
            up = jnp.asarray(self.rng.uniform(0.5, 1.5, (7,) if reduction == "none" else ()))
            fn = lambda h, w, b: (xent_jax.linear_cross_entropy(h, w, y, b, reduction=reduction) * up).sum()
            ref = lambda h, w, b: (oracle(h @ w.T + b, y, reduction=reduction) * up).sum()
            for argnums in ((0,), (1,), (1, 2), (0, 1, 2)):
                with self.subTest(reduction=reduction, argnums=argnums):
                    grad = jax.grad(fn, argnums=argnums)
                    want = tuple(sizes[n] if i in argnums else 0 for i, n in enumerate(names))
                    calls = made(jax.make_jaxpr(grad)(h, w, b).jaxpr)
                    self.assertIn(want, calls, f"the gradients xent_lce made: {calls}")
                    self.assertFalse([c for c in calls if c != want and any(c)], f"more made: {calls}")
                    for i, g, e in zip(argnums, grad(h, w, b), jax.grad(ref, argnums=argnums)(h, w, b)):
                        close(self, g, e, jnp.float64, f"{reduction}: the gradient of {names[i]}")

    def test_vocabulary_split(self):
        """The class axis split over 2 and 3 devices under shard_map
        (vocab_axis): loss, per-token outputs and the gradient of an
        objective of them equal to the unsplit call's, with class weights,
        smoothing, per-row temperatures and token weights, every reduction;
        soft labels split with the logits."""
        from jax.sharding import Mesh, PartitionSpec as P
        shard_map = getattr(jax, "shard_map", None)
        if shard_map is None:
            from jax.experimental.shard_map import shard_map
        if len(jax.devices()) < 3:
            print(f"SKIPPED: the vocabulary split needs 3 devices, this platform has {len(jax.devices())}")
            return

        def split(fn, mesh, in_specs, out_specs):
            try:
                return shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
            except TypeError:
                return shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_rep=False)

        for ranks in (2, 3):
            for reduction in ("mean", "none"):
                mesh = Mesh(np.array(jax.devices()[:ranks]), ("v",))
                x = self.logits((10, 24), jnp.float64)
                y = jnp.asarray(self.rng.integers(0, 24, 10)).at[4].set(-100)
                w = jnp.asarray(self.rng.uniform(0.5, 1.5, 24))
                tau = jnp.asarray(self.rng.uniform(0.5, 2.0, 10))
                u = jnp.asarray(self.rng.uniform(0, 1, 10)).at[2].set(0.0)
                up = jnp.asarray(self.rng.uniform(0.5, 1.5, 10 if reduction == "none" else ()))
                a, b = (jnp.asarray(self.rng.standard_normal(10)) for _ in range(2))

                def call(x, y, w, tau, u, axis_name=None):
                    return xent_jax.cross_entropy(x, y, weight=w, temperature=tau, token_weight=u,
                                                  label_smoothing=0.1, reduction=reduction, return_entropy=True,
                                                  return_logprob=True, return_argmax=True, vocab_axis=axis_name)

                sharded = split(functools.partial(call, axis_name="v"), mesh,
                                (P(None, "v"), P(), P(), P(), P()), (P(), P(), P(), P()))

                def objective(outs):
                    loss, ent, lp, _ = outs
                    return (loss * up).sum() + (ent * a).sum() + (lp * b).sum()

                got = sharded(x, y, w, tau, u)
                want = call(x, y, w, tau, u)
                what = f"{ranks} ranks, {reduction}"
                for name, g, e in zip(("loss", "entropy", "log-prob"), got[:3], want[:3]):
                    close(self, g, e, jnp.float64, f"{what}: {name}")
                np.testing.assert_array_equal(got[3], want[3], err_msg=f"{what}: argmax")
                g1 = jax.grad(lambda x: objective(sharded(x, y, w, tau, u)))(x)
                g2 = jax.grad(lambda x: objective(call(x, y, w, tau, u)))(x)
                close(self, g1, g2, jnp.float64, f"{what}: gradient")
            mesh = Mesh(np.array(jax.devices()[:ranks]), ("v",))
            x = self.logits((6, 24), jnp.float32)
            t = jax.nn.softmax(jnp.asarray(self.rng.standard_normal((6, 24))))
            soft = split(lambda x, t: xent_jax.cross_entropy(x, t, reduction="sum", vocab_axis="v"), mesh,
                         (P(None, "v"), P(None, "v")), P())
            close(self, soft(x, t), xent_jax.cross_entropy(x, t, reduction="sum"), jnp.float32,
                  f"{ranks} ranks, soft labels")
            close(self, jax.grad(lambda x: soft(x, t))(x), jax.grad(
                lambda x: xent_jax.cross_entropy(x, t, reduction="sum"))(x), jnp.float32,
                f"{ranks} ranks, soft labels' gradient")

    def test_hard_cases(self):
        """Every row ignored (NaN mean, or 0 with all_ignored_zero), logits of
        +-1e8, one class, the class axis in place (axis=1)."""
        x = self.logits((4, 5), jnp.float64)
        y = jnp.full((4,), -100)
        self.assertTrue(np.isnan(xent_jax.cross_entropy(x, y, reduction="mean")))
        self.assertEqual(float(xent_jax.cross_entropy(x, y, reduction="mean", all_ignored_zero=True)), 0.0)
        np.testing.assert_array_equal(jax.grad(lambda x: xent_jax.cross_entropy(x, y).sum())(x), 0.0)
        big = jnp.asarray([[1e8, -1e8, 0.0], [-1e8, 1e8 - 1, 1e8]])
        lab = jnp.asarray([0, 1])
        # Exact: (m - x_y) + log sum exp(x - m) (optax's x - lse loses 1e8's ulps).
        exact = [np.log1p(np.exp(-1e8)), 1.0 + np.log1p(np.exp(-1.0))]
        close(self, xent_jax.cross_entropy(big, lab), np.asarray(exact), jnp.float64, "logits of 1e8")
        one = self.logits((3, 1), jnp.float64)
        close(self, xent_jax.cross_entropy(one, jnp.zeros(3, jnp.int32)), jnp.zeros(3), jnp.float64, "one class")
        nd = self.logits((2, 7, 3, 4), jnp.float32)
        lab = jnp.asarray(self.rng.integers(0, 7, (2, 3, 4)))
        want = int_labels_loss(jnp.moveaxis(nd.astype(jnp.float64), 1, -1), lab)
        got, grad = jax.value_and_grad(lambda x: xent_jax.cross_entropy(x, lab, axis=1).sum())(nd)
        close(self, xent_jax.cross_entropy(nd, lab, axis=1), want, jnp.float32, "class axis 1")
        wgrad = jax.grad(lambda x: int_labels_loss(jnp.moveaxis(x, 1, -1), lab).sum())(
            nd.astype(jnp.float64))
        close(self, grad, wgrad, jnp.float32, "class axis 1, gradient")

    def test_transformations(self):
        """Abstract evaluation, jit, vmap (per-row and reduced), grad of
        grad refused."""
        x = self.logits((5, 13), jnp.float32)
        y = jnp.asarray(self.rng.integers(0, 13, 5))
        shape = jax.eval_shape(lambda x: xent_jax.cross_entropy(x, y), x)
        self.assertEqual((shape.shape, shape.dtype), ((5,), jnp.float32))
        self.assertEqual(jax.eval_shape(lambda x: xent_jax.cross_entropy(x, y, reduction="mean"), x).shape, ())
        jitted = jax.jit(lambda x: xent_jax.cross_entropy(x, y, reduction="mean"))
        close(self, jitted(x), int_labels_loss(x.astype(jnp.float64), y).mean(),
              jnp.float32, "jit")
        xs = jnp.stack([x, 2 * x, -x])
        for reduction in ("none", "mean"):
            got = jax.vmap(lambda a: xent_jax.cross_entropy(a, y, reduction=reduction))(xs)
            want = jnp.stack([xent_jax.cross_entropy(a, y, reduction=reduction) for a in xs])
            close(self, got, want, jnp.float32, f"vmap, {reduction}")
        gv = jax.vmap(jax.grad(lambda a: xent_jax.cross_entropy(a, y, reduction="sum")))(xs)
        gw = jnp.stack([jax.grad(lambda a: xent_jax.cross_entropy(a, y, reduction="sum"))(a) for a in xs])
        close(self, gv, gw, jnp.float32, "vmap of grad")

    def test_training_step(self):
        """A jitted step of a linear classifier with SGD (optax's where
        installed): the same parameters after three steps as with optax's
        loss."""
        data = jnp.asarray(self.rng.standard_normal((32, 8)))
        labels = jnp.asarray(self.rng.integers(0, 10, 32))
        init = {"w": jnp.asarray(self.rng.standard_normal((8, 10)) * 0.1), "b": jnp.zeros(10)}

        def train(loss_of):
            if optax is not None:
                opt = optax.sgd(0.5)
                update, apply, state0 = opt.update, optax.apply_updates, opt.init(init)
            else:
                update = lambda g, s: (jax.tree_util.tree_map(lambda v: -0.5 * v, g), s)
                apply = lambda p, u: jax.tree_util.tree_map(lambda a, b: a + b, p, u)
                state0 = ()

            @jax.jit
            def step(params, state):
                loss, grads = jax.value_and_grad(lambda p: loss_of(data @ p["w"] + p["b"], labels))(params)
                updates, state = update(grads, state)
                return apply(params, updates), state, loss

            params, state = init, state0
            losses = []
            for _ in range(3):
                params, state, loss = step(params, state)
                losses.append(float(loss))
            return params, losses

        ours, l1 = train(lambda z, y: xent_jax.cross_entropy(z, y, reduction="mean"))
        theirs, l2 = train(lambda z, y: int_labels_loss(z, y).mean())
        np.testing.assert_allclose(l1, l2, rtol=1e-12)
        for k in ours:
            close(self, ours[k], theirs[k], jnp.float64, f"parameter {k} after 3 steps")

    def test_softmax_family(self):
        """softmax and log_softmax along any axis against jax.nn's, values
        and gradients, under jit and vmap."""
        for dtype in (jnp.float64, jnp.float32, jnp.bfloat16):
            x = self.logits((3, 17, 5), dtype)
            up = jnp.asarray(self.rng.standard_normal((3, 17, 5)))
            for axis in (-1, 1, 0):
                for ours, ref in ((xent_jax.softmax, jax.nn.softmax), (xent_jax.log_softmax, jax.nn.log_softmax)):
                    what = f"{dtype.__name__} {ours.__name__} axis {axis}"
                    fn = lambda x: (ours(x, axis).astype(jnp.float64) * up).sum()
                    got, grad = jax.value_and_grad(fn)(x)
                    x64 = x.astype(jnp.float64)
                    want, wgrad = jax.value_and_grad(lambda x: (ref(x, axis) * up).sum())(x64)
                    close(self, ours(x, axis), ref(x64, axis), dtype, what)
                    close(self, grad, wgrad, dtype, what + " gradient")
        x = self.logits((4, 6, 9), jnp.float32)
        close(self, jax.jit(jax.vmap(xent_jax.log_softmax))(x), jax.nn.log_softmax(x.astype(jnp.float64), -1),
              jnp.float32, "vmap of log_softmax")

    def test_errors(self):
        x = self.logits((4, 6), jnp.float32)
        with self.assertRaisesRegex(ValueError, "labels have shape"):
            xent_jax.cross_entropy(x, jnp.zeros(3, jnp.int32))
        with self.assertRaisesRegex(ValueError, "reduction is 'avg'"):
            xent_jax.cross_entropy(x, jnp.zeros(4, jnp.int32), reduction="avg")
        with self.assertRaisesRegex(ValueError, "temperature has shape"):
            xent_jax.cross_entropy(x, jnp.zeros(4, jnp.int32), temperature=jnp.ones(3))
        if ON_CPU:  # (on a GPU its row is NaN, and xent.check() would name it)
            with self.assertRaisesRegex(Exception, "row 2 has a label outside"):
                jax.block_until_ready(xent_jax.cross_entropy(x, jnp.asarray([0, 1, 9, 2])))


if __name__ == "__main__":
    unittest.main(verbosity=1)
