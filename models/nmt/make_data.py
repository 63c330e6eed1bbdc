"""Write a parallel corpus in the tensorflow/nmt layout: train/dev/test .src and .tgt files, one sentence per
line, and vocab.src / vocab.tgt.

The generator (documented so that a reader can check what a model must learn), seeded by --seed:
- The source language is verb-final (SOV) and has its own words. A sentence is
  `SUBJECT OBJECT VERB [TENSE]`, where a noun phrase is `[ADJECTIVE] NOUN [PLURAL]`. The plural marker is the
  separate word `ka`. The verb carries subject agreement in its form: stem + `i` for a singular subject, stem + `u`
  for a plural one. The tense particle `ta` at the end marks the past.
- The target language is English-like and verb-medial (SVO): `the [adjective] noun(s) verb the [adjective]
  noun(s)`. Plural nouns take an `s`. In the present, a singular subject takes `verb+s` and a plural one the bare
  verb. In the past, both take `verb+ed`.
So a model must reorder (the verb moves from the end to the middle), translate words, carry number from the
noun's marker to the noun's form and to the verb's agreement, and carry tense from the last word to the verb.

    python models/nmt/make_data.py --out data/nmt
"""
import argparse
import os
import random

NOUNS = ["cat", "dog", "bird", "fish", "horse", "king", "farmer", "child", "teacher", "doctor", "river", "tree",
         "stone", "apple", "boat", "house", "garden", "letter", "song", "window", "friend", "soldier", "baker",
         "painter"]
ADJECTIVES = ["big", "small", "old", "young", "red", "green", "quiet", "happy", "tall", "dark", "bright", "cold"]
VERBS = ["see", "follow", "paint", "visit", "watch", "help", "call", "greet", "want", "find", "carry", "clean",
         "climb", "push", "pull", "guard"]
SPECIALS = ["<unk>", "<s>", "</s>"]


def _source_word(english, seed_text):
    """A made-up word for an English one: a fixed syllable spelling, so the mapping is a bijection."""
    rng = random.Random(seed_text + english)
    consonants, vowels = "bdfgklmnprstvz", "aeiou"
    return "".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(2)) + rng.choice(consonants)


def lexicon(seed):
    words = {}
    for w in NOUNS + ADJECTIVES + VERBS:
        candidate, salt = _source_word(w, str(seed)), 0
        while candidate in words.values():
            salt += 1
            candidate = _source_word(w, f"{seed}-{salt}")
        words[w] = candidate
    return words


def sentence_pair(rng, lex):
    def noun_phrase():
        adjective = rng.choice(ADJECTIVES) if rng.random() < 0.5 else None
        noun, plural = rng.choice(NOUNS), rng.random() < 0.4
        src = ([lex[adjective]] if adjective else []) + [lex[noun]] + (["ka"] if plural else [])
        tgt = ["the"] + ([adjective] if adjective else []) + [noun + ("s" if plural else "")]
        return src, tgt, plural

    (s_src, s_tgt, s_plural), (o_src, o_tgt, _) = noun_phrase(), noun_phrase()
    verb, past = rng.choice(VERBS), rng.random() < 0.3
    src = s_src + o_src + [lex[verb] + ("u" if s_plural else "i")] + (["ta"] if past else [])
    english_verb = verb + "ed" if past else (verb if s_plural else verb + "s")
    return " ".join(src), " ".join(s_tgt + [english_verb] + o_tgt)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train", type=int, default=20000)
    p.add_argument("--dev", type=int, default=500)
    p.add_argument("--test", type=int, default=500)
    args = p.parse_args()
    rng, lex = random.Random(args.seed), lexicon(args.seed)
    os.makedirs(args.out, exist_ok=True)
    vocab = {"src": set(), "tgt": set()}
    for split, count in (("train", args.train), ("dev", args.dev), ("test", args.test)):
        pairs = [sentence_pair(rng, lex) for _ in range(count)]
        for side, index in (("src", 0), ("tgt", 1)):
            with open(os.path.join(args.out, f"{split}.{side}"), "w") as f:
                f.writelines(pair[index] + "\n" for pair in pairs)
            if split == "train":
                vocab[side].update(w for pair in pairs for w in pair[index].split())
    for side in ("src", "tgt"):
        with open(os.path.join(args.out, f"vocab.{side}"), "w") as f:
            f.writelines(w + "\n" for w in SPECIALS + sorted(vocab[side]))
    print(f"wrote {args.out}: {args.train}/{args.dev}/{args.test} sentence pairs, vocabularies of "
          f"{len(vocab['src']) + 3} source and {len(vocab['tgt']) + 3} target words")


if __name__ == "__main__":
    main()
