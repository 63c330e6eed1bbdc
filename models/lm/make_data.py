"""Write a language-modeling corpus in the One Billion Word benchmark's layout.

    <out>/training-monolingual.tokenized.shuffled/news.en-000NN-of-00100   one tokenized sentence per line
    <out>/heldout-monolingual.tokenized.shuffled/news.en.heldout-0000N-of-00050
    <out>/vocab.txt                                                          one word per line, most frequent first

The text is real English that ships with CPython: the help topics of `pydoc_data.topics` (about 90k words).
`--synthetic-vocab V` writes instead a Zipfian corpus over V made-up words, for benchmarks that need a very large
embedding; its vocabulary is all V words (plus the three specials), whether or not the sample uses them. Both are deterministic for a given --seed.

    python models/lm/make_data.py --out data/lm
    python models/lm/make_data.py --out data/lm-200k --synthetic-vocab 200000 --synthetic-words 2000000
"""
import argparse
import collections
import os
import random
import re

SPECIALS = ["<S>", "</S>", "<UNK>"]
TRAIN_DIR = "training-monolingual.tokenized.shuffled"
HELDOUT_DIR = "heldout-monolingual.tokenized.shuffled"
_TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)?|[0-9]+|[.,;:!?()\"'=+/<>-]")


def pydoc_sentences():
    """Lower-cased, tokenized sentences of CPython's help topics: prose paragraphs only (grammar rules, code
    examples and heading underlines are dropped)."""
    from pydoc_data.topics import topics
    sentences = []
    for name in sorted(topics):
        for paragraph in re.split(r"\n\s*\n", topics[name]):
            text = " ".join(line.strip() for line in paragraph.splitlines())
            letters = sum(c.isalpha() or c.isspace() for c in text)
            if not text or ">>>" in text or "::=" in text or letters < 0.85 * len(text):
                continue
            text = re.sub(r"^[*-] ", "", text).replace("*", "").replace("`", "")
            for sentence in re.split(r"(?<=[.!?])\s+", text):
                tokens = _TOKEN.findall(sentence.lower())
                if 3 <= len(tokens) <= 60:
                    sentences.append(tokens)
    return sentences


def synthetic_sentences(vocab_size, num_words, seed):
    """Sentences over `vocab_size` words drawn from a Zipf(1.1) law, 5 to 30 words long."""
    import numpy as np
    rng = np.random.RandomState(seed)
    ranks = np.arange(1, vocab_size + 1, dtype=np.float64)
    p = ranks ** -1.1
    p /= p.sum()
    words = rng.choice(vocab_size, size=num_words, p=p)
    sentences, i = [], 0
    while i < num_words:
        n = int(rng.randint(5, 31))
        sentences.append([f"w{w}" for w in words[i:i + n]])
        i += n
    return sentences


def write_corpus(sentences, out, seed, heldout_fraction=0.1, train_shards=4, min_count=2, all_words=()):
    """`all_words`: words that belong in the vocabulary even if the training text never uses them (after the
    ones it does, in the given order)."""
    random.Random(seed).shuffle(sentences)
    n_heldout = max(1, int(len(sentences) * heldout_fraction))
    heldout, train = sentences[:n_heldout], sentences[n_heldout:]
    counts = collections.Counter(w for s in train for w in s)
    vocab = SPECIALS + [w for w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if c >= min_count]
    vocab += [w for w in all_words if w not in counts]
    os.makedirs(os.path.join(out, TRAIN_DIR), exist_ok=True)
    os.makedirs(os.path.join(out, HELDOUT_DIR), exist_ok=True)
    for shard in range(train_shards):
        path = os.path.join(out, TRAIN_DIR, f"news.en-{shard + 1:05d}-of-00100")
        _write_lines(path, (" ".join(s) for s in train[shard::train_shards]))
    _write_lines(os.path.join(out, HELDOUT_DIR, "news.en.heldout-00000-of-00050"), (" ".join(s) for s in heldout))
    _write_lines(os.path.join(out, "vocab.txt"), vocab)
    return {"train_sentences": len(train), "heldout_sentences": len(heldout), "vocab": len(vocab),
            "train_words": sum(map(len, train))}


def _write_lines(path, lines):
    with open(path, "w") as f:
        for line in lines:
            f.write(line + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--synthetic-vocab", type=int, metavar="V")
    p.add_argument("--synthetic-words", type=int, default=1_000_000)
    args = p.parse_args()
    if args.synthetic_vocab:
        sentences = synthetic_sentences(args.synthetic_vocab, args.synthetic_words, args.seed)
        # The whole vocabulary is the model's, as in LM-1B, whose rarest words hardly occur: V rows of embedding.
        stats = write_corpus(sentences, args.out, args.seed, min_count=1,
                             all_words=[f"w{i}" for i in range(args.synthetic_vocab)])
    else:
        stats = write_corpus(pydoc_sentences(), args.out, args.seed)
    print(f"wrote {args.out}: " + ", ".join(f"{k} {v}" for k, v in stats.items()))


if __name__ == "__main__":
    main()
