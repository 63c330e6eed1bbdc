"""The models' data generators write what their docstrings promise."""
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "models", "nmt"))
import make_data as nmt_data  # noqa: E402


def _make(script, out, *args):
    subprocess.run([sys.executable, os.path.join(ROOT, "models", script), "--out", str(out), *args], check=True,
                   capture_output=True)


def test_lm_corpus_has_the_one_billion_word_layout(tmp_path):
    _make("lm/make_data.py", tmp_path)
    train = sorted(os.listdir(tmp_path / "training-monolingual.tokenized.shuffled"))
    assert train[0] == "news.en-00001-of-00100" and len(train) == 4
    assert os.listdir(tmp_path / "heldout-monolingual.tokenized.shuffled") == ["news.en.heldout-00000-of-00050"]
    vocab = (tmp_path / "vocab.txt").read_text().split("\n")
    assert vocab[:3] == ["<S>", "</S>", "<UNK>"] and "the" in vocab[3:6] and len(vocab) > 1000
    again = tmp_path / "again"
    _make("lm/make_data.py", again)
    assert (again / "vocab.txt").read_text() == (tmp_path / "vocab.txt").read_text()  # deterministic


def test_lm_synthetic_corpus_is_zipfian_over_the_asked_vocabulary(tmp_path):
    _make("lm/make_data.py", tmp_path, "--synthetic-vocab", "5000", "--synthetic-words", "200000")
    vocab = (tmp_path / "vocab.txt").read_text().split()
    assert len(vocab) - 3 == 5000 and len(set(vocab)) == len(vocab) and vocab[3] == "w0"  # w0: the most frequent
    words = " ".join(p.read_text() for p in (tmp_path / "training-monolingual.tokenized.shuffled").iterdir())
    counts = [words.split().count(w) for w in ("w0", "w9")]
    assert 5 < counts[0] / counts[1] < 20  # Zipf(1.1): rank 1 against rank 10 is about 10**1.1 = 12.6


def test_nmt_pairs_reorder_and_agree():
    import random
    lex = nmt_data.lexicon(0)
    source_verbs = {lex[v]: v for v in nmt_data.VERBS}
    rng = random.Random(1)
    for _ in range(200):
        src, tgt = (s.split() for s in nmt_data.sentence_pair(rng, lex))
        past = src[-1] == "ta"
        verb_word = src[-2] if past else src[-1]  # verb-final source
        english = source_verbs[verb_word[:-1]]
        plural_subject = verb_word.endswith("u")
        expected = english + "ed" if past else (english if plural_subject else english + "s")
        assert expected in tgt and tgt.index(expected) in (2, 3)  # SVO: after "the [adjective] noun"
        subject = tgt[tgt.index(expected) - 1]
        assert subject.endswith("s") == plural_subject or subject[:-1] not in nmt_data.NOUNS


def _recsys_rows(path):
    with open(path) as f:
        return [line.rstrip("\n").split("\t") for line in f]


def test_recsys_logs_have_the_criteo_layout_and_a_power_law(tmp_path):
    import json

    import numpy as np
    _make("recsys/make_data.py", tmp_path, "--train-rows", "30000", "--heldout-rows", "3000", "--train-files", "2")
    assert sorted(os.listdir(tmp_path)) == ["features.json", "heldout.tsv", "train-00001-of-00002.tsv",
                                            "train-00002-of-00002.tsv"]
    features = json.loads((tmp_path / "features.json").read_text())
    assert features["dense"] == 13 and len(features["cardinalities"]) == 26
    rows = _recsys_rows(tmp_path / "train-00001-of-00002.tsv") + _recsys_rows(tmp_path / "train-00002-of-00002.tsv")
    assert len(rows) == 30000 and len(_recsys_rows(tmp_path / "heldout.tsv")) == 3000
    assert {len(r) for r in rows} == {40}
    labels = np.array([int(r[0]) for r in rows])
    assert set(labels) == {0, 1} and 0.1 < labels.mean() < 0.4  # a click-through rate
    categorical = [v for r in rows for v in r[14:]]
    empty = sum(v == "" for v in categorical) / len(categorical)
    assert 0.02 < empty < 0.06 and all(len(v) == 8 and int(v, 16) >= 0 for v in categorical if v)
    c1 = [r[14] for r in rows if r[14]]
    values, counts = np.unique(c1, return_counts=True)
    ranked = np.sort(counts)[::-1]
    assert 5 < ranked[0] / ranked[9] < 14  # Zipf(1.1) over ranks 1 and 10, in the continuous approximation: 8.9
    assert len(values) > 3000  # and a long tail: C1 has 10 million categories
    # The label depends on the categories: over C1's 20 most frequent values, the click counts are far from one
    # shared rate (chi-square with 19 degrees of freedom: 19 on average if they were not; 41 at p = 0.002)...
    rate = labels.mean()
    c1_of_row = np.array([r[14] for r in rows])
    chi2 = 0.0
    for v in values[np.argsort(counts)[::-1][:20]]:
        chosen = labels[c1_of_row == v]
        chi2 += (chosen.sum() - len(chosen) * rate) ** 2 / (len(chosen) * rate * (1 - rate))
    assert chi2 > 41, chi2
    # ... and on the counts: some count correlates with it.
    log_counts = np.array([[np.log1p(float(v or 0)) for v in r[1:14]] for r in rows])
    assert max(abs(np.corrcoef(log_counts[:, j], labels)[0, 1]) for j in range(13)) > 0.05
    again = tmp_path / "again"
    _make("recsys/make_data.py", again, "--train-rows", "30000", "--heldout-rows", "3000", "--train-files", "2")
    assert (again / "heldout.tsv").read_text() == (tmp_path / "heldout.tsv").read_text()  # deterministic


def test_recsys_refuses_empty_sizes(tmp_path):
    result = subprocess.run([sys.executable, os.path.join(ROOT, "models", "recsys", "make_data.py"), "--out",
                             str(tmp_path), "--train-rows", "0"], capture_output=True, text=True)
    assert result.returncode == 2 and "must be positive" in result.stderr
