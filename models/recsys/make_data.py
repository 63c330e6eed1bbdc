"""Write synthetic click logs in the Criteo layout: no download, deterministic for a given --seed.

    <out>/train-0000K-of-0000N.tsv   label, I1..I13, C1..C26: tab-separated, one impression per line
    <out>/heldout.tsv                the same, for eval.py's AUC
    <out>/features.json              each categorical feature's number of distinct values (its cardinality)

As in Criteo's display-advertising logs:
- I1..I13 are counts (log-normal, some empty);
- C1..C26 are 8-hex-digit hashes of a category whose rank follows a power law (Zipf) over the feature's
  cardinality, from 10 to 10 million (some empty);
- the label is a click, drawn from sigmoid(logit). The logit sums a linear effect of log(1 + I), a fixed random
  effect per category of 12 of the 26 features, and an interaction of C5 and C6 (a product of per-category latent
  values). So a model must learn both the dense features and the embeddings to reach the best AUC.

    python models/recsys/make_data.py --out data/recsys
    python models/recsys/make_data.py --out data/recsys-small --train-rows 40000 --heldout-rows 10000
"""
import argparse
import json
import os

import numpy as np

NUM_DENSE, NUM_CATEGORICAL = 13, 26
# Criteo Kaggle's cardinalities span 3 to 10 million; these span 10 to 10 million, most of the rows in C1-C4.
CARDINALITIES = [10_000_000, 5_000_000, 2_000_000, 1_000_000, 300_000, 200_000, 100_000, 100_000, 50_000, 30_000,
                 20_000, 10_000, 10_000, 5_000, 3_000, 2_000, 1_000, 1_000, 500, 300, 100, 100, 50, 30, 20, 10]
ZIPF_EXPONENT = 1.1
INFORMATIVE = (0, 1, 2, 4, 5, 7, 9, 12, 15, 18, 21, 24)  # the features whose categories carry an effect
INTERACTING = (4, 5)  # C5 and C6
MISSING = 0.04  # the share of empty fields
_RANK_BLOCK = 1 << 20  # categories whose effect is drawn in one block of random numbers


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--train-rows", type=int, default=400_000)
    p.add_argument("--heldout-rows", type=int, default=50_000)
    p.add_argument("--train-files", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if min(args.train_rows, args.heldout_rows, args.train_files) < 1:
        p.error("--train-rows, --heldout-rows and --train-files must be positive")
    return args


def zipf_ranks(rng, cardinality, n):
    """n ranks in [0, cardinality), P(rank r) proportional to (r + 1) ** -ZIPF_EXPONENT."""
    u = rng.random_sample(n)
    # The inverse of the continuous power law's CDF over [1, cardinality + 1), floored to a rank.
    a = 1.0 - ZIPF_EXPONENT
    top = (cardinality + 1.0) ** a
    ranks = np.floor((1.0 + u * (top - 1.0)) ** (1.0 / a)).astype(np.int64) - 1
    return np.clip(ranks, 0, cardinality - 1)


def category_values(feature, ranks, seed, scale):
    """A fixed N(0, scale) value per (feature, category): the same category draws the same value in every row,
    split and run. Drawn in blocks of ranks, so a 10-million-category feature costs only the blocks it uses."""
    out = np.empty(len(ranks))
    blocks = ranks // _RANK_BLOCK
    for block in np.unique(blocks):
        values = np.random.RandomState([seed, feature, int(block)]).randn(_RANK_BLOCK) * scale
        chosen = blocks == block
        out[chosen] = values[ranks[chosen] % _RANK_BLOCK]
    return out


def category_hash(feature, ranks):
    """Criteo's categorical values are 8-hex-digit hashes; these are a bijection of (feature, rank)."""
    mixed = (ranks * 2654435761 + feature * 40503 + 12345) % (1 << 32)
    return np.char.mod("%08x", mixed)


def impressions(rng, n, seed):
    """(labels [n], counts [n, 13] or -1 for empty, ranks [n, 26] or -1 for empty)."""
    counts = np.floor(rng.lognormal(np.linspace(0.0, 3.0, NUM_DENSE), 1.2, size=(n, NUM_DENSE))).astype(np.int64)
    ranks = np.stack([zipf_ranks(rng, c, n) for c in CARDINALITIES], axis=1)
    weights = np.random.RandomState([seed, 99]).randn(NUM_DENSE) * 0.4
    logit = -1.2 + (np.log1p(counts) - 1.5) @ weights / 2.0
    for f in INFORMATIVE:
        logit += category_values(f, ranks[:, f], seed, 0.7)
    a, b = INTERACTING
    logit += 1.5 * category_values(100 + a, ranks[:, a], seed, 1.0) * category_values(100 + b, ranks[:, b], seed,
                                                                                       1.0)
    labels = (rng.random_sample(n) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int64)
    counts[rng.random_sample(counts.shape) < MISSING] = -1
    ranks[rng.random_sample(ranks.shape) < MISSING] = -1
    return labels, counts, ranks


def lines(labels, counts, ranks):
    columns = [labels.astype(str)]
    columns += [np.where(counts[:, j] < 0, "", counts[:, j].astype(str)) for j in range(NUM_DENSE)]
    columns += [np.where(ranks[:, f] < 0, "", category_hash(f, np.maximum(ranks[:, f], 0)))
                for f in range(NUM_CATEGORICAL)]
    return ["\t".join(row) for row in zip(*columns)]


def write(path, rows, rng, seed, chunk=50_000):
    with open(path, "w") as f:
        for start in range(0, rows, chunk):
            f.write("\n".join(lines(*impressions(rng, min(chunk, rows - start), seed))) + "\n")


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.RandomState(args.seed)
    per_file = -(-args.train_rows // args.train_files)
    for k in range(args.train_files):
        rows = min(per_file, args.train_rows - k * per_file)
        if rows > 0:
            write(os.path.join(args.out, f"train-{k + 1:05d}-of-{args.train_files:05d}.tsv"), rows, rng, args.seed)
            print(f"train file {k + 1}/{args.train_files}: {rows} impressions", flush=True)
    write(os.path.join(args.out, "heldout.tsv"), args.heldout_rows, rng, args.seed)
    with open(os.path.join(args.out, "features.json"), "w") as f:
        json.dump({"dense": NUM_DENSE, "cardinalities": CARDINALITIES}, f, indent=1)
    print(f"wrote {args.train_rows} training and {args.heldout_rows} held-out impressions to {args.out}")


if __name__ == "__main__":
    main()
