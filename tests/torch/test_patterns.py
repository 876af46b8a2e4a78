"""Training patterns under gradsync.torch, each against DDP running the same loop (2 ranks: bit
for bit; 3 ranks: within fp32 rounding, our replicas bit-identical)."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from helpers import ConvNet, assert_matches_ddp, assert_replicas_identical, batches, model, run_ddp, run_gradsync, sgd


@pytest.fixture(autouse=True)
def several_ranks(world, ddp_group):
    if world[1] == 1:
        pytest.skip("needs 2 or more ranks")


def compare(data, **kwargs):
    ddp_kwargs = kwargs.pop("ddp", {})
    ours = run_gradsync(data, **kwargs)
    kwargs.pop("backward_passes_per_step", None)
    assert_matches_ddp(ours, run_ddp(data, **kwargs, **ddp_kwargs))
    return ours


def test_gradient_accumulation(world):
    passes = 3

    def loop(net, opt, data, no_sync):
        for i, (x, y) in enumerate(data):
            with no_sync() if i % passes != passes - 1 else torch.enable_grad():
                F.cross_entropy(net(x), y).backward()
            if i % passes == passes - 1:
                opt.step()
                opt.zero_grad()
        return []

    compare(batches(world[0], 3 * passes, batch=8), loop=loop, backward_passes_per_step=passes)


def test_frozen_parameters(world):
    def frozen():
        net = model()
        net.conv1.weight.requires_grad_(False)
        net.bn1.requires_grad_(False)
        return net

    compare(batches(world[0], 4), make_model=frozen)


class TiedLM(nn.Module):
    """An embedding whose matrix is also the output layer's (weight tying)."""

    def __init__(self, vocab=40, width=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        self.hidden = nn.Linear(width, width)
        self.out = nn.Linear(width, vocab)
        self.out.weight = self.emb.weight

    def forward(self, tokens):
        return self.out(torch.tanh(self.hidden(self.emb(tokens))))


def test_tied_parameters(world):
    g = torch.Generator().manual_seed(world[0])
    data = [(torch.randint(0, 40, (8,), generator=g), torch.randint(0, 40, (8,), generator=g)) for _ in range(4)]
    compare(data, make_model=lambda: model(TiedLM))


class Branchy(ConvNet):
    """`extra` runs only on rank 0 in even steps; `never` never runs."""

    def __init__(self):
        super().__init__()
        self.extra = nn.Linear(10, 10)
        self.never = nn.Linear(10, 10)
        self.calls = 0

    def forward(self, x):
        out = super().forward(x)
        self.calls += 1
        if torch.distributed.get_rank() == 0 and self.calls % 2 == 0:
            out = self.extra(out)
        return out


def test_parameters_without_gradient(world):
    """No gradient on some ranks or in some steps: zeros in the mean; on no rank: none, never a hang."""
    ours = compare(batches(world[0], 5), make_model=lambda: model(Branchy), ddp=dict(find_unused_parameters=True))
    initial = model(Branchy)
    assert torch.equal(ours.weights[-2], initial.never.weight)  # not stepped: weight decay left it alone


class Attention(nn.Module):
    """nn.MultiheadAttention: out_proj's forward never runs, its parent's uses its weights."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(6, 8)
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        h = self.embed(x)
        return self.head(self.attn(h, h, h, need_weights=False)[0].mean(1))


def test_parameters_used_by_a_parent_module(world):
    g = torch.Generator().manual_seed(world[0])
    data = [(torch.randn(4, 5, 6, generator=g), torch.randint(0, 10, (4,), generator=g)) for _ in range(4)]
    compare(data, make_model=lambda: model(Attention))


def test_learning_rate_schedule(world):
    """A scheduler changes the rate after step(); the steps gradsync applies later use the old one."""

    def scheduled(net, opt, data, no_sync):
        schedule = torch.optim.lr_scheduler.StepLR(getattr(opt, "optimizer", opt), step_size=1, gamma=0.5)
        for x, y in data:
            F.cross_entropy(net(x), y).backward()
            opt.step()
            schedule.step()
            opt.zero_grad()
        return []

    compare(batches(world[0], 5), loop=scheduled)


def test_clipping_after_synchronize(world):
    def loop(net, opt, data, no_sync):
        for x, y in data:
            F.cross_entropy(net(x), y).backward()
            if hasattr(opt, "synchronize"):
                opt.synchronize()  # the mean gradient, before clipping it
            torch.nn.utils.clip_grad_norm_(net.parameters(), 0.05)
            opt.step()
            opt.zero_grad()
        return []

    compare(batches(world[0], 4), loop=loop)


def test_evaluation_between_steps_and_zero_grad_first(world):
    def loop(net, opt, data, no_sync):
        for i, (x, y) in enumerate(data):
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(net(x), y).backward()
            opt.step()
            if i == 1:
                net.eval()
                with torch.no_grad():
                    net(x)
                net.train()
        return []

    compare(batches(world[0], 4), loop=loop)


def test_closure(world):
    def loop(net, opt, data, no_sync):
        for x, y in data:
            def closure():
                opt.zero_grad()
                loss = F.cross_entropy(net(x), y)
                loss.backward()
                return loss
            opt.step(closure)
        return []

    compare(batches(world[0], 4), loop=loop)


def test_parameters_outside_the_optimizer(world):
    """fc.bias is trained by nobody: aggregated like DDP does, never stepped, never zeroed."""
    def partial(params):
        params = list(params)
        return sgd(params[:-1])

    compare(batches(world[0], 4), make_opt=partial)


def test_channels_last_parameters(world):
    """Dense but not contiguous (channels-last convolution weights): aggregated in memory order."""
    compare(batches(world[0], 3), make_model=lambda: model().to(memory_format=torch.channels_last))


def test_autocast_bf16(world):
    """Mixed precision on the CPU: bf16 compute, fp32 parameters and gradients (what gradsync
    aggregates), the documented synchronize() -> clip -> step() order."""
    def loop(net, opt, data, no_sync):
        for x, y in data:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = F.cross_entropy(net(x), y)
            loss.backward()
            if hasattr(opt, "synchronize"):
                opt.synchronize()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
        return []

    compare(batches(world[0], 4), loop=loop)


@pytest.mark.skipif(not hasattr(torch.amp, "GradScaler"), reason="torch.amp.GradScaler (for the CPU) is PyTorch 2.3+")
def test_autocast_fp16_with_grad_scaler(world):
    """fp16 compute with dynamic loss scaling, the documented order: scaled backward ->
    synchronize() -> unscale_ -> clip -> scaler.step -> update. The scale starts too high, so the
    first iteration's gradients overflow; the last rank's loss is infinite in the fourth. The scaler
    skips those steps on every rank (the aggregate carries one rank's inf to all), as under DDP."""
    data = batches(world[0], 6)
    loop = grad_scaler_loop(world)
    ours, ddp = run_gradsync(data, loop=loop, check_finite=False), run_ddp(data, loop=loop)
    assert_matches_ddp(ours, ddp)
    assert ours.losses == ddp.losses, f"the scale after each step: {ours.losses}, under DDP {ddp.losses}"
    assert {0, 3} <= skipped_steps(ours.losses), f"the scale after each step: {ours.losses}"


@pytest.mark.skipif(not hasattr(torch.amp, "GradScaler"), reason="torch.amp.GradScaler (for the CPU) is PyTorch 2.3+")
def test_grad_scaler_with_an_error_feedback_codec_recovers_from_overflow(world):
    """An overflow goes to every rank (the scaler skips its step) but not into the codec's
    residual, so the steps after it are taken: a residual holding the Inf would skip them all."""
    data = batches(world[0], 6)
    ours = run_gradsync(data, loop=grad_scaler_loop(world), codec="ef+fp16", check_finite=False)
    skipped = skipped_steps(ours.losses)
    assert {0, 3} <= skipped and {4, 5} - skipped, f"the scale after each step: {ours.losses}"
    assert_replicas_identical(ours.weights + ours.state)


INIT_SCALE = 2.0**18  # too high for the first iteration's gradients: an overflow at once


def grad_scaler_loop(world):
    """The documented GradScaler order, with the last rank's loss infinite in the fourth
    iteration; returns the scale after each step."""
    last = world[1] - 1

    def loop(net, opt, data, no_sync):
        scaler = torch.amp.GradScaler("cpu", init_scale=INIT_SCALE, growth_interval=2)
        scales = []
        for i, (x, y) in enumerate(data):
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16):
                loss = F.cross_entropy(net(x), y)
            if i == 3 and world[0] == last:
                loss = loss * float("inf")
            scaler.scale(loss).backward()
            if hasattr(opt, "synchronize"):
                opt.synchronize()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
        return scales

    return loop


def skipped_steps(scales):
    """The steps the scaler skipped: those after which the scale fell."""
    return {i for i, (before, after) in enumerate(zip([INIT_SCALE] + scales, scales)) if after < before}


def compiled_loop(backend):
    """The plain loop on torch.compile(net), compiled afresh: dynamo's cache of earlier runs'
    code does not tell their models' graph breaks apart."""
    import torch._dynamo

    def loop(net, opt, data, no_sync):
        torch._dynamo.reset()
        compiled = torch.compile(net, backend=backend)
        for x, y in data:
            F.cross_entropy(compiled(x), y).backward()
            opt.step()
            opt.zero_grad()
        return []
    return loop


@pytest.mark.skipif(not hasattr(torch, "compile"), reason="torch.compile is PyTorch 2.x")
def test_compiled_model(world):
    """torch.compile(model) with a backend that keeps PyTorch's kernels: the module hooks run at
    graph breaks, the gradient hooks after the compiled backward; the weights are DDP's on the
    same compiled model."""
    compare(batches(world[0], 3), loop=compiled_loop("aot_eager"))


def break_before_modules_with_parameters():
    """The ConvNet, its compiled forward split where gradsync's hooks split it: before each module
    that owns parameters (where gradsync steps them)."""
    import torch._dynamo

    net = model()
    for m in net.modules():
        if next(m.parameters(recurse=False), None) is not None:
            m.register_forward_pre_hook(lambda *_: torch._dynamo.graph_break())
    return net


@pytest.mark.skipif(not hasattr(torch, "compile"), reason="torch.compile is PyTorch 2.x")
def test_compiled_model_inductor(world):
    """torch.compile's default backend fuses each graph's operations into kernels of its own, whose
    fp32 rounding depends on where the graph ends. gradsync's hooks end one before each module with
    parameters (they step its optimizer there, so that step overlaps the rest of the forward): the
    weights are DDP's on the compiled model split at the same places, and within fp32 rounding of
    DDP's on the whole compiled model. The optimizer steps run in eager PyTorch, not compiled."""
    data, loop = batches(world[0], 4), compiled_loop("inductor")
    ours = run_gradsync(data, loop=loop)
    assert_matches_ddp(ours, run_ddp(data, loop=loop, make_model=break_before_modules_with_parameters))
    whole = run_ddp(data, loop=loop)
    for i, (a, b) in enumerate(zip(ours.weights + ours.state, whole.weights + whole.state)):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), f"tensor {i}: {(a - b).abs().max().item():.3g} from DDP"
