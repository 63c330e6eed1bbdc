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
