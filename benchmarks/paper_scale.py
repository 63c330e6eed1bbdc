"""The cost model at the Parallax paper's scale: 8 machines x 6 GPUs, 100 Gbit/s links, the paper's four models, and
its Figure 13 (normalized throughput at 48 GPUs of TF-PS, Horovod and Parallax) side by side with the model's.

No job runs: this feeds parallax/plan/cost_model.py the paper's setting and prints what it predicts. Every input is
listed in the output with where it comes from:
- paper: stated in the paper (cluster shape, links, Figure 13's figures as the issue quotes them);
- architecture: computed here from the published architecture the paper names (parameter counts, the rows a
  step's gradient carries: one per word or token of the batch, and per sampled class);
- assumed: not in any text we have (a GPU step's time, the CPU cost of moving a byte on those machines); these are
  swept, and the output shows whether the ranking and the ratios survive the sweep.
Normalized throughput is the paper's: throughput on 48 GPUs over one GPU's, the batch per GPU fixed, so the model's
figure is 48 x (one GPU's step time) / (the predicted step time on 48).
"""
import argparse
import collections
import dataclasses
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from parallax.plan import cost_model as cm, plan_search# noqa: E402

MACHINES, GPUS = 8, 6
LINK = 100e9 / 8  # bytes/s: 100 Gbit/s InfiniBand (paper)
LATENCY = 5e-6  # s per message on InfiniBand (assumed)
CORES = 24  # CPU cores per machine that move bytes (assumed)
FLOAT = 4
# (assumed) TF's gRPC runs over TCP on IPoIB and gets this share of the link; Horovod's MPI uses the verbs
GRPC_SHARE = 0.5
# (assumed) Horovod of 2018 (v0.11, the paper's) allreduces dense tensors with NCCL on the GPUs (a quarter of
# gRPC's host CPU per byte) but allgathers sparse ones with MPI through host memory, costing the host what gRPC does
ALLGATHER_VS_GRPC = 1.0
# the sweeps of the assumed inputs: a GPU step's scale and CPU per GB; gRPC's share of the link and the allgather's
# CPU per byte against gRPC's
STEP_SCALES, CPU_PER_GB = (0.5, 1.0, 2.0), (0.25, 1.0, 4.0)
GRPC_SHARES, ALLGATHER_RATIOS = (0.3, 0.5, 1.0), (0.25, 1.0)

# Figure 13 of the paper, normalized throughput at 48 GPUs: TF-PS, Horovod (MPI), Parallax (HYBRID)
PAPER = {"ResNet-50": (30.2, 39.5, 39.8), "Inception-v3": (28.4, 44.0, 43.6), "LM": (3.4, 1.3, 9.4),
         "NMT": (7.8, 6.0, 17.1)}


@dataclasses.dataclass(frozen=True)
class Model:
    dense: float  # elements
    dense_variables: int  # how many (each is a message to a server in TF-PS)
    # (name, elements, alpha: rows one GPU's step's gradient carries / rows). As `parallax calibrate` measures it:
    # every lookup, repeats included, since the gradient of a gather has a row per id looked up and neither
    # Horovod's allgather nor a server's push and pull (a gather per id) merges repeated rows.
    sparse: tuple
    step_seconds: float  # one GPU's step (assumed; swept)
    source: str


def _lm():
    """lm1b's LSTM-2048-512 (Jozefowicz et al.), vocabulary 793,470, batch 128 x 20 words, 8,192 sampled classes."""
    vocab, emb, cell = 793_470, 512, 2048
    lstm = 4 * cell * (emb + emb) + 4 * cell + cell * emb  # gates over input and projected state, bias, projection
    words = 128 * 20
    # a row per word for the embedding; for the softmax, a row per word's label and per sampled class (one draw of
    # distinct classes per batch)
    return Model(lstm, 3, (("embedding", vocab * emb, words / vocab),
                           ("softmax_w", vocab * emb, (words + 8192) / vocab),
                           ("softmax_b", vocab, (words + 8192) / vocab)), 0.25,
                 "LSTM-2048-512, vocabulary 793,470")


