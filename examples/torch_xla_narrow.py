"""A torch-xla model written with PyTorch's 64-bit defaults, run narrowed by x64guard.

    PJRT_DEVICE=CPU python examples/torch_xla_narrow.py

The model keeps its float64 parameters and takes int64 token ids, as PyTorch makes them;
x64guard's dynamo backend runs it on the XLA device with no 64-bit type in the program,
refuses what it cannot narrow (an id that int32 cannot hold, random numbers drawn in the
graph) instead of wrapping it, and does the same for a torch.export program.
"""

import os
import re
import warnings

os.environ.setdefault("PJRT_DEVICE", "CPU")

import torch  # noqa: E402
import torch_xla  # noqa: E402
from torch import nn  # noqa: E402

import x64guard  # noqa: E402
import x64guard.torch_xla  # noqa: E402  (torch.compile finds backend="x64guard" even without this import)


class Tagger(nn.Module):
    """Token ids (int64) -> embeddings + positions (arange: int64) -> a float64 MLP ->
    the best tag of each token (argmax: int64) and the sequence's mean score."""

    def __init__(self, vocab=100, dim=16, tags=5):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Embedding(32, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 32), nn.GELU(), nn.Linear(32, tags))
        self.double()

    def forward(self, ids):
        positions = torch.arange(ids.shape[1], device=ids.device)
        scores = self.mlp(self.embed(ids) + self.position(positions))
        return scores.argmax(dim=-1), scores.amax(dim=-1).mean()


def main():
    torch.manual_seed(0)
    device = torch_xla.device()
    model = Tagger().eval()
    ids = torch.randint(0, 100, (2, 8))
    with torch.no_grad():
        tags_cpu, score_cpu = model(ids)

    # 1. The dynamo backend: float64 parameters and int64 ids stay as they are.
    on_device = Tagger().eval()
    on_device.load_state_dict(model.state_dict())
    compiled = torch.compile(on_device.to(device), backend="x64guard")
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        tags, score = compiled(ids.to(device))
    print("backend:      tags", tags.dtype, "score", score.dtype, "on", tags.device)
    print("              same tags as eager float64 on the CPU:", torch.equal(tags.cpu(), tags_cpu.to(torch.int32)))
    print(f"              score {score.item():.6f} vs eager {score_cpu.item():.6f}")
    print("              warning:", next(str(w.message) for w in caught
                                         if issubclass(w.category, x64guard.X64GuardWarning)))
    (spec,) = x64guard.torch_xla.compiled_graphs()[-1].specializations()
    wide = sorted(set(re.findall(r"\b(?:s64|u64|f64|c128)\[", spec.program.hlo)))
    print("              64-bit types in the HLO torch-xla runs:", wide or "none")

    # 2. Never wraps: an id that int32 cannot hold is refused, naming the input.
    too_big = ids.clone()
    too_big[1, 3] = 2**40
    try:
        with torch.no_grad():
            compiled(too_big.to(device))
    except x64guard.X64GuardError as error:
        print("refused:     ", str(error).split(";")[0])

    # 3. Random numbers drawn in the graph are refused, not run from another generator.
    noisy = torch.compile(lambda x: x + torch.randn(x.shape, device=x.device), backend="x64guard")
    try:
        noisy(torch.zeros(3, device=device))
    except x64guard.X64GuardError as error:
        print("refused:     ", str(error).split(";")[0], [f.kind for f in error.findings])

    # 4. torch.export programs: narrowed, then run on the device; inputs may stay on the host.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", x64guard.X64GuardWarning)
        program = x64guard.torch_xla.narrow_exported(torch.export.export(model, (ids,)))
    tags2, score2 = program(ids)
    print("exported:     changes", dict(sorted(program.changes.items())), "| same tags:",
          torch.equal(tags2.cpu(), tags_cpu.to(torch.int32)), f"| score {score2.item():.6f}")
    print("              x32 check of the narrowed StableHLO:", "ok" if x64guard.check(program.text).ok else "NOT OK")


if __name__ == "__main__":
    main()
