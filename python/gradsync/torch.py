"""gradsync for PyTorch models: P3's overlap of communication with the next forward pass.

    import gradsync.torch as gs
    opt = gs.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), model,
                                  slicing="auto", priority="forward", codec="fp32", collective="ring")
    for x, y in loader:
        loss_fn(model(x), y).backward(); opt.step(); opt.zero_grad()
    opt.synchronize()   # before evaluation, checkpoints, clipping

Launch with `mpirun -np N python3 train.py` (one process per rank); without mpirun the world is
one rank. Each parameter's gradient is handed to gradsync the moment autograd has accumulated it;
step() hands over the rest and returns at once; before each module's forward pass in the next
iteration, a hook waits only for that module's parameters and steps the optimizer for them (so
the communication of the last layers overlaps the forward pass of the first ones). The policies
are those of `gradsync-train` (--slicing, --priority, --codec, --collective), by the same names.
"""
import atexit
import inspect

import torch

from . import _build


def _release(version):
    """"2.15.0+cu132" -> "2.15.0": builds of one release (CPU, CUDA) share the C++ ABI."""
    return version.split("+")[0]


if _release(torch.__version__) != _release(_build.torch_version):
    raise ImportError(f"gradsync was built for PyTorch {_build.torch_version}, but this interpreter imports PyTorch "
                      f"{torch.__version__} ({torch.__file__}): its compiled part cannot load into another "
                      f"version. Reinstall it for this one: pip install --no-build-isolation --force-reinstall "
                      f"--no-deps <gradsync checkout or sdist>")

from . import _C  # noqa: E402  (after the version check: a mismatched _C fails with undefined symbols)

ConfigError = _C.ConfigError
UsageError = _C.UsageError
PeerError = _C.PeerError
WireError = _C.WireError

__all__ = ["DistributedOptimizer", "ddp_comm_hook", "rank", "size", "broadcast", "build_info", "ConfigError", "UsageError",
           "PeerError", "WireError"]


def build_info():
    """What this gradsync was built for and with: its version, the PyTorch it was compiled against
    (and the one running), the interpreter, the compiler, and the transports compiled in."""
    return {"gradsync": _build.version, "torch": _build.torch_version, "torch_running": torch.__version__,
            "python": _build.python, "compiler": _build.compiler,
            "mpi": _build.mpi, "gloo": _build.gloo, "nccl": _build.nccl}


def rank():
    """This process's rank (0 without mpirun)."""
    return _C.world()[0]


def size():
    """The number of ranks (1 without mpirun)."""
    return _C.world()[1]


def broadcast(tensor):
    """Copies rank 0's `tensor` into every rank's, in place (same shape and dtype on every rank)."""
    contiguous = tensor.contiguous()
    _C.broadcast(contiguous)
    if contiguous is not tensor:
        with torch.no_grad():
            tensor.copy_(contiguous)
    return tensor


atexit.register(_C.shutdown)


def _zero_grad_default(optimizer):
    """The set_to_none that optimizer.zero_grad() uses when not told."""
    for method in (type(optimizer).zero_grad, torch.optim.Optimizer.zero_grad):
        parameter = inspect.signature(method).parameters.get("set_to_none")
        if parameter is not None and parameter.default is not inspect.Parameter.empty:
            return bool(parameter.default)
    return False


def _eager(fn):
    """fn with torch.compile's tracing off (PyTorch 2.x). gradsync's forward pre-hooks step the
    optimizer from inside a compiled model's forward: there dynamo would trace and compile that
    step too (inductor rounds its fused update otherwise than PyTorch's eager one), and compile it
    again for each module's subset of the parameters."""
    disable = getattr(getattr(torch, "compiler", None), "disable", None)
    return disable(fn) if disable is not None else fn


