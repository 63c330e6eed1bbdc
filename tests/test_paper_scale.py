"""benchmarks/paper_scale.py: the cost model fed the paper's setting (48 GPUs) gives figures that can be compared with
Figure 13, and the benchmark writes its table."""
import importlib.util
import os

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
spec = importlib.util.spec_from_file_location("paper_scale", os.path.join(ROOT, "benchmarks", "paper_scale.py"))
paper_scale = importlib.util.module_from_spec(spec)
spec.loader.exec_module(paper_scale)


def test_normalized_throughputs_are_those_of_48_gpus_and_hybrid_wins_where_variables_are_sparse():
    for name, model in paper_scale.MODELS.items():
        got = {mode: norm for mode, (norm, _) in paper_scale.predicted(model, 1.0, 1.0).items()}
        assert all(0 < v <= 48 for v in got.values()), (name, got)
        if model.sparse:
            assert got["HYBRID"] > max(got["PS"], got["MPI"]), (name, got)
        else:  # no sparse variable: HYBRID's plan is MPI's
            assert got["HYBRID"] == got["MPI"], (name, got)


@pytest.mark.slow  # the whole benchmark: 45 s
def test_the_benchmark_writes_every_model_and_mode_beside_the_paper(tmp_path, monkeypatch):
    out = tmp_path / "paper_scale.md"
    monkeypatch.setattr("sys.argv", ["paper_scale.py", "--out", str(out)])
    paper_scale.main()
    text = out.read_text()
    for name, figures in paper_scale.PAPER.items():
        for mode, figure in zip(("PS", "MPI", "HYBRID"), figures):
            assert f"| {name} | {mode} | {figure} |" in text
        assert f"| {name} | AUTO | - |" in text
    assert "## AUTO at the paper's scale" in text and "A mixed plan in " in text


def test_sparse_rows_are_counted_as_the_gradient_carries_them():
    """alpha means what parallax calibrate measures (workload_probe: every index of the gradient, repeats
    included), so each sparse variable's rows per step are at least the batch's lookups of it, never a guess at
    the distinct ones: the LM's 128 x 20 words, NMT's 128 x 25 tokens."""
    lookups = {"LM": 128 * 20, "NMT": 128 * 25}
    for name, per_step in lookups.items():
        model = paper_scale.MODELS[name]
        for variable, elements, alpha in model.sparse:
            rows = {"LM": 793_470, "NMT": 36_548}[name]
            assert alpha * rows >= per_step - 1e-6, (name, variable, alpha * rows)


def test_at_the_central_inputs_the_model_ranks_the_modes_as_figure_13_does():
    for name, model in paper_scale.MODELS.items():
        got = {mode: norm for mode, (norm, _) in paper_scale.predicted(model, 1.0, 1.0).items()}
        assert paper_scale.verdict(name, got) == "yes, yes", (name, got, paper_scale.PAPER[name])


def test_auto_is_never_slower_than_a_fixed_mode_and_names_its_plan():
    """AUTO's search starts from every fixed mode, so at the paper's scale it predicts at least the best one's
    throughput; its plan is named after the fixed modes that make it, or counted as mixed."""
    for name, model in paper_scale.MODELS.items():
        for cpu in (0.25, 4.0):
            norm, gain, plan = paper_scale.auto(model, 1.0, cpu)
            fixed = paper_scale.predicted(model, 1.0, cpu)
            assert gain >= 1 - 1e-9, (name, cpu, gain)
            assert abs(norm / gain - max(n for n, _ in fixed.values())) < 1e-9
            assert plan.endswith("'s plan") or plan.startswith("mixed: "), plan
    w = paper_scale.workload(paper_scale.MODELS["LM"], 1.0)
    hybrid = paper_scale.plan_search.fixed_choices(w, "HYBRID", paper_scale.MACHINES)
    assert paper_scale.plan_name(w, hybrid) == "HYBRID's plan"
    mixed = dict(hybrid, embedding=paper_scale.cm.Choice(paper_scale.cm.AG))
    assert paper_scale.plan_name(w, mixed) == "mixed: AG 1, AR 3, PS 2"
    resnet = paper_scale.workload(paper_scale.MODELS["ResNet-50"], 1.0)
    both = paper_scale.plan_search.fixed_choices(resnet, "MPI", paper_scale.MACHINES)
    assert paper_scale.plan_name(resnet, both) == "MPI and HYBRID's plan"
