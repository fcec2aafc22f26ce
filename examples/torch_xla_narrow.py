"""A torch-xla model written with PyTorch's 64-bit defaults, run and trained narrowed by x64guard.

    PJRT_DEVICE=CPU python examples/torch_xla_narrow.py

The model keeps float64 parameters and takes int64 token ids, as PyTorch makes them.
x64guard moves it to the XLA device narrowed on the host (nothing 64-bit is transferred),
runs and trains it through `torch.compile(backend="x64guard")` with no 64-bit type in what
XLA compiles, refuses what it cannot narrow (an id int32 cannot hold) instead of wrapping
it, names the model's own lines in its findings, and does the same for a lazy-tensor loop
and a torch.export program.
"""

import copy
import os
import re
import warnings

os.environ.setdefault("PJRT_DEVICE", "CPU")

import torch  # noqa: E402
import torch_xla  # noqa: E402
from torch import nn  # noqa: E402

import x64guard  # noqa: E402
import x64guard.torch_xla as xt  # noqa: E402  (torch.compile finds backend="x64guard" even without this import)


class Tagger(nn.Module):
    """Token ids (int64) -> embeddings + positions (arange: int64) -> a float64 MLP with
    dropout -> the best tag of each token (argmax: int64), and a training loss."""

    def __init__(self, vocab=100, dim=16, tags=5, dropout=0.0):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Embedding(32, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 32), nn.GELU(), nn.Dropout(dropout), nn.Linear(32, tags))
        self.double()

    def forward(self, ids, targets):
        positions = torch.arange(ids.shape[1], device=ids.device)
        scores = self.mlp(self.embed(ids) + self.position(positions))
        loss = nn.functional.cross_entropy(scores.reshape(-1, scores.shape[-1]), targets.reshape(-1).long())
        return scores.argmax(dim=-1), loss


def wide_types(hlo: str) -> list[str]:
    return sorted(set(re.findall(r"\b(?:s64|u64|f64|c128)\[", hlo)))


def main():
    warnings.simplefilter("ignore", x64guard.X64GuardWarning)
    torch.manual_seed(0)
    model = Tagger()
    ids = torch.randint(0, 100, (2, 8))
    targets = torch.randint(0, 5, (2, 8))
    reference = copy.deepcopy(model).float()            # eager PyTorch at 32 bits, for comparison

    # 1. One call moves the model and the batch to the device, narrowed and range-checked on the host
    #    (ids stay int64 as PyTorch sees them; XLA holds them as int32).
    on_device = xt.to_device(model)
    batch = xt.to_device({"ids": ids, "targets": targets})
    print("to_device:    parameters", {p.dtype for p in on_device.parameters()}, "| ids", batch["ids"].dtype,
          "on", batch["ids"].device)

    # 2. Training through the backend: forward and backward graphs narrowed, optimizer outside.
    compiled = torch.compile(on_device, backend="x64guard")
    optimizer = torch.optim.SGD(on_device.parameters(), lr=0.5)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.5)
    for step in range(3):
        tags, loss = compiled(**batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        expected_tags, expected = reference(ids, targets)
        expected.backward()
        reference_optimizer.step()
        reference_optimizer.zero_grad()
        print(f"train step {step}: loss {loss.item():.6f} (eager float32 {expected.item():.6f}), tags {tags.dtype}, "
              f"same tags: {torch.equal(tags.cpu(), expected_tags.to(torch.int32))}")
    hlo = "".join(spec.program.hlo for graph in xt.compiled_graphs() for spec in graph.specializations())
    print("              64-bit types in the HLO torch-xla runs:", wide_types(hlo) or "none")

    # 3. Never wraps: an id that int32 cannot hold is refused on the host, before any transfer.
    too_big = ids.clone()
    too_big[1, 3] = 2**40
    try:
        xt.to_device({"ids": too_big})
    except x64guard.X64GuardError as error:
        print("refused:     ", str(error).split(";")[0])

    # 4. Findings at the model's own line, with its module path (mode="error" lists every 64-bit use).
    strict = torch.compile(copy.deepcopy(model).to(torch_xla.device()), backend="x64guard", options={"mode": "error"})
    try:
        strict(ids.to(torch_xla.device()), targets.to(torch_xla.device()))
    except x64guard.X64GuardError as error:
        here = [f for f in error.findings if os.path.basename(f.location.file or "") == os.path.basename(__file__) and f.location.note]
        print("mode=error: ", len(error.findings), "findings, e.g.",
              re.sub(r"^.*/", "", str(here[0].location)), here[0].op)

    # 5. Dropout in the compiled step: torch-xla's generator state is passed in as 32-bit words
    # and kept as the one 64-bit value (the x32 profile's RNG state).
    noisy = xt.to_device(Tagger(dropout=0.2))
    _, loss = torch.compile(noisy, backend="x64guard")(**batch)
    loss.backward()
    print("dropout:      trained a step with in-graph dropout, loss", f"{loss.item():.4f}")

    # 6. The lazy-tensor loop, synced through x64guard instead of torch_xla.sync().
    lazy = xt.to_device(model)
    lazy_optimizer = torch.optim.SGD(lazy.parameters(), lr=0.5)
    traced = xt.counters()["traces"]
    for _ in range(2):
        _, loss = lazy(**batch)
        loss.backward()
        lazy_optimizer.step()
        lazy_optimizer.zero_grad()
        xt.sync(lazy, lazy_optimizer, loss)
    print(f"lazy loop:    loss {loss.item():.6f}, programs narrowed", xt.counters()["traces"] - traced)

    # 7. torch.export programs: narrowed, then run on the device; inputs may stay on the host.
    eval_model = copy.deepcopy(model).eval()
    program = xt.narrow_exported(torch.export.export(eval_model, (ids, targets)))
    tags2, _ = program(ids, targets)
    with torch.no_grad():
        expected_tags, _ = eval_model(ids, targets)
    print("exported:     changes", dict(sorted(program.changes.items())), "| same tags:",
          torch.equal(tags2.cpu(), expected_tags.to(torch.int32)))
    print("              x32 check of the narrowed StableHLO:", "ok" if x64guard.check(program.text).ok else "NOT OK")


if __name__ == "__main__":
    main()
