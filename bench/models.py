#!/usr/bin/env python3
"""Model suites from torchvision, and model-level summaries of `nconv bench --csv`.

    /usr/bin/python3 bench/models.py suite [--batch N] [--size S] MODEL [MODEL ...] > SUITE.txt
    /usr/bin/python3 bench/models.py summary [--worst K] TABLE.csv [TABLE.csv ...]
    /usr/bin/python3 bench/models.py list

suite: builds each torchvision model (random weights, nothing downloaded),
runs one forward pass on a batch of N random S x S images (defaults 8 and
224) and records every convolution it runs, in oneDNN benchdnn syntax, one
line per distinct layer, named "MODEL:L<i>x<count>" (i: order of first use;
count: how many times the model runs that layer). The output is a suite for
`nconv bench --batch` and `nconv check --batch`. Layers a benchdnn
descriptor cannot state (padding modes other than zeros, transposed
convolutions) are left out and reported on stderr. Needs torch and
torchvision (Debian's python3-torch and python3-torchvision).

summary: reads tables written by `nconv bench --csv` over such suites (one
file per thread count, or several concatenated) and prints, per model,
direction, layout and thread count, the model's convolution time as the
count-weighted sum of its layers, for nconv one-shot calls (ms), nconv
plans (plan_ms) and oneDNN, with ratio = oneDNN time / nconv time (> 1:
nconv is faster); then the K lowest-ratio layers of each model, direction,
layout and thread count with their GB/s (next to the machine's measured
bandwidth) and their share of the model's nconv time.
Standard library only.

list: the model names this torchvision knows.
"""
import collections
import csv
import re
import sys


def usage(msg):
    sys.exit("models.py: %s\n%s" % (msg, __doc__.split("\n\n")[1]))


def take_option(args, name, default, conv=int):
    if name not in args:
        return default
    i = args.index(name)
    if i + 1 >= len(args):
        usage("%s needs a value" % name)
    try:
        value = conv(args[i + 1])
    except ValueError:
        usage("%s = '%s': not a number" % (name, args[i + 1]))
    del args[i:i + 2]
    return value


