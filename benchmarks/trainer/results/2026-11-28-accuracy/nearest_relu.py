"""The pre-activations of ResNet-20's last block (layer3.2: bn2 + identity, before its ReLU) nearest
to zero, in fp64, for the first batch of a trainer start folder (weights.json, weights.f32,
order0.u32 as trainer_vs_pytorch --same-start writes them): a value within fp32 rounding of zero
is a ReLU whose decision either fp32 side may take either way.

  nearest_relu.py START [COUNT]
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import accuracy  # noqa: E402
import torch  # noqa: E402


def main():
    start, count = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5
    torch.set_num_threads(1)
    x, _ = accuracy.load("/usr/share/datasets/fashion-mnist", True)
    model = accuracy.build("resnet20", 1.0)
    accuracy.load_start(model, start)
    model = model.double().train()
    order = np.fromfile(os.path.join(start, "order0.u32"), dtype=np.uint32).astype(np.int64)
    block, seen = model[-4], {}  # layer3.2, before the pooling, flattening and fc
    block.bn2.register_forward_hook(lambda m, i, out: seen.update(main=out))
    block.register_forward_pre_hook(lambda m, i: seen.update(identity=i[0]))
    with torch.no_grad():
        model(x[order[:64]].double())
    pre = (seen["main"] + seen["identity"]).abs().numpy()
    flat = np.where(pre > 0, pre, np.inf).ravel()
    for i in np.argsort(flat)[:count]:
        n, c, h, w = np.unravel_index(i, pre.shape)
        print(f"|pre-activation| {flat[i]:.3e}  image {n} channel {c} position ({h}, {w})")


if __name__ == "__main__":
    main()