def _nmt():
    """GNMT-style 4-layer, 1,024 units, BPE vocabulary 36,548 per language (tensorflow/nmt's WMT16 en-de), batch 128
    sentences of about 25 tokens; the output projection is dense (full softmax)."""
    vocab, units = 36_548, 1024
    lstm = lambda inputs: 4 * units * (inputs + units) + 4 * units  # noqa: E731
    encoder = 2 * lstm(units) + lstm(2 * units) + 2 * lstm(units)  # bidirectional first layer
    decoder = 4 * lstm(2 * units) + 3 * units * units + vocab * units  # attention fed to every layer; projection
    tokens = 128 * 25  # a row per token of each side's batch
    return Model(encoder + decoder, 30, (("source_embedding", vocab * units, tokens / vocab),
                                         ("target_embedding", vocab * units, tokens / vocab)), 0.35,
                 "GNMT 4-layer, 1,024 units, vocabulary 36,548")


MODELS = {
    "ResNet-50": Model(25.6e6, 161, (), 64 / 200, "ResNet-50 v1, 25.6M parameters in 161 variables, batch 64"),
    "Inception-v3": Model(23.8e6, 292, (), 64 / 130, "Inception-v3, 23.8M parameters in 292 variables, batch 64"),
    "LM": _lm(),
    "NMT": _nmt(),
}


def workload(model, step_scale):
    seconds = model.step_seconds * step_scale
    variables = [cm.VariableLoad(f"dense_{i}", "dense", model.dense * FLOAT / model.dense_variables)
                 for i in range(model.dense_variables)]
    variables += [cm.VariableLoad(name, "sparse", elements * FLOAT, alpha, parts=MACHINES)
                  for name, elements, alpha in model.sparse]
    # a GPU computes; its host's CPU only feeds it (assumed: a tenth of the step)
    return cm.Workload(seconds, seconds * 0.1, tuple(variables))


def machine(cpu_per_gb, grpc_share=GRPC_SHARE, allgather_vs_grpc=ALLGATHER_VS_GRPC):
    """The paper's cluster; `cpu_per_gb` CPU seconds per GB a process moves by gRPC (PS) (assumed)."""
    per_byte = cpu_per_gb / 1e9
    return cm.Machine(LINK, LATENCY, CORES, {"ps": per_byte, "allreduce/horovod": per_byte / 4,
                                            "allgather/horovod": per_byte * allgather_vs_grpc},
                      {"ps": 20e-6, "allreduce/horovod": 20e-6, "allgather/horovod": 20e-6},
                      update_cpu_per_byte=per_byte / 4, cpu_per_step={"ps": 200e-6},
                      link_bandwidth={"ps": LINK * grpc_share})


def predicted(model, step_scale, cpu_per_gb, **assumed):
    """{mode: (normalized throughput, prediction)} for TF-PS, Horovod and Parallax at 48 GPUs."""
    w, m, per_host = workload(model, step_scale), machine(cpu_per_gb, **assumed), (GPUS,) * MACHINES
    plans = {"PS": plan_search.fixed_choices(w, "PS", MACHINES, local_aggregation=False),  # TF-PS: no local aggregation
             "MPI": plan_search.fixed_choices(w, "MPI", MACHINES),
             "HYBRID": plan_search.fixed_choices(w, "HYBRID", MACHINES, local_aggregation=True)}
    out = {}
    for mode, choices in plans.items():
        p = cm.predict(w, choices, per_host, m, backend="horovod")
        out[mode] = (MACHINES * GPUS * w.compute_seconds / p.seconds, p)
    return out


def auto(model, step_scale, cpu_per_gb, **assumed):
    """(normalized throughput, its gain over the best fixed mode, the plan's name) of the plan the planner's search
    (plan_search.search, which run_option AUTO runs) picks at 48 GPUs."""
    w, m, per_host = workload(model, step_scale), machine(cpu_per_gb, **assumed), (GPUS,) * MACHINES
    choices, p = plan_search.search(w, per_host, m, backend="horovod")
    fixed = predicted(model, step_scale, cpu_per_gb, **assumed)
    best = max(norm for norm, _ in fixed.values())
    norm = MACHINES * GPUS * w.compute_seconds / p.seconds
    return norm, norm / best, plan_name(w, choices)