class _Stepper:
    """Steps the wrapped optimizer for some parameters only, with the hyperparameters of the
    iteration whose gradients they hold: the optimizer's own step, its param_groups narrowed to
    those parameters, so its state is exactly what it would hold stepping them all at once."""

    def __init__(self, optimizer, params, group_of):
        self.optimizer = optimizer
        self.params = params        # index -> tensor
        self.group_of = group_of    # index -> param_groups index (None: not optimized)
        self.finished()

    def finished(self):
        # A scheduler may change the learning rate after step(): the steps still to come use these.
        self.hyper = [{k: v for k, v in g.items() if k != "params"} for g in self.optimizer.param_groups]

    @_eager
    def __call__(self, indices):
        groups = self.optimizer.param_groups
        subsets = [[] for _ in groups]
        for i in indices:
            subsets[self.group_of[i]].append(self.params[i])
        saved = []
        try:
            for g, subset, hyper in zip(groups, subsets, self.hyper):
                saved.append((g["params"], {k: g[k] for k in hyper if k in g}))
                g.update(hyper)
                g["params"] = subset
            self.optimizer.step()
        finally:
            for g, (params, live) in zip(groups, saved):
                g["params"] = params
                g.update(live)


class DistributedOptimizer:
    """Wraps `optimizer` (any torch.optim optimizer but LBFGS) for data-parallel training of
    `model` with gradsync.

    Policies, by gradsync-train's names: slicing (auto, whole, fixed[:N], fusion[:BYTES],
    slicefuse[:N], split[:P[:N]]), priority (forward, fifo), codec (fp32, fp16, bf16, qsgd2/4/8/16, onebit, topk,
    ef+..., with options), collective (ring, ps, dgt[:...], reduce-broadcast, hierarchical[:k],
    hybrid[:bytes[:k]], mpi, gloo[:iface]). A bad name raises ConfigError (a ValueError) naming the
    valid ones.

    slicing "auto" (the default) is gradsync-train's --tune: at the first step(), rank 0 measures
    the link with rank 1 (about a quarter of a second, at most 16 MiB), simulates a grid of
    slicings and windows (inflight units, credit) on the first iteration's per-module compute
    times, and every rank takes its choice (tuning() says what it measured and chose). On slow
    links that is mostly P3's fixed:40000; on fast ones, fewer, larger units, whose per-message CPU
    would otherwise come off the compute. It chooses the window, so it refuses inflight_units and
    credit_bytes. The first iteration is not the steady state (rank 0 may have a core to itself
    while the others start up), so at the step() that ends iteration tune_steady (5; 0: never)
    rank 0 chooses again, on the same link, with the first iteration's profile scaled to its
    median compute per iteration since the second (time outside gradsync's waits); that step()
    applies every optimizer step at once, as the first does, and every rank builds the new choice.

    backward_passes_per_step: backward passes accumulated into one step (gradient accumulation).
    timeout: seconds to wait for a peer before PeerError. link: an emulated link ("1gbit",
    "300mbit+50us") between ranks (gradsync's Throttled transport). inflight_units, credit_bytes,
    seed, check_finite: gradsync::Options; 0 leaves inflight_units and credit_bytes to the library
    (2 (N-1) units within 4..8 for N ranks, 4 MiB). check_finite=False with a torch.amp.GradScaler,
    which skips the steps whose gradients overflow; not with an ef+ codec. trace: record each
    unit's times (trace()).

    At construction every rank checks its model against rank 0's (a difference raises PeerError
    naming the parameter) and takes rank 0's parameters and buffers. Batch-norm running
    statistics stay per rank afterwards (DDP's broadcast_buffers=False).

    Learning-rate schedulers take the wrapped optimizer. Checkpoint after synchronize().
    """

    def __init__(self, optimizer, model, *, slicing="auto", priority="forward", codec="fp32",
                 collective="ring", backward_passes_per_step=1, timeout=30.0, link=None,
                 inflight_units=0, credit_bytes=0, seed=0, check_finite=True, trace=False, tune_steady=5):
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"gradsync: DistributedOptimizer wraps a torch.optim.Optimizer, not {type(optimizer).__name__}")
        if isinstance(optimizer, torch.optim.LBFGS):
            raise UsageError("gradsync: LBFGS steps all parameters at once with a closure that re-evaluates the "
                             "model; gradsync steps each module's parameters before its forward pass: use another "
                             "optimizer")
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"gradsync: DistributedOptimizer needs the torch.nn.Module it trains, not {type(model).__name__}")
        self.optimizer = optimizer
        self._zero_to_none = _zero_grad_default(optimizer)
        named = list(model.named_parameters())  # each tensor once: tied ones under their first name
        index = {id(p): i for i, (_, p) in enumerate(named)}
        group_of = [None] * len(named)
        for gi, g in enumerate(optimizer.param_groups):
            for p in g["params"]:
                if id(p) not in index:
                    raise UsageError(f"gradsync: the optimizer holds a tensor of shape {list(p.shape)} in param group "
                                     f"{gi} that is not a parameter of the model; gradsync aggregates the model's "
                                     f"gradients only: give the optimizer the model's parameters")
                group_of[index[id(p)]] = gi
        modules = list(model.named_modules())
        by_name = {name: i for i, (name, _) in enumerate(modules)}
        parents, owned = [], []
        for name, m in modules:
            parents.append(by_name.get(name.rpartition(".")[0], -1) if name else -1)
            owned.append([index[id(p)] for p in m._parameters.values() if p is not None])
        buffers = list(model.named_buffers())
        s = _C.Settings()
        s.slicing, s.priority, s.codec, s.collective = slicing, priority, codec, collective
        s.link = link or ""
        s.timeout_s = float(timeout)
        s.inflight_units, s.credit_bytes, s.seed = inflight_units, credit_bytes, seed
        s.check_finite, s.trace = check_finite, trace
        s.backward_passes = backward_passes_per_step
        s.tune_steady = tune_steady
        self._stepper = _Stepper(optimizer, [p for _, p in named], group_of)
        self._core = _C.Replica([n for n, _ in named], [p for _, p in named], [g is not None for g in group_of],
                                [n for n, _ in modules], parents, owned, [n for n, _ in buffers],
                                [b for _, b in buffers], s, self._stepper, self._stepper.finished)
        core = self._core
        self._hooks = {i: m.register_forward_pre_hook(lambda _m, _in, i=i: core.before_forward(i))
                       for i, (_, m) in enumerate(modules)}
        self._built = False

    # ---- the training loop ----

    def step(self, closure=None):
        """Ends the iteration: hands over the gradients not handed over yet (a parameter without
        one counts as zeros) and returns; each module's parameters are stepped before its next
        forward pass. With a closure, runs it first (forward and backward) and returns its loss."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._core.step()
        if not self._built:
            self._built = True
            keep = set(self._core.stepping_modules())
            for i in [i for i in self._hooks if i not in keep]:
                self._hooks.pop(i).remove()
        return loss

    def zero_grad(self, set_to_none=None):
        """Zeroes the optimized parameters' gradients, each right after its pending optimizer step.
        set_to_none: as the wrapped optimizer's zero_grad() defaults (PyTorch 2.x: True, 1.13:
        False), so a loop computes what it computes without gradsync. After synchronize() with no
        step() since (a GradScaler skipped it), drops those gradients unstepped."""
        if set_to_none is None:
            set_to_none = self._zero_to_none
        self._core.zero_grad(bool(set_to_none))

    def synchronize(self):
        """Lands everything in flight. After backward() and before step(): every .grad holds the
        mean over the ranks (clip it, then call step()). After step(): every optimizer step is
        applied (evaluate, checkpoint, read the weights)."""
        self._core.synchronize()

    def close(self):
        """Waits for units in flight, removes the hooks and stops gradsync's threads."""
        for h in self._hooks.values():
            h.remove()
        self._hooks.clear()
        self._core.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if hasattr(self, "_core"):
            self.close()

    # ---- what the wrapped optimizer has ----

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    @property
    def state(self):
        return self.optimizer.state

    def state_dict(self):
        """The wrapped optimizer's state: call synchronize() first, so every step is in it."""
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict):
        self.optimizer.load_state_dict(state_dict)

    # ---- what gradsync measured ----

    def stats(self):
        """This rank's counters: units, bytes_sent, iterations, exposed_wait_seconds, ..."""
        return self._core.stats()

    def describe(self):
        """The policies as the ranks agreed on them ("fixed:40000/forward/fp32/ring"), after step()."""
        return self._core.describe()

    def layout(self):
        """The parameters' names in layout (forward) order, after the first step()."""
        return self._core.layout()

    def unit_layers(self):
        """For each unit, the layout positions of the parameters it carries."""
        return self._core.unit_layers()

    def tuning(self):
        """With slicing "auto", after the first step(): the link measured (link_bytes_per_second,
        link_latency_seconds) and the setting chosen (slicing, collective, inflight_units,
        credit_bytes, simulated_seconds against P3's default's) on compute_seconds per iteration;
        after step() tune_steady, the second choice, with the first under "first"; None otherwise."""
        return self._core.tuning()

    def trace(self):
        """With trace=True: each unit's ready/started/finished times (time.monotonic_ns() clock)."""
        return self._core.trace()

    def abort(self, reason):
        """Stops this rank's synchronizer and tells every peer: their next step or synchronize raises
        PeerError (a backward under way raises autograd's RuntimeError with the same message)."""
        self._core.abort(reason)