def descriptor(mod, x_shape, y_shape):
    """The benchdnn descriptor of convolution module `mod` run on x_shape -> y_shape, or None and why."""
    import torch.nn as nn
    if isinstance(mod, (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)):
        return None, "transposed convolution"
    if getattr(mod, "padding_mode", "zeros") != "zeros":
        return None, "padding mode %s" % mod.padding_mode
    nd = len(x_shape) - 2
    axes = ["d", "h", "w"][3 - nd:]
    k, s, d = mod.kernel_size, mod.stride, mod.dilation
    ins, outs = x_shape[2:], y_shape[2:]
    if isinstance(mod.padding, str):  # 'same' / 'valid': the begin padding PyTorch applies
        pad = [0] * nd
        if mod.padding == "same":
            pad = [((k[a] - 1) * d[a]) // 2 for a in range(nd)]
    else:
        pad = list(mod.padding)
    text = "g%dmb%dic%d" % (mod.groups, x_shape[0], x_shape[1])
    text += "".join("i%s%d" % (axes[a], ins[a]) for a in range(nd))
    text += "oc%d" % y_shape[1]
    text += "".join("o%s%d" % (axes[a], outs[a]) for a in range(nd))
    text += "".join("k%s%d" % (axes[a], k[a]) for a in range(nd))
    text += "".join("s%s%d" % (axes[a], s[a]) for a in range(nd))
    text += "".join("p%s%d" % (axes[a], pad[a]) for a in range(nd))
    text += "".join("d%s%d" % (axes[a], d[a] - 1) for a in range(nd))  # benchdnn: dilation - 1
    return text, None


def model_layers(name, batch, size):
    """[(descriptor, count)] of model `name` in order of first use, and [(module name, why left out)]."""
    import torch
    import torch.nn as nn
    import torchvision
    torch.manual_seed(0)
    try:
        model = torchvision.models.get_model(name, weights=None)
    except Exception as e:  # unknown names raise ValueError; some models need arguments
        sys.exit("models.py: model '%s': %s (models.py list: the names this torchvision knows)" % (name, e))
    model.eval()
    convs = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
    counts, skipped, hooks = collections.OrderedDict(), [], []

    def hook(module_name):
        def record(mod, inputs, output):
            desc, why = descriptor(mod, tuple(inputs[0].shape), tuple(output.shape))
            if desc is None:
                skipped.append((module_name, why))
            else:
                counts[desc] = counts.get(desc, 0) + 1
        return record

    for module_name, mod in model.named_modules():
        if isinstance(mod, convs):
            hooks.append(mod.register_forward_hook(hook(module_name)))
    with torch.no_grad():
        model(torch.randn(batch, 3, size, size))
    for h in hooks:
        h.remove()
    return list(counts.items()), skipped


def suite(args):
    batch = take_option(args, "--batch", 8)
    size = take_option(args, "--size", 224)
    if batch < 1 or size < 1:
        usage("--batch and --size must be >= 1")
    if not args:
        usage("suite: name at least one model")
    for name in args:
        layers, skipped = model_layers(name, batch, size)
        for i, (desc, count) in enumerate(layers):
            print('%sn"%s:L%dx%d"' % (desc, name, i, count))
        for module_name, why in skipped:
            print("models.py: %s: %s left out (%s)" % (name, module_name, why), file=sys.stderr)
        if not layers:
            print("models.py: %s: no convolution ran" % name, file=sys.stderr)


NAME = re.compile(r"^(?P<model>.+):L(?P<index>\d+)x(?P<count>\d+)$")


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def summary(args):
    worst = take_option(args, "--worst", 3)
    if not args:
        usage("summary: name at least one table")
    groups = collections.OrderedDict()  # (model, dir, layout, threads) -> [(row, count)]
    for path in args:
        with open(path) as f:
            for row in csv.DictReader(f):
                m = NAME.match(row.get("name") or "")
                if not m or number(row.get("ms")) is None:
                    continue
                key = (m.group("model"), row["dir"], row["layout"], row["threads"])
                groups.setdefault(key, []).append((row, int(m.group("count"))))
    if not groups:
        sys.exit("models.py: no rows named MODEL:L<i>x<count> with a time in %s" % ", ".join(args))
    print("| model | dir | layout | threads | layers | nconv ms | plan ms | oneDNN ms | ratio | plan ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (model, direction, layout, threads), rows in groups.items():
        ms = sum(number(r["ms"]) * c for r, c in rows)
        plan = [number(r.get("plan_ms")) for r, _ in rows]
        plan_ms = sum(p * c for p, (_, c) in zip(plan, rows)) if all(p is not None for p in plan) else None
        peer = [number(r.get("onednn_ms")) for r, _ in rows]
        peer_ms = sum(p * c for p, (_, c) in zip(peer, rows)) if all(p is not None for p in peer) else None
        fmt = lambda v: "-" if v is None else "%.3f" % v
        ratio = lambda a, b: "-" if a is None or not b else "%.2f" % (a / b)
        print("| %s | %s | %s | %s | %d | %.3f | %s | %s | %s | %s |" % (
            model, direction, layout, threads, len(rows), ms, fmt(plan_ms), fmt(peer_ms), ratio(peer_ms, ms),
            ratio(peer_ms, plan_ms)))
    if worst <= 0:
        return
    print()
    print("| model | dir | layout | threads | layer | count | algo | ratio | GB/s (machine's) | share of model time |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (model, direction, layout, threads), rows in groups.items():
        total = sum(number(r["ms"]) * c for r, c in rows)
        rated = [(number(r.get("ratio")), r, c) for r, c in rows if number(r.get("ratio")) is not None]
        for ratio, r, c in sorted(rated, key=lambda t: t[0])[:worst]:
            gbs, mem = number(r.get("gbs")), number(r.get("mem_gbs"))
            print("| %s | %s | %s | %s | %s | %d | %s | %.2f | %s | %.0f%% |" % (
                model, direction, layout, threads, r["desc"], c, r["algo"], ratio,
                "-" if gbs is None else "%.2f (%s)" % (gbs, "-" if mem is None else "%.1f" % mem),
                100.0 * number(r["ms"]) * c / total if total else 0.0))


def main():
    args = sys.argv[1:]
    if not args:
        usage("name a command")
    command, args = args[0], args[1:]
    if command == "suite":
        suite(args)
    elif command == "summary":
        summary(args)
    elif command == "list":
        import torchvision
        print("\n".join(torchvision.models.list_models()))
    else:
        usage("unknown command '%s'" % command)


if __name__ == "__main__":
    main()