def plan_name(w, choices):
    """"MPI's plan" (and the others' that make the same), or the variables per method of a mixed plan."""
    methods = {name: c.method for name, c in choices.items()}
    same = [mode for mode in ("PS", "MPI", "HYBRID")
            if {n: c.method for n, c in plan_search.fixed_choices(w, mode, MACHINES).items()} == methods]
    if same:
        return " and ".join(same) + "'s plan"
    counts = collections.Counter(methods.values())
    return "mixed: " + ", ".join(f"{k} {counts[k]}" for k in sorted(counts))


def responsible(p, w, m):
    """The terms of a prediction: one GPU's compute, the busiest link's bytes, the rest of the critical path (the
    worker's communication CPU and the message rounds), and the CPU bound of the busiest machine."""
    link = p.link_seconds
    rest = p.critical_path - w.compute_seconds - link
    return (f"{p.bound}: compute {w.compute_seconds * 1000:.0f} + link {link * 1000:.0f} + CPU and rounds "
            f"{rest * 1000:.0f} ms; CPU bound {p.cpu_bound * 1000:.0f} ms")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                                      "paper_scale.md"))
    args = parser.parse_args()
    lines = ["# The cost model at the paper's scale (8 machines x 6 GPUs, 100 Gbit/s)", "", __doc__.split("\n\n")[1],
             "", "## Inputs", "", "| model | architecture | dense elements | variables | sparse (elements, alpha) | "
             "one GPU's step s (assumed) |", "|---|---|---|---|---|---|"]
    for name, model in MODELS.items():
        sparse = "; ".join(f"{n} {e / 1e6:.1f}M, {a:.3f}" for n, e, a in model.sparse) or "-"
        lines.append(f"| {name} | {model.source} | {model.dense / 1e6:.1f}M | {model.dense_variables} | {sparse} | "
                     f"{model.step_seconds:.3f} |")
    lines += ["", f"Machine: {MACHINES} x {GPUS} GPUs, links {LINK * 8 / 1e9:.0f} Gbit/s (paper), latency "
              f"{LATENCY * 1e6:.0f} us, {CORES} cores per machine (assumed). CPU per GB moved by gRPC: swept "
              f"(assumed). Assumed and swept below: gRPC (TCP over IPoIB) gets {GRPC_SHARE:g} of the link, MPI all of "
              f"it; Horovod's allreduce (NCCL) costs the host a quarter of gRPC's CPU per byte, its allgather (MPI "
              f"through host memory) {ALLGATHER_VS_GRPC:g}x gRPC's.", ""]
    central = predicted_table(lines, 1.0, 1.0)
    lines += ["", "## Sensitivity to the assumed inputs", "",
              "Each row: a GPU step scaled by the factor, CPU per GB as given; ranking = does the model order the "
              "three modes as Figure 13 does; ratios within 30% = HYBRID/PS and HYBRID/MPI both.", "",
              "| step x | CPU s per GB | " + " | ".join(f"{n} ranking, ratios" for n in MODELS) + " |",
              "|---|---|" + "---|" * len(MODELS)]
    for scale in STEP_SCALES:
        for cpu in CPU_PER_GB:
            cells = []
            for name, model in MODELS.items():
                got = {k: v[0] for k, v in predicted(model, scale, cpu).items()}
                cells.append(verdict(name, got))
            lines.append(f"| {scale:g} | {cpu:g} | " + " | ".join(cells) + " |")
    lines += ["", "## Sensitivity to the assumed transports", "",
              "Central step and CPU per GB; gRPC's share of the link, and Horovod's allgather CPU per byte against "
              "gRPC's.", "", "| gRPC share | allgather / gRPC | " + " | ".join(f"{n} ranking, ratios" for n in MODELS)
              + " |", "|---|---|" + "---|" * len(MODELS)]
    for share in GRPC_SHARES:
        for allgather in ALLGATHER_RATIOS:
            cells = [verdict(name, {k: v[0] for k, v in predicted(model, 1.0, 1.0, grpc_share=share,
                                                                   allgather_vs_grpc=allgather).items()})
                     for name, model in MODELS.items()]
            lines.append(f"| {share:g} | {allgather:g} | " + " | ".join(cells) + " |")
    lines += ["", "## AUTO at the paper's scale", "",
              "The planner's search (run_option AUTO's) at 48 GPUs, every set of assumed inputs above: its predicted "
              "throughput over the best fixed mode's, and its plan.", "",
              "| step x | CPU s per GB | gRPC share | allgather / gRPC | " + " | ".join(MODELS) + " |",
              "|---|---|---|---|" + "---|" * len(MODELS)]
    gains = []
    transports = (GRPC_SHARE, ALLGATHER_VS_GRPC)  # the central ones
    for scale, cpu, share, allgather in [(s, c, *transports) for s in STEP_SCALES for c in CPU_PER_GB] + \
            [(1.0, 1.0, s, a) for s in GRPC_SHARES for a in ALLGATHER_RATIOS if (s, a) != transports]:
        cells = []
        for model in MODELS.values():
            _, gain, plan = auto(model, scale, cpu, grpc_share=share, allgather_vs_grpc=allgather)
            gains.append((gain, plan))
            cells.append(f"{gain:.3f}x, {plan}")
        lines.append(f"| {scale:g} | {cpu:g} | {share:g} | {allgather:g} | " + " | ".join(cells) + " |")
    mixed = [g for g, plan in gains if plan.startswith("mixed")]
    lines += ["", f"A mixed plan in {len(mixed)} of {len(gains)} cases, at most "
              f"{max(mixed, default=1.0):.3f}x the best fixed mode."]
    lines += ["", f"At the central inputs: {central}"]
    text = "\n".join(lines) + "\n"
    print(text)
    with open(args.out, "w") as f:
        f.write(text)
    print(f"wrote {os.path.relpath(args.out)}", file=sys.stderr)