def ddp_comm_hook(codec="fp16", collective="ring", *, seed=0, check_finite=True, timeout=30.0):
    """For users who keep DDP: a communication hook that sends DDP's gradient buckets through
    gradsync's codecs and collectives.

        model = DistributedDataParallel(net)
        model.register_comm_hook(None, gradsync.torch.ddp_comm_hook(codec="qsgd8", collective="ring"))

    Each bucket DDP hands over is aggregated on a thread of gradsync's own, in the order DDP hands
    them over (the same on every rank; DDP fixes the order, so there is no priority), while the
    backward pass goes on. fp16 and bf16 do what DDP's fp16_compress_hook and bf16_compress_hook do
    (the bucket in the narrow type, divided by the world size there, then summed); every other codec
    sends the fp32 bucket and the ranks average it. Error-feedback codecs keep one residual per
    bucket (reset when DDP rebuilds its buckets after the first iteration).

    collective: ring, reduce-broadcast, hierarchical[:k], hybrid[:bytes[:k]] or mpi; those that
    keep state per unit (ps, dgt, gloo) need DistributedOptimizer. Every rank makes its hooks in the
    same order (they agree their policies at once: a difference raises PeerError on all of them).
    check_finite: a NaN or Inf fails the backward pass naming the bucket (with fp16, bf16 and fp32
    on every rank at once; with a lossy codec on that rank at once, on the others after `timeout`
    seconds). DDP's `state` argument is not used. CPU models with float32 parameters.

    The hook has stats() (buckets, iterations, elements, bytes sent, seconds in the collective),
    describe() and close() (also at exit; a closed hook refuses buckets).
    """
    reducer = _C.HookReducer(codec, collective, seed, check_finite, float(timeout))

    def gradsync_ddp_comm_hook(state, bucket):
        buffer = bucket.buffer()
        future = torch.futures.Future()

        def done(error):
            if error is None:
                future.set_result(buffer)
            else:
                kind, message = error
                future.set_exception(getattr(_C, kind, RuntimeError)(message))

        reducer.submit(buffer, bucket.index(), bucket.is_last(), done)
        return future

    gradsync_ddp_comm_hook.stats = reducer.stats
    gradsync_ddp_comm_hook.describe = reducer.describe
    gradsync_ddp_comm_hook.close = reducer.close
    return gradsync_ddp_comm_hook
