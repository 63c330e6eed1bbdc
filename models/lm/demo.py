"""`make demo`: train the LM with parallax (HYBRID, 2 workers on localhost), evaluate its checkpoint in the
single-device graph, and compare with a single-device run of the same total batch. `make demo-keras` (--keras):
the same with the LM as a Keras model trained by Model.fit (train_keras.py, train_keras_distributed.py).

    python models/lm/demo.py [--keras] [--steps 600] [--work-dir demo-run] [--max-difference PERCENT]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def step(text):
    print(f"\n== {text}", flush=True)


def run(args, show=True):
    """Run a script of this folder, echo its progress lines, return its output."""
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if show and (" step " in line or line.startswith(("parallax:", "held-out", "wrote"))):
            print("   " + line.rstrip(), flush=True)
    if proc.wait() != 0:
        sys.exit(f"demo: {' '.join(args)} failed:\n{''.join(lines[-40:])}")
    return "".join(lines)


SCRIPTS = {False: ("train.py", "train_distributed.py", "eval.py"),
           True: ("train_keras.py", "train_keras_distributed.py", "eval_keras.py")}  # by --keras


def perplexity(script, data, ckpt):
    out = run([os.path.join(HERE, script), "--data-dir", data, "--checkpoint-dir", ckpt], show=False)
    return float(re.search(r"held-out perplexity ([0-9.]+)", out).group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--batch-size", type=int, default=32, help="total batch")
    p.add_argument("--work-dir", default=os.path.join(ROOT, "demo-run"))
    p.add_argument("--keras", action="store_true", help="the LM as a Keras model, trained with Model.fit")
    p.add_argument("--max-difference", type=float, metavar="PERCENT",
                   help="exit 1 when the held-out perplexities differ by more than this (relative, in percent)")
    args = p.parse_args()
    train, train_distributed, evaluate = SCRIPTS[args.keras]
    started = time.time()
    shutil.rmtree(args.work_dir, ignore_errors=True)
    data = os.path.join(args.work_dir, "data")
    common = ["--data-dir", data, "--steps", str(args.steps), "--log-every", "100"]

    step("1. data: One Billion Word layout, written from CPython's pydoc topics")
    run([os.path.join(HERE, "make_data.py"), "--out", data])

    step(f"2. parallax: HYBRID, 2 workers of batch {args.batch_size // 2} on localhost")
    dist_ckpt = os.path.join(args.work_dir, "ckpt-parallax")
    t = time.time()
    run([os.path.join(HERE, train_distributed), *common, "--batch-size", str(args.batch_size // 2),
         "--resource-spec", "localhost:2", "--run-option", "HYBRID", "--checkpoint-dir", dist_ckpt,
         "--log-dir", os.path.join(args.work_dir, "tensorboard")])
    dist_seconds = time.time() - t

    step(f"3. reference: one process, batch {args.batch_size}")
    single_ckpt = os.path.join(args.work_dir, "ckpt-single")
    t = time.time()
    run([os.path.join(HERE, train), *common, "--batch-size", str(args.batch_size), "--checkpoint-dir",
         single_ckpt])
    single_seconds = time.time() - t

    step(f"4. eval: each checkpoint restored into the unmodified single-device model (models/lm/{evaluate})")
    ppl_dist, ppl_single = perplexity(evaluate, data, dist_ckpt), perplexity(evaluate, data, single_ckpt)
    print(f"   held-out perplexity, parallax (2 workers): {ppl_dist:.2f}   ({dist_seconds:.0f} s incl. start-up)")
    print(f"   held-out perplexity, single device:        {ppl_single:.2f}   ({single_seconds:.0f} s)")
    difference = abs(ppl_dist / ppl_single - 1) * 100
    print(f"   relative difference: {difference:.2f}%")
    print(f"\ndemo finished in {time.time() - started:.0f} s; checkpoints and TensorBoard logs in {args.work_dir}")
    if args.max_difference is not None and difference > args.max_difference:
        sys.exit(f"demo: the perplexities differ by {difference:.3f}%, more than --max-difference "
                 f"{args.max_difference}%")


if __name__ == "__main__":
    main()