def verdict(name, got):
    paper = dict(zip(("PS", "MPI", "HYBRID"), PAPER[name]))
    order = lambda d: sorted(d, key=lambda k: -d[k])  # noqa: E731
    ranked = order(got) == order(paper) or _ties(paper, got)
    ratios = all(abs((got["HYBRID"] / got[o]) / (paper["HYBRID"] / paper[o]) - 1) <= 0.3 for o in ("PS", "MPI"))
    return f"{'yes' if ranked else 'no'}, {'yes' if ratios else 'no'}"


def _ties(paper, got):
    """Figure 13's HYBRID and MPI are within 1% for the dense models: a tie, which either order matches, as long as
    PS is placed as the paper places it."""
    close = math.isclose(paper["HYBRID"], paper["MPI"], rel_tol=0.02)
    return close and (got["PS"] < min(got["HYBRID"], got["MPI"])) == (paper["PS"] < min(paper["HYBRID"],
                                                                                       paper["MPI"]))


def predicted_table(lines, scale, cpu):
    lines += ["## Figure 13 and the model (central inputs)", "",
              "| model | mode | paper | model | model / paper | what sets the model's step |", "|---|---|---|---|---|---|"]
    agree = []
    for name, model in MODELS.items():
        got = predicted(model, scale, cpu)
        for i, mode in enumerate(("PS", "MPI", "HYBRID")):
            norm, p = got[mode]
            lines.append(f"| {name} | {mode} | {PAPER[name][i]} | {norm:.1f} | {norm / PAPER[name][i]:.2f} | "
                         f"{responsible(p, workload(model, scale), machine(cpu))} |")
        norm, gain, plan = auto(model, scale, cpu)
        lines.append(f"| {name} | AUTO | - | {norm:.1f} | - | {plan}; {gain:.3f}x the best fixed mode |")
        g = {k: v[0] for k, v in got.items()}
        lines.append(f"| {name} | HYBRID/PS, HYBRID/MPI | {PAPER[name][2] / PAPER[name][0]:.2f}, "
                     f"{PAPER[name][2] / PAPER[name][1]:.2f} | {g['HYBRID'] / g['PS']:.2f}, "
                     f"{g['HYBRID'] / g['MPI']:.2f} | | |")
        agree.append(f"{name}: ranking, ratios {verdict(name, g)}")
    return "; ".join(agree)


if __name__ == "__main__":
    main()
