#!/usr/bin/python3
"""A picture of an `nconv bench --csv` table: GFLOP/s of nconv, oneDNN and PyTorch per problem and
direction, as bars, with the machine's FMA peak as a line. PIL only (Debian's python3-pil).

    plot.py TABLE.csv --out PICTURE.png [--layout nchw|nhwc] [--threads N] [--dirs fwd,bwd_d,bwd_w]
            [--title TEXT]

TABLE.csv is `nconv bench --csv` output or bench/torch_bench.py's (which adds PyTorch's torch_ms).
Rows named MODEL:L<i>x<count> (bench/models.py suites) are summed per model and direction, each
layer weighted by its count, as bench/models.py summary does: one group of bars per model.
"""
import argparse
import collections
import csv
import re
import sys

from PIL import Image, ImageDraw, ImageFont

ENGINES = [('nconv', (31, 119, 180)), ('oneDNN', (255, 127, 14)), ('PyTorch', (44, 160, 44))]
LAYER = re.compile(r'^(?P<model>[^:]+):L\d+x(?P<count>\d+)$')


def font(size, bold=False):
    name = 'DejaVuSans-Bold.ttf' if bold else 'DejaVuSans.ttf'
    try:
        return ImageFont.truetype('/usr/share/fonts/truetype/dejavu/' + name, size)
    except OSError:
        return ImageFont.load_default()


def number(row, key):
    try:
        return float(row.get(key) or '')
    except ValueError:
        return None


def groups(rows):
    """(label, {engine: GFLOP/s}) per problem and direction (per model and direction for model suites),
    and the FMA peak."""
    peak = None
    acc = collections.OrderedDict()
    for r in rows:
        gf, ms, pct = number(r, 'gflops'), number(r, 'ms'), number(r, 'peak_pct')
        if not gf or not ms:
            continue
        if pct:
            peak = gf * 100 / pct
        m = LAYER.match(r['name'])
        label, count = ((m.group('model'), int(m.group('count'))) if m else (r['name'], 1))
        a = acc.setdefault((label, r['dir']), {'flop': 0.0, 'nconv': 0.0, 'oneDNN': 0.0, 'PyTorch': 0.0,
                                              'missing': set()})
        a['flop'] += count * gf * ms  # GFLOP/s * ms = MFLOP
        for engine, key in (('nconv', 'ms'), ('oneDNN', 'onednn_ms'), ('PyTorch', 'torch_ms')):
            t = number(r, key)
            if t:
                a[engine] += count * t
            else:
                a['missing'].add(engine)
    out = []
    for (label, d), a in acc.items():
        rates = {e: a['flop'] / a[e] for e, _ in ENGINES if e not in a['missing'] and a[e] > 0}
        out.append(('%s %s' % (label, d), rates))
    return out, peak


def draw(groups_, peak, title, path):
    bar, gap, left, right, top = 14, 12, 250, 90, 90
    engines = [e for e in ENGINES if any(e[0] in g[1] for g in groups_)]
    height = top + len(groups_) * (len(engines) * bar + gap) + 50
    width = 1200
    img = Image.new('RGB', (width, height), 'white')
    d = ImageDraw.Draw(img)
    f, fb, fs = font(13), font(16, True), font(11)
    top_rate = max([peak or 0] + [v for _, g in groups_ for v in g.values()]) * 1.05
    scale = (width - left - right) / top_rate
    d.text((10, 10), title, fill='black', font=fb)
    x = 10
    for name, color in engines:  # legend
        d.rectangle([x, 42, x + 14, 56], fill=color)
        d.text((x + 20, 42), name, fill='black', font=f)
        x += 30 + int(d.textlength(name, font=f))
    if peak:
        d.line([x + 10, 49, x + 40, 49], fill=(200, 0, 0), width=2)
        d.text((x + 46, 42), 'FMA peak %.0f GFLOP/s' % peak, fill='black', font=f)
    y = top
    for label, rates in groups_:
        h = len(engines) * bar
        d.text((10, y + h / 2 - 8), label[:34], fill='black', font=f)
        for i, (name, color) in enumerate(engines):
            v = rates.get(name)
            if v is None:
                continue
            y0 = y + i * bar
            d.rectangle([left, y0 + 1, left + max(1, int(v * scale)), y0 + bar - 2], fill=color)
            d.text((left + int(v * scale) + 4, y0), '%.0f' % v, fill='black', font=fs)
        y += h + gap
    axis = top + len(groups_) * (len(engines) * bar + gap)
    d.line([left, top - 6, left, axis], fill='black')
    step = 10 ** len(str(int(top_rate / 5))) / 10
    while top_rate / step > 12:
        step *= 2
    t = 0.0
    while t <= top_rate:
        xt = left + int(t * scale)
        d.line([xt, axis, xt, axis + 5], fill='black')
        d.text((xt - 10, axis + 8), '%g' % t, fill='black', font=fs)
        t += step
    d.text((left, axis + 24), 'GFLOP/s (higher is faster)', fill='black', font=f)
    if peak:
        xp = left + int(peak * scale)
        d.line([xp, top - 6, xp, axis], fill=(200, 0, 0), width=2)
    img.save(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('table')
    ap.add_argument('--out', required=True)
    ap.add_argument('--layout', choices=['nchw', 'nhwc'], default='nhwc')
    ap.add_argument('--threads', type=int)
    ap.add_argument('--dirs', default='fwd,bwd_d,bwd_w')
    ap.add_argument('--title', default='nconv bench')
    a = ap.parse_args()
    rows = [r for r in csv.DictReader(open(a.table)) if r.get('layout') == a.layout and r.get('dir') in
            a.dirs.split(',') and (a.threads is None or int(r['threads']) == a.threads)]
    if not rows:
        print('plot.py: no rows of layout %s%s in %s' % (a.layout, '' if a.threads is None else
                                                         ', %d threads' % a.threads, a.table), file=sys.stderr)
        return 2
    g, peak = groups(rows)
    draw(g, peak, a.title, a.out)
    print('plot.py: %d groups of bars in %s' % (len(g), a.out))
    return 0


if __name__ == '__main__':
    sys.exit(main())
